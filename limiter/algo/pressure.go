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

// PressureAt grades s at now (any kind but Hybrid and SlidingLog): its
// quota's Remaining against a fresh state's, the burst of a token bucket
// or GCRA, the limit of a window.
func PressureAt(k Kind, s State, p Params, now int64) Pressure {
	fresh := p.Limit
	if k.HasBurst() {
		fresh = p.Burst
	}
	return PressureOf(QuotaOf(k, s, p, now).Remaining, fresh)
}
