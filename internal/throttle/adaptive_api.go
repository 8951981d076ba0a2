package throttle

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Mode returns the mode in force (throttle.mode).
func (t *Throttle) Mode() Mode { return t.set.Load().cfg.Mode }

// TryAdaptive evaluates a new call of the adaptive mode at now
// (docs/throttle.md, "Adaptive mode"):
// an exempt peer or path, or the throttle being off, goes at once; so does
// a tx/* path, a (peer, path key) whose group no reply has named yet, an
// incompatible peer, and a group whose quota is not known. Otherwise the
// call goes if the quota has calls left (one is taken), and waits first in
// first out if not: the result then holds its Ticket, to poll with
// PollAdaptive when Wake is closed or WaitIn has passed, and to cancel
// with CancelAdaptive if the caller gives up. Past MaxWaitingPerPeer
// waiting on the peer, the call goes at once (queue_full).
func (t *Throttle) TryAdaptive(now time.Time, peer, path string) AdaptiveResult {
	st := t.set.Load()
	if _, ok := st.exemptPeers[peer]; ok || st.classify(path).exempt {
		t.exempt.Add(1)
		return AdaptiveResult{Admitted: true, Outcome: OutcomeExempt}
	}
	if !t.enabled.Load() {
		t.off.Add(1)
		return AdaptiveResult{Admitted: true, Outcome: OutcomeOff}
	}
	return t.ad.try(now.UnixMilli(), peer, path)
}

// PollAdaptive evaluates again, at now, a call TryAdaptive queued. Like
// Retry it ignores the switch: once waiting, a call waits for its quota.
// A ticket its peer's reset released (or that is unknown) goes.
func (t *Throttle) PollAdaptive(now time.Time, tk Ticket) AdaptiveResult {
	return t.ad.poll(now.UnixMilli(), tk)
}

// CancelAdaptive forgets a waiting call that gives up without going (its
// client went away, or AdaptiveMaxWait passed). Cancelling a ticket that
// went already does nothing.
func (t *Throttle) CancelAdaptive(tk Ticket) { t.ad.cancel(tk) }

// Observe learns from a reply the node got from peer for path at now
// (POST /api/v1/throttle/observe): the reply's header fields, names in
// any case. Fields that parse (ParseQuota) update the peer's quota of the
// group they name, binding the path's key to that group on its first
// reply; a reply missing a field, or naming a group id over 128 bytes,
// makes the peer incompatible (its quotas forgotten, its waiters let go)
// until a reply with the fields; other bad fields, a group other than the
// one the path's key is bound to, a 1001st group of the peer, and
// limiterd's caps (routes per peer, peers) are refused, counted, and
// change nothing. It learns in either mode; only the adaptive mode paces
// by it.
func (t *Throttle) Observe(now time.Time, peer, path string, headers map[string]string) ObserveResult {
	return t.ad.observe(now.UnixMilli(), peer, path, headers)
}

// AdaptiveStats returns the adaptive throttle's counters and gauges.
func (t *Throttle) AdaptiveStats() AdaptiveStats { return t.ad.stats() }

// AdaptiveViews returns the learned quotas as of now, those with the most
// calls waiting first, then by peer and group; at most limit (≤ 0: all).
func (t *Throttle) AdaptiveViews(now time.Time, limit int) []AdaptiveView {
	return t.ad.views(now.UnixMilli(), limit)
}

// AdaptiveSnapshot is the adaptive throttle's state as plain values: the
// peers, the groups their path keys are bound to, and the quotas known.
// Calls waiting are not part of it. It travels in
// Snapshot.Adaptive as JSON.
type AdaptiveSnapshot struct {
	Peers []AdaptivePeerRecord `json:"peers"`
}

// AdaptivePeerRecord is one peer of an AdaptiveSnapshot.
type AdaptivePeerRecord struct {
	Peer         string            `json:"peer"`
	Incompatible bool              `json:"incompatible,omitempty"`
	Routes       map[string]string `json:"routes,omitempty"` // path key → group id
	Quotas       []AdaptiveQuota   `json:"quotas,omitempty"`
}

// AdaptiveQuota is one known quota of an AdaptivePeerRecord; times are
// Unix ms.
type AdaptiveQuota struct {
	Group        string `json:"group"`
	Total        int64  `json:"total"`
	Remaining    int64  `json:"remaining"`
	ResetAmount  int64  `json:"reset_amount"`
	ResetSeconds int64  `json:"reset_seconds"`
	RefillAt     int64  `json:"refill_at_ms,omitempty"`
	Updated      int64  `json:"updated_ms"`
}

// snapshot returns the adaptive state as plain values.
func (a *adaptive) snapshot() AdaptiveSnapshot {
	var s AdaptiveSnapshot
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for name, p := range sh.m {
			// Text that is not UTF-8 cannot travel in JSON (it would come
			// back altered, bound to routes in place of the real id): it is
			// left out and relearned from the next reply.
			if !utf8.ValidString(name) {
				continue
			}
			r := AdaptivePeerRecord{Peer: name, Incompatible: p.incompatible}
			for k, g := range p.routes {
				if utf8.ValidString(k) && utf8.ValidString(g) {
					if r.Routes == nil {
						r.Routes = make(map[string]string, len(p.routes))
					}
					r.Routes[k] = g
				}
			}
			for g, q := range p.quotas {
				if q.known && utf8.ValidString(g) {
					r.Quotas = append(r.Quotas, AdaptiveQuota{Group: g, Total: q.total, Remaining: q.remaining,
						ResetAmount: q.amount, ResetSeconds: q.resetSec, RefillAt: q.refillAt, Updated: q.updated})
				}
			}
			s.Peers = append(s.Peers, r)
		}
		sh.mu.Unlock()
	}
	return s
}

