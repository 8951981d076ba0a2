package throttle

import (
	"slices"
	"time"
)

// poll is PollAdaptive.
func (a *adaptive) poll(ms int64, tk Ticket) AdaptiveResult {
	sh := a.shard(tk.Peer)
	sh.mu.Lock()
	p := sh.m[tk.Peer]
	var q *aquota
	if p != nil {
		q = p.quotas[tk.Group]
	}
	if q == nil {
		// Its peer or its quota is gone: nothing holds it any more.
		sh.mu.Unlock()
		return AdaptiveResult{Admitted: true, Outcome: OutcomeReleased, Group: tk.Group}
	}
	q.refill(ms)
	if i := slices.Index(q.granted, tk.ID); i >= 0 {
		q.granted = slices.Delete(q.granted, i, i+1)
		p.waiting--
		outcome := OutcomeQuota
		if !q.known {
			outcome = OutcomeReleased
		}
		sh.mu.Unlock()
		a.waiting.Add(-1)
		return AdaptiveResult{Admitted: true, Outcome: outcome, Group: tk.Group}
	}
	if slices.Contains(q.queue, tk.ID) {
		r := q.waitResult(tk.Peer, tk.Group, tk.ID, ms)
		sh.mu.Unlock()
		return r
	}
	sh.mu.Unlock()
	return AdaptiveResult{Admitted: true, Outcome: OutcomeReleased, Group: tk.Group}
}

// cancel forgets a ticket that stops waiting without going.
func (a *adaptive) cancel(tk Ticket) {
	sh := a.shard(tk.Peer)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[tk.Peer]
	if p == nil || p.quotas[tk.Group] == nil {
		return
	}
	q := p.quotas[tk.Group]
	for _, list := range []*[]uint64{&q.queue, &q.granted} {
		if i := slices.Index(*list, tk.ID); i >= 0 {
			*list = slices.Delete(*list, i, i+1)
			p.waiting--
			a.waiting.Add(-1)
			return
		}
	}
}

// ObserveResult is what Observe made of a reply.
type ObserveResult struct {
	// Outcome is "learned" (the quota was updated), "skipped" (a tx/*
	// path), "incompatible" (the peer is now taken as incompatible: a field
	// missing or a group id too long), or "refused" (the fields, or the
	// group they name, were refused; the quota stays as it was).
	Outcome string
	// Reason is, for "incompatible" and "refused", the 2.9.7 client's name
	// of the problem: missing_header, invalid_header_value,
	// malformed_headers, missing_group_id, malformed_policy,
	// header_id_too_long, too_many_groups, group_mismatch, or limiterd's
	// routes_full and peers_full.
	Reason string
	// Header is the field at fault, when one is.
	Header string
	// Group is the group the reply named, when it parsed.
	Group string
}

var overflowNames = [...]string{ovTooManyGroups: "too_many_groups", ovGroupMismatch: "group_mismatch",
	ovRoutesFull: "routes_full", ovPeersFull: "peers_full"}

// observe is Observe.
func (a *adaptive) observe(ms int64, peer, path string, headers map[string]string) ObserveResult {
	a.observed.Add(1)
	quota, err := ParseQuota(headers)
	if err != nil {
		pe := err.(*ParseError)
		a.refused[pe.Kind].Add(1)
		res := ObserveResult{Outcome: "refused", Reason: pe.Kind.String(), Header: pe.Header}
		if pe.Incompatible() {
			res.Outcome = "incompatible"
			a.markIncompatible(ms, peer)
		}
		return res
	}
	key, skip := pathKey(path)
	sh := a.shard(peer)
	sh.mu.Lock()
	p := sh.m[peer]
	if p == nil {
		if a.peers.Load() >= MaxAdaptivePeers {
			sh.mu.Unlock()
			return a.overflowed(ovPeersFull, quota.GroupID)
		}
		p = &apeer{routes: map[string]string{}, ids: map[string]struct{}{}, quotas: map[string]*aquota{}}
		sh.m[cloneString(peer)] = p
		a.peers.Add(1)
	}
	p.lastUse = ms
	p.incompatible = false
	if skip {
		sh.mu.Unlock()
		a.skipped.Add(1)
		return ObserveResult{Outcome: "skipped", Group: quota.GroupID}
	}
	g := quota.GroupID
	if bound, ok := p.routes[key]; ok {
		if bound != g {
			sh.mu.Unlock()
			return a.overflowed(ovGroupMismatch, g)
		}
	} else {
		if _, seen := p.ids[g]; !seen {
			if len(p.ids) >= MaxGroupsPerPeer {
				sh.mu.Unlock()
				return a.overflowed(ovTooManyGroups, g)
			}
		}
		if len(p.routes) >= MaxRoutesPerPeer || len(key) > MaxPathKeyBytes {
			sh.mu.Unlock()
			return a.overflowed(ovRoutesFull, g)
		}
		if _, seen := p.ids[g]; !seen {
			g = cloneString(g)
			p.ids[g] = struct{}{}
		}
		p.routes[cloneString(key)] = g
	}
	q := p.quotas[g]
	if q == nil {
		q = &aquota{}
		p.quotas[g] = q
		a.quotas.Add(1)
	}
	q.update(ms, quota)
	sh.mu.Unlock()
	a.learned.Add(1)
	return ObserveResult{Outcome: "learned", Group: quota.GroupID}
}

