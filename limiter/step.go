package limiter

import "github.com/limiterd/limiterd/limiter/algo"

// Outcome is how one request was decided.
type Outcome struct {
	// Via is how it was admitted; ViaNone when rejected.
	Via Via
	// Reason is why it was rejected; ReasonNone when admitted.
	Reason Reason
	// RetryAfter is the Retry-After of a rejection, whole seconds ≥ 1.
	RetryAfter int64
}

// Allowed reports whether o admits the request.
func (o Outcome) Allowed() bool { return o.Via != ViaNone }

// viaOf maps how a step admitted to how a Decision says it.
var viaOf = [...]Via{algo.ViaNone: ViaNone, algo.ViaWindow: ViaSliding, algo.ViaBucket: ViaLeaky, algo.ViaAlgorithm: ViaAlgorithm}

// OutcomeOf returns the Outcome of a step of the group's algorithm
// (algo.Step): a concurrency rejection with Retry-After 1, a rate_limit
// rejection with the Retry-After of its wait, or the way it admitted.
func OutcomeOf(r *algo.Result) Outcome {
	switch {
	case r.Via != algo.ViaNone:
		return Outcome{Via: viaOf[r.Via&3]}
	case r.Concurrency:
		return Outcome{Reason: ReasonConcurrency, RetryAfter: 1}
	}
	// Whole seconds rounded up, at least 1.
	return Outcome{Reason: ReasonRateLimit, RetryAfter: max(1, (r.Wait+999)/1000)}
}

// Limits returns what the group's algorithm decides with (algo.Step): its
// limits, the peer's concurrency limit (PeerConcurrencyLimit) and the
// hybrid's keys.
func (s *GroupSettings) Limits() algo.Limits {
	return algo.Limits{
		Params:         s.Params(),
		Concurrency:    s.PeerConcurrencyLimit(),
		WindowLimit:    s.SlidingWindowLimit,
		WindowDuration: s.SlidingWindowDuration,
		LeakyLimit:     s.LeakyLimit,
		LeakyReduction: s.LeakyTickReduction,
		LeakyInterval:  s.LeakyTickInterval,
	}
}

// CleanupCut returns the cut of cleanup tick k of group g (docs/limiting.md,
// "Cleanup ticks", and §6.3 for 2.9.7: Group.CleanupAge): the tick drops
// every window timestamp older than the cut.
func CleanupCut(g *Group, k int64) int64 {
	return g.Cleanup.TimeOf(k) - g.CleanupAge()
}