// restore replaces the adaptive state with s's, at ms. Waiting calls keep
// their tickets but are let go (their quotas are replaced). What a
// snapshot holds is checked as a reply's fields are: a record out of
// bounds is skipped, and the caps hold.
func (a *adaptive) restore(ms int64, s AdaptiveSnapshot) {
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for name, p := range sh.m {
			for _, q := range p.quotas {
				q.release()
			}
			if p.waiting == 0 {
				delete(sh.m, name)
				a.peers.Add(-1)
				a.quotas.Add(-int64(len(p.quotas)))
			}
		}
		sh.mu.Unlock()
	}
	for _, r := range s.Peers {
		if r.Peer == "" || a.peers.Load() >= MaxAdaptivePeers {
			continue
		}
		sh := a.shard(r.Peer)
		sh.mu.Lock()
		p := sh.m[r.Peer]
		if p == nil {
			p = &apeer{routes: map[string]string{}, ids: map[string]struct{}{}, quotas: map[string]*aquota{}}
			sh.m[r.Peer] = p
			a.peers.Add(1)
		}
		p.incompatible, p.lastUse = r.Incompatible, ms
		for k, g := range r.Routes {
			if len(p.routes) >= MaxRoutesPerPeer || len(k) > MaxPathKeyBytes || g == "" || len(g) > MaxGroupIDBytes {
				continue
			}
			if _, seen := p.ids[g]; !seen && len(p.ids) >= MaxGroupsPerPeer {
				continue
			}
			p.ids[g] = struct{}{}
			p.routes[k] = g
		}
		for _, rq := range r.Quotas {
			if _, ok := p.ids[rq.Group]; !ok || r.Incompatible || !restorable(rq) {
				continue
			}
			q := p.quotas[rq.Group]
			if q == nil {
				q = &aquota{}
				p.quotas[rq.Group] = q
				a.quotas.Add(1)
			}
			*q = aquota{known: true, total: rq.Total, remaining: rq.Remaining, amount: rq.ResetAmount, resetSec: rq.ResetSeconds,
				refillAt: rq.RefillAt, updated: rq.Updated, lastUse: ms, queue: q.queue, granted: q.granted, wake: q.wake}
		}
		sh.mu.Unlock()
	}
}

// restorable reports whether q is a state the throttle itself reaches: a
// reply's fields (total ≥ 1, remaining 0 … total−1, reset 0 … 86400,
// amount ≥ 1), or what a refill leaves of them (remaining up to the whole
// total, amount 0, no refill pending).
func restorable(q AdaptiveQuota) bool {
	if q.Total < 1 || q.Remaining < 0 || q.Remaining > q.Total || q.ResetSeconds < 0 || q.ResetSeconds > MaxResetSeconds {
		return false
	}
	if q.ResetAmount == 0 {
		return q.RefillAt == 0 // refilled
	}
	return q.ResetAmount > 0 && q.Remaining < q.Total
}

// adaptiveJSON encodes the adaptive state for a ThrottleSnapshot; nil
// when there is none.
func (a *adaptive) adaptiveJSON() json.RawMessage {
	s := a.snapshot()
	if len(s.Peers) == 0 {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil // plain strings and integers: cannot fail
	}
	return b
}

// PeekAdaptive is TryAdaptive without taking a call or queueing: whether a
// new call at now would go, and if not how long until the pending refill
// (0: none pending).
func (t *Throttle) PeekAdaptive(now time.Time, peer, path string) AdaptiveResult {
	st := t.set.Load()
	if _, ok := st.exemptPeers[peer]; ok || st.classify(path).exempt {
		return AdaptiveResult{Admitted: true, Outcome: OutcomeExempt}
	}
	if !t.enabled.Load() {
		return AdaptiveResult{Admitted: true, Outcome: OutcomeOff}
	}
	return t.ad.peek(now.UnixMilli(), peer, path)
}

func (a *adaptive) peek(ms int64, peer, path string) AdaptiveResult {
	key, skip := pathKey(path)
	if skip {
		return AdaptiveResult{Admitted: true, Outcome: OutcomeSkip}
	}
	sh := a.shard(peer)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[peer]
	switch {
	case p == nil || (p.routes[key] == "" && !p.incompatible):
		return AdaptiveResult{Admitted: true, Outcome: OutcomeUnknown}
	case p.incompatible:
		return AdaptiveResult{Admitted: true, Outcome: OutcomeIncompatible, Group: p.routes[key]}
	}
	g := p.routes[key]
	q := p.quotas[g]
	if q != nil {
		q.refill(ms)
	}
	switch {
	case q == nil || !q.known:
		return AdaptiveResult{Admitted: true, Outcome: OutcomeUnlimited, Group: g}
	case q.remaining > 0:
		return AdaptiveResult{Admitted: true, Outcome: OutcomeQuota, Group: g}
	case p.waiting >= MaxWaitingPerPeer:
		return AdaptiveResult{Admitted: true, Outcome: OutcomeQueueFull, Group: g}
	}
	r := AdaptiveResult{Outcome: OutcomeQueued, Group: g}
	if q.refillAt != 0 {
		r.WaitIn = time.Duration(q.refillAt-ms) * time.Millisecond
	}
	return r
}
