package limiter

import (
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// Arweave returns the four Arweave 2.9.7 header fields of the decision
// (docs/replies.md, package ratelimit), computed from the state of the (peer,
// group) right after it; ok is false when limits did not apply (exempt
// peer, mode off, the switch off, a backend that could not decide) or the
// decision is a denial: such a reply carries no rate-limit field, as the
// node's bypass groups carry none. A dry_run group's would-be rejection
// gets the rejection's fields. A group of another algorithm than the
// hybrid (docs/limiting.md, "Other algorithms") gets algoFields'.
func (d *Decision) Arweave() (f ratelimit.Fields, ok bool) {
	q := &d.q
	g := q.g
	if g == nil || !d.Limited {
		return f, false
	}
	if g.Algorithm != algo.Hybrid {
		return d.algoFields()
	}
	h := ratelimit.Hybrid{
		Now:              q.ms,
		WindowLimit:      g.SlidingWindowLimit,
		Window:           q.u.Window,
		Oldest:           q.u.Oldest,
		LeakyLimit:       g.LeakyLimit,
		Tokens:           q.u.Tokens,
		NextTick:         q.u.ResetAt,
		TickReduction:    g.LeakyTickReduction,
		ConcurrencyLimit: g.ConcurrencyLimit,
	}
	switch {
	case d.Via == ViaSliding:
		h.Outcome = ratelimit.AdmittedWindow
	case d.Via == ViaLeaky:
		h.Outcome = ratelimit.AdmittedBucket
	case d.Reason == ReasonConcurrency, d.Reason == ReasonAdaptive:
		// A shed is a concurrency rejection to an Arweave client: nothing
		// left, again in a second.
		h.Outcome = ratelimit.RejectedConcurrency
	case d.Reason == ReasonRateLimit:
		h.Outcome = ratelimit.RejectedRate
	default:
		return f, false
	}
	return ratelimit.ArweaveFields(&h), true
}

// algoFields are the Arweave fields of a decision in a group of another
// algorithm (docs/replies.md): expiring = usage = the limit, remaining what is
// left after the decision, reset the seconds until an admission is
// possible again (0 while one is, rounded up as the IETF t is), amount
// what that moment restores (1, or the limit when a fixed window ends). A
// concurrency rejection, and an adaptive shed, is the node's {concurrency,
// 0, 1, concurrency}.
func (d *Decision) algoFields() (ratelimit.Fields, bool) {
	g := d.q.g
	f := ratelimit.Fields{Expiring: g.Limit, Usage: g.Limit, Concurrency: g.ConcurrencyLimit}
	switch {
	case d.Reason == ReasonConcurrency, d.Reason == ReasonAdaptive:
		c := g.ConcurrencyLimit
		f.Expiring, f.Remaining, f.Reset, f.ResetAmount = c, 0, 1, c
	case d.Via == ViaAlgorithm, d.Reason == ReasonRateLimit:
		q := d.Quota()
		f.Remaining, f.Reset, f.ResetAmount = q.BucketRemaining, (q.BucketReset+999)/1000, q.ResetAmount
	default:
		return f, false
	}
	return f, true
}

// IETFItems appends to dst the IETF RateLimit items of q for group
// (docs/replies.md): the bucket as the group's policy and, when the group has
// a sliding window, the window as "<group>-window"; seconds rounded up. These
// are the values the data plane writes today.
func (q *Quota) IETFItems(group string, dst []ratelimit.IETFItem) []ratelimit.IETFItem {
	ceil := func(ms int64) int64 { return (ms + 999) / 1000 }
	dst = append(dst, ratelimit.IETFItem{Name: group, Quota: q.BucketLimit, Window: ceil(q.BucketWindow),
		Remaining: q.BucketRemaining, Reset: ceil(q.BucketReset)})
	if q.WindowLimit > 0 {
		dst = append(dst, ratelimit.IETFItem{Name: group, Suffix: "-window", Quota: q.WindowLimit, Window: ceil(q.WindowDuration),
			Remaining: q.WindowRemaining, Reset: ceil(q.WindowReset)})
	}
	return dst
}
