package limiter

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Via says how a request was admitted.
type Via uint8

// The ways a request is admitted.
const (
	ViaNone      Via = iota // rejected
	ViaSliding              // within the sliding window
	ViaLeaky                // a leaky-bucket token
	ViaUnlimited            // no limiting applied: exempt peer, mode off, switch off
	ViaAlgorithm            // by the group's algorithm other than the hybrid
)

var viaNames = [...]string{"none", "sliding_window", "leaky_bucket", "no_limiting_applied", "algorithm"}

// String returns the name of v.
func (v Via) String() string { return viaNames[v] }

// Reason says why a request was (or, in dry_run, would have been) rejected.
type Reason uint8

// The reasons of a rejection.
const (
	ReasonNone        Reason = iota
	ReasonConcurrency        // too many requests in flight
	ReasonRateLimit          // window full and bucket exhausted
	ReasonDenied             // the peer is on the deny list
	// ReasonUnavailable: the group's Backend could not decide (its store
	// cannot be reached in time); the data plane answers 503. A dry_run
	// group does not let it through: dry_run lets through what the limits
	// would reject, and here no limit was evaluated. Whether to admit
	// while a store is down is the backend's own choice (docs/cluster.md
	// on_failure), made before it answers.
	ReasonUnavailable
	// ReasonAdaptive: the group's adaptive concurrency limit shed the
	// request (docs/limiting.md, "Adaptive concurrency"): the group holds
	// its limit in flight and the peer its fair share of it. The data
	// plane answers 503 (docs/replies.md, "Shedding").
	ReasonAdaptive
)

var reasonNames = [...]string{"", "concurrency", "rate_limit", "denied", "unavailable", "adaptive"}

// String returns the metric label of r.
func (r Reason) String() string { return reasonNames[r] }

// Decision is the answer for one request. An admitted request holds an
// in-flight slot until Release; call it exactly once, in a defer. A
// Decision is a value: copying it copies the handle, so release through
// one copy only.
type Decision struct {
	Allowed bool
	Via     Via
	// Reason is set on a rejection and on a dry_run would-be rejection.
	Reason Reason
	// WouldReject is true when a dry_run group let a rejection through.
	WouldReject bool
	Group       GroupID
	// Limited is true when limits applied (not exempt, not off, not
	// unavailable): only then do Quota and the RateLimit headers mean
	// anything.
	Limited bool
	// RetryAfter is the Retry-After of a rejection in whole seconds ≥ 1.
	RetryAfter int64

	q quotaState

	// b holds the in-flight slot h until Release; nil when none is held.
	b Backend
	h Handle
	// sc is the counter of the shard whose slot the admission holds (scope
	// "shard"), given back by Release whatever became of the entry.
	sc *atomic.Int64
	// ad is the group's adaptive concurrency the request was counted in
	// (nil when off), as its peer's count of it, given back by Release.
	ad *adaptiveGroup
	as *atomic.Int32
	// reduce is the reduce_on_status of the route rule Check matched (nil:
	// none); the settings it points into are immutable.
	reduce *[]int
}

// quotaState is what Quota needs, captured by the decision: the few values
// the headers are made of, so that a decision whose headers nobody writes
// costs nothing more.
type quotaState struct {
	g  *Group // immutable once built
	ms int64  // the decision's time
	u  Usage
	// full: rejected because the peer's worker shard was full; the
	// Backend was not asked, so u means nothing.
	full bool
}