func (a *adaptive) overflowed(kind int, group string) ObserveResult {
	a.overflow[kind].Add(1)
	return ObserveResult{Outcome: "refused", Reason: overflowNames[kind], Group: group}
}

// update replaces q's quota with the reply's (no minimum with the old
// remaining, as the node does), serves the waiters, then arms the refill
// when the quota is left empty and the reply gave a reset.
func (q *aquota) update(ms int64, quota Quota) {
	q.known = true
	q.total, q.remaining, q.amount, q.resetSec = quota.Total, quota.Remaining, quota.ResetAmount, quota.ResetSeconds
	q.updated, q.lastUse = ms, ms
	q.drain()
	if q.remaining > 0 || q.resetSec == 0 {
		q.refillAt = 0
	} else {
		q.refillAt = ms + q.resetSec*1000
	}
}

// markIncompatible takes a peer whose reply lacks the fields as
// incompatible: all its quotas are forgotten and their waiters let go.
// An unknown peer is not tracked for it (its calls go anyway).
func (a *adaptive) markIncompatible(ms int64, peer string) {
	sh := a.shard(peer)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[peer]
	if p == nil || p.incompatible {
		return
	}
	p.incompatible, p.lastUse = true, ms
	for _, q := range p.quotas {
		q.release()
	}
}

// cleanup forgets the quotas idle since before ms − adaptiveIdle with
// nothing waiting and no refill pending, and then the peers left with no
// quota and idle as long; it returns how many peers it removed.
func (a *adaptive) cleanup(ms int64) int {
	cut := ms - adaptiveIdle.Milliseconds()
	removed := 0
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for name, p := range sh.m {
			for g, q := range p.quotas {
				q.refill(ms)
				if len(q.queue) == 0 && len(q.granted) == 0 && (q.refillAt == 0 || !q.known) && q.lastUse < cut {
					delete(p.quotas, g)
					a.quotas.Add(-1)
				}
			}
			if len(p.quotas) == 0 && p.lastUse < cut {
				delete(sh.m, name)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	a.peers.Add(-int64(removed))
	return removed
}

// AdaptiveStats are the adaptive throttle's counters and gauges.
type AdaptiveStats struct {
	Peers   int64 // peers tracked
	Quotas  int64 // (peer, group) quotas tracked
	Waiting int64 // calls waiting now
	// Observed counts the replies reported; Learned those whose quota was
	// taken; Refused, by reason, the others (Skipped aside).
	Observed uint64
	Learned  uint64
	Skipped  uint64 // replies to tx/* calls (never learned)
	Refused  map[string]uint64
	// The calls: Admitted by the quota, Queued (had to wait), QueueFull
	// (went at once past MaxWaitingPerPeer), Passed (went unthrottled: tx/*,
	// unknown route, incompatible peer, unknown quota, released).
	Admitted  uint64
	Queued    uint64
	QueueFull uint64
	Passed    uint64
}

func (a *adaptive) stats() AdaptiveStats {
	s := AdaptiveStats{
		Peers: a.peers.Load(), Quotas: a.quotas.Load(), Waiting: a.waiting.Load(),
		Observed: a.observed.Load(), Learned: a.learned.Load(), Skipped: a.skipped.Load(),
		Refused:  make(map[string]uint64, len(parseErrorNames)+len(overflowNames)),
		Admitted: a.admitted.Load(), Queued: a.queued.Load(), QueueFull: a.queueFull.Load(), Passed: a.passed.Load(),
	}
	for i, n := range parseErrorNames {
		s.Refused[n] = a.refused[i].Load()
	}
	for i, n := range overflowNames {
		s.Refused[n] = a.overflow[i].Load()
	}
	return s
}

// AdaptiveView is one learned (peer, group) quota, for the dashboard.
type AdaptiveView struct {
	Peer         string
	Group        string
	Known        bool // false: unlimited (reset, or the peer incompatible)
	Incompatible bool
	Total        int64
	Remaining    int64
	ResetAmount  int64
	// RefillIn is how long until the pending refill; 0: none.
	RefillIn time.Duration
	Waiting  int
	Updated  time.Time
}

func (a *adaptive) views(ms int64, limit int) []AdaptiveView {
	var out []AdaptiveView
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for name, p := range sh.m {
			for g, q := range p.quotas {
				q.refill(ms)
				v := AdaptiveView{Peer: name, Group: g, Known: q.known, Incompatible: p.incompatible, Total: q.total,
					Remaining: q.remaining, ResetAmount: q.amount, Waiting: len(q.queue) + len(q.granted), Updated: time.UnixMilli(q.updated)}
				if q.refillAt != 0 {
					v.RefillIn = time.Duration(q.refillAt-ms) * time.Millisecond
				}
				out = append(out, v)
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y AdaptiveView) int {
		if x.Waiting != y.Waiting {
			return y.Waiting - x.Waiting
		}
		if x.Peer != y.Peer {
			return compareStrings(x.Peer, y.Peer)
		}
		return compareStrings(x.Group, y.Group)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
