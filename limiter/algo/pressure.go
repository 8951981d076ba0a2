package algo

// Pressure grades how much a (peer, group)'s state restricts its next
// requests, for eviction at max_tracked (package limiter evicts the
// lowest first, and among equals the entry idle longest): forgetting an
// entry of a low grade gives its peer back little it did not have.
type Pressure uint8

// The grades, in the order eviction prefers them.
const (
	// Light: at most one admission's worth short of a fresh entry — a peer
	// seen once, or whose use has lapsed.
	Light Pressure = iota
	// Some: more than one admission spent, and the next one admitted.
	Some
	// Limited: the next request would be rejected for its rate.
	Limited
)

// PressureOf grades a state that admits remaining more requests at once,
// where a fresh state admits fresh.
func PressureOf(remaining, fresh int64) Pressure {
	switch {
	case remaining <= 0:
		return Limited
	case remaining >= fresh-1:
		return Light
	}
	return Some
}

// PressureAt grades s and h at now, its ticks applied: its quota's
// Remaining against a fresh state's, the burst of a token bucket or GCRA,
// the limit of a window or a log — PressureOf(QuotaOf(…).Remaining,
// fresh), without QuotaOf's divisions; for the hybrid the room left in its
// window and its bucket together against both limits.
func PressureAt(k Kind, s State, h Held, l *Limits, now int64) Pressure {
	p := l.Params
	switch k {
	case Hybrid:
		return PressureOf(max(0, l.WindowLimit-h.Count)+max(0, l.LeakyLimit-s.A), l.WindowLimit+l.LeakyLimit)
	case SlidingLog:
		return PressureOf(p.Limit-h.Count, p.Limit)
	case TokenBucket:
		u, _ := bucketAt(s, p, now) // Remaining is u/P
		return grade(u, p.Period, p.Burst)
	case GCRA:
		// Remaining is (τ − d)/P + 1 while d ≤ τ = (B − 1)·P, else 0: at
		// least B − 1 when d ≤ P.
		switch d, _ := debt(s, p, now); {
		case d > (p.Burst-1)*p.Period:
			return Limited
		case d <= p.Period:
			return Light
		}
		return Some
	case FixedWindow:
		n := s.B
		if now >= s.A {
			n = 0
		}
		return PressureOf(p.Limit-n, p.Limit)
	case SlidingWindow:
		end, curr, prev := roll(s, p, now) // Remaining is room/P
		return grade(p.Limit*p.Period-curr*p.Period-prev*left(end, now, p.Period), p.Period, p.Limit)
	}
	return Light
}

// grade is PressureOf(units/unit, fresh) for unit > 0, by multiplication.
func grade(units, unit, fresh int64) Pressure {
	switch {
	case units < unit:
		return Limited
	case units >= (fresh-1)*unit:
		return Light
	}
	return Some
}
