package algo

import (
	"math"
	"math/bits"
)

// Quota is a state as the RateLimit header fields (docs/replies.md) and the
// dashboard read it at one instant.
type Quota struct {
	// Remaining is how many requests would be admitted now, one after the
	// other.
	Remaining int64 `json:"remaining"`
	// Reset is the ms until a request can be admitted again: 0 while
	// Remaining > 0, else what a rejection's Retry-After is made of.
	Reset int64 `json:"reset_ms"`
	// Amount is what that moment restores: one admission (a token, an
	// emission interval, a window timestamp, the estimate's next step),
	// or the whole limit when a fixed window ends.
	Amount int64 `json:"amount"`
}

// QuotaOf returns the quota of s at now (any kind but Hybrid and
// SlidingLog, whose quota package limiter computes from its log).
func QuotaOf(k Kind, s State, p Params, now int64) Quota {
	switch k {
	case TokenBucket:
		u, _ := bucketAt(s, p, now)
		q := Quota{Remaining: u / p.Period, Amount: 1}
		if q.Remaining == 0 {
			q.Reset = ceilDiv(p.Period-u, p.Limit)
		}
		return q
	case GCRA:
		d, _ := debt(s, p, now)
		q := Quota{Amount: 1}
		if tau := (p.Burst - 1) * p.Period; d <= tau {
			q.Remaining = (tau-d)/p.Period + 1
		} else {
			q.Reset = ceilDiv(d-tau, p.Limit)
		}
		return q
	case FixedWindow:
		end, n := s.A, s.B
		if now >= end {
			end, n = windowEnd(now, p.Period), 0
		}
		q := Quota{Remaining: max(0, p.Limit-n), Amount: p.Limit}
		if q.Remaining == 0 {
			q.Reset = end - now
		}
		return q
	case SlidingWindow:
		end, curr, prev := roll(s, p, now)
		room := p.Limit*p.Period - curr*p.Period - prev*left(end, now, p.Period)
		q := Quota{Remaining: max(0, room/p.Period), Amount: 1}
		if q.Remaining == 0 {
			q.Reset = limitedUntil(end, curr, prev, p) - now
		}
		return q
	}
	return Quota{}
}

// LogQuota is the quota of a sliding log holding count timestamps that
// still count at now, nth being the (count − L)-th oldest of them
// (0-based; any value when count < L): it must expire before a request is
// admitted.
func LogQuota(p Params, count, nth, now int64) Quota {
	q := Quota{Remaining: max(0, p.Limit-count), Amount: 1}
	if q.Remaining == 0 {
		q.Reset = max(1, nth+p.Period-now)
	}
	return q
}

// View is a state in the algorithm's own terms, for the admin API and the
// dashboard.
type View struct {
	Quota
	// Tokens is the token bucket's tokens now (fractional).
	Tokens float64 `json:"tokens,omitempty"`
	// TAT is the GCRA's theoretical arrival time, in ms after now (0: not
	// after now).
	TAT int64 `json:"tat_ms,omitempty"`
	// Count is the requests counted in the current window (fixed,
	// sliding) or the last period (sliding log).
	Count int64 `json:"count,omitempty"`
	// Previous is the sliding window's previous count.
	Previous int64 `json:"previous,omitempty"`
	// Estimate is the sliding window's estimated usage now.
	Estimate float64 `json:"estimate,omitempty"`
	// WindowEnd is the ms until the current window ends (fixed, sliding).
	WindowEnd int64 `json:"window_end_ms,omitempty"`
}

// ViewOf returns s at now in k's terms (not Hybrid, not SlidingLog).
func ViewOf(k Kind, s State, p Params, now int64) View {
	v := View{Quota: QuotaOf(k, s, p, now)}
	switch k {
	case TokenBucket:
		u, _ := bucketAt(s, p, now)
		v.Tokens = float64(u) / float64(p.Period)
	case GCRA:
		d, _ := debt(s, p, now)
		v.TAT = ceilDiv(d, p.Limit)
	case FixedWindow:
		if now < s.A {
			v.Count, v.WindowEnd = s.B, s.A-now
		} else {
			v.WindowEnd = windowEnd(now, p.Period) - now
		}
	case SlidingWindow:
		end, curr, prev := roll(s, p, now)
		v.Count, v.Previous, v.WindowEnd = curr, prev, end-now
		v.Estimate = float64(curr) + float64(prev)*float64(left(end, now, p.Period))/float64(p.Period)
	}
	return v
}

// Rescale converts s, made under the limits from, to the limits to of the
// same algorithm (a live edit or a restart that changed L, P or B keeps
// the entries): a token bucket keeps its tokens (its units are 1/P of a
// token), capped at the new B; a GCRA keeps its TAT (its units are 1/L
// ms). Counts and window ends are in requests and ms and stay as they are.
// Whatever s holds (a snapshot read from disk), the result is within the
// bounds the decisions rely on: no count above MaxValue, nothing negative.
func Rescale(k Kind, s State, from, to Params) State {
	switch k {
	case TokenBucket:
		if from.Period != to.Period {
			s.A = mulDiv(s.A, to.Period, from.Period, false)
		}
		s.A = max(0, min(s.A, to.Burst*to.Period))
	case GCRA:
		if from.Limit != to.Limit {
			s.B = mulDiv(s.B, to.Limit, from.Limit, true)
		}
		s.B = max(0, min(s.B, math.MaxInt64>>1))
	case FixedWindow:
		s.B = max(0, min(s.B, MaxValue))
	case SlidingWindow:
		end, curr, prev := unpackSliding(s)
		s = packSliding(end, min(curr, MaxValue), min(prev, MaxValue))
	}
	return s
}

// Shift moves the times s holds by d ms (a snapshot restored after the
// clock went back moves with it).
func Shift(k Kind, s State, d int64) State {
	switch k {
	case TokenBucket:
		s.B += d
	case GCRA, FixedWindow, SlidingWindow:
		s.A += d
	}
	return s
}

// mulDiv returns a·b/c (a, b ≥ 0, c > 0) rounded down or up, without
// overflowing the product, capped at 2⁶².
func mulDiv(a, b, c int64, up bool) int64 {
	if a <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64 >> 1
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if up && r != 0 {
		q++
	}
	return int64(min(q, math.MaxInt64>>1))
}