// Quota returns the state of the (peer, group) right after the decision,
// for the RateLimit headers; the zero Quota when limits did not apply.
func (d *Decision) Quota() Quota {
	q := &d.q
	g := q.g
	if g == nil {
		return Quota{}
	}
	var aq algo.Quota
	if q.full {
		// The peer's state was not read: nothing left, admission possible
		// again in a second, as the Arweave fields say of a concurrency
		// rejection ({concurrency, 0, 1, concurrency}).
		aq = algo.Refused(g.Algorithm, &g.limits)
	} else {
		// The algorithm's policy (docs/limiting.md): for the hybrid its
		// bucket and window, for the others q = L, w = P, r what is left, t
		// until the next admission possible ("Other algorithms").
		aq = algo.QuotaOf(g.Algorithm, algo.State{A: q.u.Tokens, B: q.u.Window}, algo.Held{Count: q.u.Window, Mark: q.u.Oldest}, &g.limits, q.ms, q.u.ResetAt)
	}
	return Quota{
		Algorithm:       g.Algorithm,
		BucketLimit:     aq.Limit,
		BucketRemaining: aq.Remaining,
		BucketWindow:    aq.Period,
		BucketReset:     aq.Reset,
		WindowLimit:     aq.WindowLimit,
		WindowRemaining: aq.WindowRemaining,
		WindowDuration:  aq.WindowDuration,
		WindowReset:     aq.WindowReset,
		ResetAmount:     aq.Amount,
	}
}

// Quota is the state of a (peer, group) after a decision, for the RateLimit
// and RateLimit-Policy headers. Times are milliseconds. For a group of
// another algorithm than the hybrid the Bucket fields are the algorithm's one
// policy (docs/limiting.md, "Other algorithms": q = limit, w = period, r =
// what is left, t = until the next admission possible) and there is no
// window.
type Quota struct {
	// Algorithm is the group's; Hybrid for the zero Quota too.
	Algorithm       algo.Kind
	BucketLimit     int64 // leaky_limit; limit
	BucketRemaining int64 // leaky_limit - tokens, ≥ 0; admissions left now
	BucketWindow    int64 // leaky_tick_interval; period
	BucketReset     int64 // until the next leaky tick; until the next admission possible (0: now)
	WindowLimit     int64 // sliding_window_limit (0: no window)
	WindowRemaining int64
	WindowDuration  int64 // sliding_window_duration
	WindowReset     int64 // until the oldest timestamp expires, 0 when none
	// ResetAmount is what BucketReset restores, for the other algorithms
	// (algo.Quota.Amount): 1, or the limit when a fixed window ends. 0 for
	// the hybrid, whose tick restores leaky_tick_reduction tokens.
	ResetAmount int64
}

// Holds reports whether d holds an in-flight slot (an admission not yet
// released).
func (d *Decision) Holds() bool { return d.b != nil }

// Release gives back the in-flight slot of an admitted request. It is a
// no-op on a rejected or unlimited decision, on a second call, and when the
// entry was forgotten or evicted in the meantime. It does not allocate.
func (d *Decision) Release() {
	if sc := d.sc; sc != nil {
		d.sc = nil
		sc.Add(-1)
	}
	if as := d.as; as != nil {
		d.as = nil
		d.ad.release(as)
	}
	b := d.b
	if b == nil {
		return
	}
	d.b = nil
	b.Release(d.h)
}

// policyStats are the counters of what the policy answered on its own,
// and of the dry_run rejections it let through, per group: one cache line.
type policyStats struct {
	denied      atomic.Uint64
	unlimited   atomic.Uint64
	unavailable atomic.Uint64
	reduce      atomic.Uint64
	wouldConc   atomic.Uint64 // dry_run rejections by concurrency let through
	wouldRate   atomic.Uint64 // dry_run rejections by rate limit let through
	shardConc   atomic.Uint64 // rejections by a full worker shard (shardFull)
	shardWould  atomic.Uint64 // those of them a dry_run group let through
	shed        atomic.Uint64 // requests the adaptive limit shed
	shedWould   atomic.Uint64 // those a dry_run group would have shed, let through
}

