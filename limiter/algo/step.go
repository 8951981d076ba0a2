package algo

import "math/bits"

// ---- token bucket ----

// bucketAt returns the tokens (units) of s refilled to now, capped at
// B·P, and the time of that refill (s's own when now is before it).
func bucketAt(s State, p Params, now int64) (u, last int64) {
	cap := p.Burst * p.Period
	u, last = min(s.A, cap), s.B
	if now > last {
		// (now − last)·L without overflowing: a gap of days at a high rate
		// fills any bucket.
		hi, lo := bits.Mul64(uint64(now-last), uint64(p.Limit))
		if hi != 0 || lo >= uint64(cap-u) {
			u = cap
		} else {
			u += int64(lo)
		}
		last = now
	}
	return u, last
}

func decideBucket(s State, p Params, now int64) (State, bool, int64) {
	u, last := bucketAt(s, p, now)
	if u < p.Period {
		return s, false, ceilDiv(p.Period-u, p.Limit)
	}
	return State{A: u - p.Period, B: last}, true, 0
}

// ---- GCRA ----

// debt returns tat − now in units of 1/L ms, floored at 0 (tat = max(TAT,
// now)), and the time it is measured at: now, or s's base when now is
// before it.
func debt(s State, p Params, now int64) (d, t int64) {
	t = max(now, s.A)
	hi, lo := bits.Mul64(uint64(t-s.A), uint64(p.Limit))
	if hi != 0 || lo >= uint64(s.B) {
		return 0, t
	}
	return s.B - int64(lo), t
}

func decideGCRA(s State, p Params, now int64) (State, bool, int64) {
	d, t := debt(s, p, now)
	if tau := (p.Burst - 1) * p.Period; d > tau {
		return s, false, ceilDiv(d-tau, p.Limit)
	}
	return State{A: t, B: d + p.Period}, true, 0
}

// ---- fixed window ----

// windowEnd returns the end of the clock-aligned window [k·P, (k+1)·P)
// holding now.
func windowEnd(now, period int64) int64 {
	k := now / period
	if now%period < 0 {
		k--
	}
	return (k + 1) * period
}

func decideFixed(s State, p Params, now int64) (State, bool, int64) {
	end, n := s.A, s.B
	if now >= end {
		end, n = windowEnd(now, p.Period), 0
	}
	if n+1 > p.Limit {
		return s, false, end - now
	}
	return State{A: end, B: n + 1}, true, 0
}

// ---- estimated sliding window ----

func packSliding(end, curr, prev int64) State {
	return State{A: end, B: int64(uint64(uint32(curr)) | uint64(uint32(prev))<<32)}
}

func unpackSliding(s State) (end, curr, prev int64) {
	return s.A, int64(uint32(s.B)), int64(uint32(uint64(s.B) >> 32))
}

// roll returns s's windows as of now: the current window's end and count
// and the previous window's count. A window that ended becomes the
// previous one; two that ended leave nothing.
func roll(s State, p Params, now int64) (end, curr, prev int64) {
	end, curr, prev = unpackSliding(s)
	if now >= end {
		next := windowEnd(now, p.Period)
		if next == end+p.Period {
			prev = curr
		} else {
			prev = 0
		}
		end, curr = next, 0
	}
	return end, curr, prev
}

// left returns the part of the current window still to come, P − (now −
// start), as a weight of the previous window: at most P (a state from
// before a live change of P, or from a clock that went back, counts the
// previous window whole).
func left(end, now, period int64) int64 { return min(end-now, period) }

func decideSliding(s State, p Params, now int64) (State, bool, int64) {
	end, curr, prev := roll(s, p, now)
	// curr + 1 + prev·(P − e)/P ≤ L, multiplied by P: every count is at
	// most 2³¹ and P < 2³¹, so no product overflows.
	if (curr+1)*p.Period+prev*left(end, now, p.Period) > p.Limit*p.Period {
		return s, false, limitedUntil(end, curr, prev, p) - now
	}
	return packSliding(end, curr+1, prev), true, 0
}

// limitedUntil is Rali's limitedUntil (the Rali limiter) for a rejection: the
// first ms start + P·r with curr + 1 + prev·(1 − r) ≤ L, r = 1 − (L − curr
// − 1)/prev, rounded up to the ms; the window's end when curr + 1 > L or
// prev = 0. It is never later than the first admission possible without
// more requests (at the window's end the previous window may still weigh
// enough to reject).
func limitedUntil(end, curr, prev int64, p Params) int64 {
	if curr+1 > p.Limit || prev == 0 {
		return end
	}
	return end - p.Period + ceilDiv(p.Period*(prev-(p.Limit-curr-1)), prev)
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
