package limiter

import "github.com/limiterd/limiterd/limiter/peer"

// An Observer is told of a Limiter's decisions (WithObserver): what a
// dashboard records of them (who is hammering, the requests a what-if
// replays) and what a log reports (the refusals). It is called on the
// goroutine that decided, after the decision is made and outside every
// lock of the Limiter and its Backend, once per request that Check or
// Decide decided: it must be safe for concurrent use, must not block, and
// must not call back into the Limiter. The Observation is valid only
// during the call.
type Observer interface {
	Observe(o *Observation)
}

// Observation is one decision as an Observer sees it.
type Observation struct {
	// MS is the decision's time, Unix milliseconds.
	MS int64
	// Peer is the key the peer's limits are tracked under.
	Peer peer.Key
	// Group is the group that decided, or ExemptPathGroup for a request on
	// an exempt path (only a denied peer's is observed: the others are not
	// decided).
	Group GroupID
	// Decided is true when the group's limits were evaluated: its Backend
	// admitted or rejected the request. It is false for a denied peer, an
	// exempt one, a group that is off, the switch off, a Backend that could
	// not decide, and a request refused because its worker shard was full.
	Decided bool
	// Allowed is the decision's: a dry_run group's would-be rejection is
	// allowed, with its Reason set.
	Allowed bool
	// Reason is why the request was (or, in a dry_run group, would have
	// been) rejected; ReasonNone when admitted.
	Reason Reason
}

// WithObserver makes o see every decision of the Limiter (see Observer). A
// nil o observes nothing, which is also the default.
func WithObserver(o Observer) Option { return func(l *Limiter) { l.observer = o } }

// observe tells the observer of d, made at ms for peer k; decided says the
// Backend was asked and answered.
func (l *Limiter) observe(ms int64, k *peer.Key, d *Decision, decided bool) {
	o := Observation{MS: ms, Peer: *k, Group: d.Group, Decided: decided, Allowed: d.Allowed, Reason: d.Reason}
	l.observer.Observe(&o)
}