// Decide decides one request of peer p in group g at now (docs/limiting.md,
// "The hybrid decision"). The policy is here: the deny list, the exemption (→
// local_peers), the global switch and the group's mode; with
// concurrency_scope "shard" (docs/arweave297.md) the in-flight count of the
// peer's worker shard, over all its peers; with adaptive_concurrency the
// group's in-flight count over all its peers against its adaptive limit
// and the peer's fair share of it (docs/limiting.md, "Adaptive
// concurrency"); then the group's Backend takes the
// state part (the peer's concurrency, then the group's algorithm:
// algo.Step), and a dry_run group
// lets a rejection through. An admitted request must be released
// (Decision.Release). An unknown g is decided in general. Check classifies a
// request by its path first; Decide is for a caller that knows the group.
//
// The shard's count is taken before the Backend decides (added, then rolled
// back when over the limit) and given back when the Backend does not admit,
// so the shard never holds more than concurrency_limit; the Backend, told so
// by PeerConcurrencyLimit, keeps count of the peer's own requests in flight
// (the ar_limiter concurrency gauges) without a limit. The adaptive count
// is taken the same way, after the shard's: a request it sheds consumes
// nothing of the peer's limits.
func (l *Limiter) Decide(now time.Time, p peer.Peer, g GroupID) (d Decision) {
	st := l.set.Load()
	if int(g) >= MaxGroups || !st.groups[g].defined {
		g = st.general
	}
	if p.Addr.IsValid() {
		if l.denied(st, p, g) {
			d = Decision{Reason: ReasonDenied, Group: g}
			if l.observer != nil {
				l.observe(now.UnixMilli(), &p.Key, &d, false)
			}
			return d
		}
		if st.exempt.Len() > 0 && st.exempt.Contains(p.Addr) {
			g = LocalPeers
		}
	}
	gr := &st.groups[g]
	if g == LocalPeers || gr.Mode == ModeOff || !l.enabled.Load() {
		l.policy[g].unlimited.Add(1)
		d = Decision{Allowed: true, Via: ViaUnlimited, Group: g}
		if l.observer != nil {
			l.observe(now.UnixMilli(), &p.Key, &d, false)
		}
		return d
	}

	ms := now.UnixMilli()
	var sc *atomic.Int64
	if c := gr.inflight; c != nil {
		if sc = c.Acquire(c.Shard(p.Key.ShardByte()), gr.ConcurrencyLimit); sc == nil {
			d = l.shardFull(gr, g, ms)
			if l.observer != nil {
				l.observe(ms, &p.Key, &d, false)
			}
			return d
		}
	}
	key := KeyOf(&p.Key)
	var as *atomic.Int32
	if ad := gr.adaptive; ad != nil {
		// The request takes its in-flight slot and the group's count
		// here rather than in a call, as every decision of the group
		// does; adaptiveGroup.contend decides the rest when the group is
		// busy or over its limit.
		b, pace := ad.bounds.Load(), ad.pace.Load()
		i := slotOf(key)
		as = &ad.slots[i]
		held := int64(as.Add(1)) - 1
		c := int64(1)
		if held == 0 {
			c += onePeer
		}
		w := ad.counts.Add(c)
		var shed bool
		if 2*(w&(onePeer-1)) > int64(b&(1<<32-1)) || uint32(pace) != 0 {
			as, shed = ad.contend(as, i, held, w, b, pace, ms, gr.Mode == ModeDryRun)
		}
		if shed {
			d = l.adaptiveShed(gr, g, ms)
			if d.Allowed { // dry_run: let through, counted in flight
				d.ad, d.as, d.sc = ad, as, sc
			} else if sc != nil {
				sc.Add(-1)
			}
			if l.observer != nil {
				l.observe(ms, &p.Key, &d, false)
			}
			return d
		}
	}
	out, u, h := gr.backend.Admit(ms, key, gr)
	if sc != nil && (out.Via == ViaNone || out.Via == ViaUnlimited) {
		sc.Add(-1) // no slot held: no limit was evaluated, or a rejection
		sc = nil
	}
	if out.Via == ViaNone && as != nil && (gr.Mode != ModeDryRun || out.Reason == ReasonUnavailable) {
		gr.adaptive.release(as) // the request does not reach the node
		as = nil
	}
	if out.Reason == ReasonUnavailable {
		l.policy[g].unavailable.Add(1)
		d = Decision{Reason: ReasonUnavailable, Group: g, RetryAfter: out.RetryAfter}
		if l.observer != nil {
			l.observe(ms, &p.Key, &d, false)
		}
		return d
	}
	// Field by field, into the result (decision 188).
	// ViaUnlimited: the backend could not decide and was told to admit
	// (cluster on_failure = "open"); no limit was evaluated.
	d.Group, d.Limited = g, out.Via != ViaUnlimited
	d.Via, d.Reason, d.RetryAfter = out.Via, out.Reason, out.RetryAfter
	if as != nil {
		d.ad, d.as = gr.adaptive, as
	}
	if out.Via != ViaNone {
		d.Allowed = true
		d.b, d.h, d.sc = gr.backend, h, sc
	} else if gr.Mode == ModeDryRun {
		if out.Reason == ReasonConcurrency {
			l.policy[g].wouldConc.Add(1)
		} else {
			l.policy[g].wouldRate.Add(1)
		}
		d.Allowed, d.WouldReject = true, true
	}
	d.q.g, d.q.ms, d.q.u = gr, ms, u
	if l.observer != nil {
		l.observe(ms, &p.Key, &d, d.Limited)
	}
	return d
}

