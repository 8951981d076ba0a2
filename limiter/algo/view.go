package algo

import (
	"math"
	"math/bits"
)

// Quota is a state as the RateLimit header fields (docs/replies.md) and the
// dashboard read it at one instant.
type Quota struct {
	// Remaining is how many requests would be admitted now, one after the
	// other (the hybrid: its leaky tokens left).
	Remaining int64 `json:"remaining"`
	// Reset is the ms until a request can be admitted again: 0 while
	// Remaining > 0, else what a rejection's Retry-After is made of (the
	// hybrid: until its next leaky tick).
	Reset int64 `json:"reset_ms"`
	// Amount is what that moment restores: one admission (a token, an
	// emission interval, a window timestamp, the estimate's next step),
	// or the whole limit when a fixed window ends; 0 for the hybrid, whose
	// tick restores leaky_tick_reduction tokens.
	Amount int64 `json:"amount"`
	// Limit and Period are the policy the fields describe: the limit and
	// period of the kind, the hybrid's leaky_limit and leaky_tick_interval.
	Limit  int64 `json:"-"`
	Period int64 `json:"-"`
	// The hybrid's window (WindowLimit 0: none): sliding_window_limit,
	// the room left in it, sliding_window_duration, and the ms until its
	// oldest timestamp expires (0 when it holds none).
	WindowLimit     int64 `json:"-"`
	WindowRemaining int64 `json:"-"`
	WindowDuration  int64 `json:"-"`
	WindowReset     int64 `json:"-"`
}

// QuotaOf returns the quota of s and h (Step's arguments, or its Result's)
// at now, the hybrid's next leaky tick at next.
func QuotaOf(k Kind, s State, h Held, l *Limits, now, next int64) Quota {
	p := l.Params
	switch k {
	case Hybrid:
		q := Quota{Limit: l.LeakyLimit, Period: l.LeakyInterval, Remaining: max(0, l.LeakyLimit-s.A), Reset: next - now,
			WindowLimit: l.WindowLimit, WindowDuration: l.WindowDuration}
		if l.WindowLimit > 0 {
			q.WindowRemaining = max(0, l.WindowLimit-h.Count)
			if h.Count > 0 {
				q.WindowReset = max(0, h.Mark+l.WindowDuration-now)
			}
		}
		return q
	case TokenBucket:
		u, _ := bucketAt(s, p, now)
		q := Quota{Remaining: u / p.Period, Amount: 1}
		if q.Remaining == 0 {
			q.Reset = ceilDiv(p.Period-u, p.Limit)
		}
		return q.of(p)
	case GCRA:
		d, _ := debt(s, p, now)
		q := Quota{Amount: 1}
		if tau := (p.Burst - 1) * p.Period; d <= tau {
			q.Remaining = (tau-d)/p.Period + 1
		} else {
			q.Reset = ceilDiv(d-tau, p.Limit)
		}
		return q.of(p)
	case FixedWindow:
		end, n := s.A, s.B
		if now >= end {
			end, n = windowEnd(now, p.Period), 0
		}
		q := Quota{Remaining: max(0, p.Limit-n), Amount: p.Limit}
		if q.Remaining == 0 {
			q.Reset = end - now
		}
		return q.of(p)
	case SlidingLog:
		q := Quota{Remaining: max(0, p.Limit-h.Count), Amount: 1}
		if q.Remaining == 0 {
			q.Reset = max(1, h.Mark+p.Period-now)
		}
		return q.of(p)
	case SlidingWindow:
		end, curr, prev := roll(s, p, now)
		room := p.Limit*p.Period - curr*p.Period - prev*left(end, now, p.Period)
		q := Quota{Remaining: max(0, room/p.Period), Amount: 1}
		if q.Remaining == 0 {
			q.Reset = limitedUntil(end, curr, prev, p) - now
		}
		return q.of(p)
	}
	return Quota{}
}

func (q Quota) of(p Params) Quota {
	q.Limit, q.Period = p.Limit, p.Period
	return q
}

// Refused returns the quota of a request refused before its state was
// read (its worker shard full, the adaptive limit): nothing left, an
// admission possible again in a second, as the Arweave fields say of a
// concurrency rejection.
func Refused(k Kind, l *Limits) Quota {
	if k == Hybrid {
		q := Quota{Limit: l.LeakyLimit, Period: l.LeakyInterval, Reset: 1000, WindowLimit: l.WindowLimit, WindowDuration: l.WindowDuration}
		if l.WindowLimit > 0 {
			q.WindowReset = 1000
		}
		return q
	}
	return Quota{Reset: 1000, Amount: 1}.of(l.Params)
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
	l := Limits{Params: p}
	v := View{Quota: QuotaOf(k, s, Held{}, &l, now, 0)}
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
