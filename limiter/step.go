package limiter

import "math"

// HybridState is what the hybrid rule (docs/limiting.md) reads of one (peer,
// group): plain values, whatever holds them (the local slab's entry and
// window, a Redis hash).
type HybridState struct {
	// Inflight is the requests admitted and not yet released.
	Inflight int64
	// Tokens is the leaky-bucket tokens consumed, counted upward.
	Tokens int64
	// Window is the number of unexpired window timestamps: those t with
	// t + sliding_window_duration > now.
	Window int64
	// Oldest is the oldest unexpired window timestamp, Unix ms; it means
	// something only when Window > 0.
	Oldest int64
}

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

// StepHybrid is the hybrid decision (docs/limiting.md), the one place it is
// written: for state s of a (peer, group) with settings g, at ms, with the
// group's next leaky tick at nextTick, it returns the outcome and the state
// after it. Concurrency first (the peer's own, PeerConcurrencyLimit: with
// scope "shard" the Limiter checks the shard's before), then the sliding
// window, then the leaky bucket:
//
//	inflight + 1 > concurrency_limit       → reject (concurrency)
//	window + 1 > sliding_window_limit:
//	    tokens + 1 > leaky_limit           → reject (rate_limit)
//	    else tokens += 1; inflight += 1    → allow via leaky_bucket
//	else window += [ms]; inflight += 1     → allow via sliding_window
//
// A rejection changes nothing. On ViaSliding the holder of the state
// appends ms to the window (the returned Window and Oldest count it); on
// ViaLeaky it takes the returned Tokens. StepHybrid is pure: no clock, no
// lock, no allocation.
func StepHybrid(s HybridState, g *GroupSettings, ms, nextTick int64) (HybridState, Outcome) {
	switch {
	case s.Inflight+1 > g.PeerConcurrencyLimit():
		return s, Outcome{Reason: ReasonConcurrency, RetryAfter: 1}
	case s.Window+1 > g.SlidingWindowLimit:
		if s.Tokens+1 > g.LeakyLimit {
			return s, Outcome{Reason: ReasonRateLimit, RetryAfter: retryAfter(s, g, ms, nextTick)}
		}
		s.Tokens++
		s.Inflight++
		return s, Outcome{Via: ViaLeaky}
	default:
		if s.Window == 0 || ms < s.Oldest {
			s.Oldest = ms
		}
		s.Window++
		s.Inflight++
		return s, Outcome{Via: ViaSliding}
	}
}

// retryAfter is the Retry-After of a rate_limit rejection: the sooner of
// the next leaky tick (when the bucket can take tokens at all) and the
// expiry of the oldest window timestamp (when the window admits at all),
// in whole seconds rounded up, at least 1.
func retryAfter(s HybridState, g *GroupSettings, ms, nextTick int64) int64 {
	wait := int64(math.MaxInt64)
	if g.LeakyLimit > 0 {
		wait = nextTick - ms
	}
	if g.SlidingWindowLimit > 0 && s.Window > 0 {
		wait = min(wait, s.Oldest+g.SlidingWindowDuration-ms)
	}
	if wait == math.MaxInt64 {
		wait = nextTick - ms
	}
	return max(1, (wait+999)/1000)
}

// ReduceHybrid is the manual reduction (docs/limiting.md, "Reduce") on state
// s: one token given back when any was consumed (Reduced), else nothing
// (ReduceNoop).
func ReduceHybrid(s HybridState) (HybridState, ReduceResult) {
	if s.Tokens <= 0 {
		return s, ReduceNoop
	}
	s.Tokens--
	return s, Reduced
}

// LeakyTicks applies n ≥ 1 leaky ticks of reduction r (docs/limiting.md, "The
// hybrid decision") to a bucket holding tokens consumed: each tick takes r
// tokens away, floored at 0, and a tick that finds the bucket at 0 deletes
// it. It returns the tokens left, how many ticks reduced the bucket (those
// before the deletion), and whether it was deleted (left is then 0).
func LeakyTicks(tokens, n, r int64) (left, reducing int64, deleted bool) {
	// m ticks drain the bucket, the next one deletes it.
	if m := (tokens + r - 1) / r; n > m {
		return 0, m, true
	}
	return max(0, tokens-n*r), n, false
}

// CleanupCut returns the cut of cleanup tick k of group g (docs/limiting.md,
// "Cleanup ticks", and §6.3 for 2.9.7: Group.CleanupAge): the tick drops
// every window timestamp older than the cut.
func CleanupCut(g *Group, k int64) int64 {
	return g.Cleanup.TimeOf(k) - g.CleanupAge()
}