// ExemptPathGroup is the Group of a Decision on a request whose path is in
// routes.exempt_paths: no group decides it (docs/limiting.md, "Routes and
// path patterns"), but the deny list applies to it (docs/limiting.md,
// "Peers").
const ExemptPathGroup GroupID = MaxGroups

// Request is one request as Check decides it.
type Request struct {
	// Method and Path classify the request into its group (the routes' rules:
	// docs/limiting.md, "Routes and path patterns"). Path is the decoded
	// path, without the query.
	Method string
	Path   string
	// Peer is whose limits apply (Limiter.PeerOf, Limiter.ParsePeer).
	Peer peer.Peer
}

// Check decides one request: the whole policy of docs/limiting.md in one call.
// A request on an exempt path is admitted unlimited (Group
// ExemptPathGroup, Via ViaUnlimited) unless its peer is on the deny list;
// every other one is classified into its group by its method and path and
// decided there (Decide). An admitted request must be released
// (Decision.Release) once the node has answered it; Decision.RefundsOn says
// whether its route gives a token back for the node's answer.
func (l *Limiter) Check(now time.Time, r Request) Decision {
	st := l.set.Load()
	rt := st.classify(r.Method, r.Path)
	if rt.Exempt {
		if l.denied(st, r.Peer, st.general) {
			d := Decision{Reason: ReasonDenied, Group: ExemptPathGroup}
			if l.observer != nil {
				l.observe(now.UnixMilli(), &r.Peer.Key, &d, false)
			}
			return d
		}
		return Decision{Allowed: true, Via: ViaUnlimited, Group: ExemptPathGroup}
	}
	d := l.Decide(now, r.Peer, rt.Group)
	if len(rt.ReduceOnStatus) > 0 {
		d.reduce = &st.routeReduce[rt.Rule]
	}
	return d
}

// RefundsOn reports whether the route of a request Check decided gives one
// token back to its peer (Limiter.Reduce, in Decision.Group) when the node
// answers it with status: the rule's reduce_on_status (docs/limiting.md,
// "Reduce").
func (d *Decision) RefundsOn(status int) bool {
	return d.reduce != nil && slices.Contains(*d.reduce, status)
}

// OnExemptPath reports whether d is the decision on a request whose path
// is exempt (Group ExemptPathGroup).
func (d *Decision) OnExemptPath() bool { return d.Group == ExemptPathGroup }

// shardFull is the decision of a request whose worker shard already holds
// concurrency_limit requests in flight (scope "shard", docs/arweave297.md): a
// concurrency rejection with Retry-After 1 (a dry_run group lets it
// through), counted by the policy. The Backend is not asked, so nothing
// changes there and the peer's entry does not count it (its requests and
// rejections, the dashboard's record of decisions).
func (l *Limiter) shardFull(gr *Group, g GroupID, ms int64) Decision {
	ps := &l.policy[g]
	ps.shardConc.Add(1)
	d := Decision{Group: g, Limited: true, Reason: ReasonConcurrency, RetryAfter: 1, q: quotaState{g: gr, ms: ms, full: true}}
	if gr.Mode == ModeDryRun {
		ps.shardWould.Add(1)
		d.Allowed, d.WouldReject = true, true
	}
	return d
}

// adaptiveShed is the decision of a request the group's adaptive limit
// sheds (docs/limiting.md, "Adaptive concurrency"): Reason ReasonAdaptive,
// Retry-After 1, the quota of a concurrency rejection; a dry_run group lets
// it through. The Backend is not asked, as for shardFull.
func (l *Limiter) adaptiveShed(gr *Group, g GroupID, ms int64) Decision {
	ps := &l.policy[g]
	d := Decision{Group: g, Limited: true, Reason: ReasonAdaptive, RetryAfter: 1, q: quotaState{g: gr, ms: ms, full: true}}
	if gr.Mode == ModeDryRun {
		ps.shedWould.Add(1)
		d.Allowed, d.WouldReject = true, true
		return d
	}
	ps.shed.Add(1)
	return d
}

// Adaptive reports whether d was counted by its group's adaptive
// concurrency (docs/limiting.md, "Adaptive concurrency"): Sample then
// feeds the group's controller. A caller may skip timing the node's
// answer when it is false.
func (d *Decision) Adaptive() bool { return d.ad != nil }

// Sample reports the node's answer to a request d admitted to its group's
// adaptive concurrency (docs/limiting.md, "Adaptive concurrency"), once,
// when its head arrives (before or after Release): now, the latency from
// the request's sending to the answer's head, and failed for a 5xx, a
// timeout or a reset (congestion, whatever the latency). It does nothing
// for a decision its group's adaptive concurrency did not count (off,
// exempt, rejected, on an exempt path).
func (d *Decision) Sample(now time.Time, latency time.Duration, failed bool) {
	if d.ad != nil {
		d.ad.sample(now.UnixMilli(), d.q.ms, latency, failed)
	}
}

// denied reports whether p is on the deny list, counting the denial in g.
func (l *Limiter) denied(st *settings, p peer.Peer, g GroupID) bool {
	if !p.Addr.IsValid() || st.deny.Len() == 0 || !st.deny.Contains(p.Addr) {
		return false
	}
	l.policy[g].denied.Add(1)
	return true
}

// ReduceResult is the answer of Reduce.
type ReduceResult uint8

// The answers of Reduce.
const (
	// Reduced: one token was given back.
	Reduced ReduceResult = iota
	// ReduceNoop: nothing to give back (no entry, or no token consumed);
	// still an ok answer, as in the Arweave node.
	ReduceNoop
	// ReduceDisabled: the group has is_manual_reduction_disabled.
	ReduceDisabled
)

// String returns "reduced", "noop" or "disabled".
func (r ReduceResult) String() string {
	return [...]string{"reduced", "noop", "disabled"}[r]
}

// Reduce is the manual reduction (docs/limiting.md, "Reduce"): tokens -= 1 if
// tokens > 0 (with arweave.version 2.9.7 and leaky_limit 0, §6.3: the oldest
// window timestamp held; for the other algorithms, §6.2: one admission given
// back). It never creates an entry.
func (l *Limiter) Reduce(now time.Time, k peer.Key, g GroupID) ReduceResult {
	st := l.set.Load()
	if int(g) >= MaxGroups || !st.groups[g].defined || g == LocalPeers {
		return ReduceNoop
	}
	gr := &st.groups[g]
	l.policy[g].reduce.Add(1)
	if gr.ManualReductionDisabled {
		return ReduceDisabled
	}
	return gr.backend.Reduce(now.UnixMilli(), KeyOf(&k), gr)
}

// Forget deletes the state of peer k (its tokens, window timestamps, an
// algorithm's state) in every group, and returns in how many groups it
// had any. Its requests in flight keep counting against its concurrency
// limit until they are released, so a forget never lets a peer put more
// on the node than the limit (docs/limiting.md, "In-flight release").
func (l *Limiter) Forget(k peer.Key) int {
	st := l.set.Load()
	key := KeyOf(&k)
	n := 0
	for g := range st.groups {
		gr := &st.groups[g]
		if !gr.defined || g == int(LocalPeers) {
			continue
		}
		if gr.backend.Forget(key, gr) {
			n++
		}
	}
	return n
}
