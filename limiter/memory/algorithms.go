package memory

import (
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// The local backend's side of the algorithms other than the hybrid (package
// algo): an entry holds an algo.State in its union fields (entry.words), or,
// for the sliding log, timestamps in a window ring bounded by the limit. The
// entry's algo says which; an entry of another algorithm than its group's is
// dropped where it is met (the group's algorithm changed), and a shard
// converts its entries when the limits their state is measured in change
// (sync).

// admitAlgo is Admit for a group whose algorithm is not the hybrid:
// concurrency first, then the algorithm, under the shard's lock.
func (b *Backend) admitAlgo(ms int64, k limiter.Key, g *limiter.Group) (out limiter.Outcome, u limiter.Usage, h limiter.Handle) {
	sec := uint32(ms / 1000)
	var key entryKey
	key.set(g.ID, k)
	sh, si, tag := b.shardOf(&key)
	sh.mu.Lock()
	if sh.synced[g.ID].ver < g.StateVersion() {
		b.sync(sh, g)
	}
	slot := b.entryFor(sh, &key, tag, g, ms, sec)
	e := sh.at(slot)
	stats := &sh.stats[g.ID]
	sh.touch(slot, sec)
	stats.Requests++
	satInc(&e.requests)

	params := g.Params()
	p := &params
	var w *window
	var s algo.State
	exact := true
	if g.Algorithm == algo.SlidingLog {
		u, exact = sh.logGate(e, p, ms)
	} else {
		s = e.words()
		if e.flags&flagState == 0 {
			s = algo.Fresh(g.Algorithm, *p, ms)
		}
		u.Tokens, u.Window = s.A, s.B
	}
	switch {
	case int64(e.inflight)+1 > g.PeerConcurrencyLimit():
		out = limiter.Outcome{Reason: limiter.ReasonConcurrency, RetryAfter: 1}
		if !exact {
			u = logUsage(sh.win(e), p, ms)
		}
	case g.Algorithm == algo.SlidingLog:
		if u.Window+1 > p.Limit {
			out = limiter.Outcome{Reason: limiter.ReasonRateLimit, RetryAfter: retrySeconds(u.Oldest + p.Period - ms)}
			break
		}
		if w = sh.win(e); w == nil {
			w = sh.setWin(e, window{})
		}
		stats.LogItems -= int64(w.DropBefore(ms - p.Period + 1))
		w.Add(ms, int32(p.Limit))
		stats.LogItems++
		// Every timestamp left counts (an out-of-order ms is in the past
		// by a few µs at most).
		u = sh.setGate(e, w, p)
		out.Via = limiter.ViaAlgorithm
	default:
		ns, admitted, wait := algo.Decide(g.Algorithm, s, *p, ms)
		if !admitted {
			out = limiter.Outcome{Reason: limiter.ReasonRateLimit, RetryAfter: retrySeconds(wait)}
			break
		}
		e.setWords(ns)
		e.flags |= flagState
		u.Tokens, u.Window = ns.A, ns.B
		out.Via = limiter.ViaAlgorithm
	}
	switch out.Reason {
	case limiter.ReasonNone:
		if e.inflight == 0 {
			stats.PeersConcurrency++
		}
		e.inflight++
		stats.ItemsConcurrency++
		stats.AllowedAlgorithm++
		h = localHandle(si, slot, e.gen, sh.epoch)
	case limiter.ReasonConcurrency:
		satInc(&e.rejConc)
		stats.RejectedConcurrency++
	default:
		satInc(&e.rejRate)
		stats.RejectedRateLimit++
	}
	e.flags |= flagDirty
	sh.mu.Unlock()
	return out, u, h
}

// entryFor finds the entry of key for a decision in g, dropping one of
// another algorithm, or creates it (evicting one at max_tracked). sh.mu
// is held; eviction releases it for a while.
func (b *Backend) entryFor(sh *shard, key *entryKey, tag uint32, g *limiter.Group, ms int64, sec uint32) uint32 {
	slot, _, ok := sh.find(key, tag)
	if ok && sh.at(slot).algo != g.Algorithm && sh.drop(slot, tag, g.Algorithm) {
		b.total.Add(-1)
		ok = false
	}
	if !ok {
		if max := b.maxTracked.Load(); max > 0 && b.total.Load() >= max {
			sh.mu.Unlock()
			b.evictOne(ms)
			sh.mu.Lock()
			slot, _, ok = sh.find(key, tag)
		}
	}
	if !ok {
		slot = sh.insert(key, tag)
		e := sh.at(slot)
		e.lastSeen, e.algo = sec, g.Algorithm
		b.total.Add(1)
	}
	return slot
}

// logUsage is the Usage of a sliding log w (nil: empty) at ms: the
// timestamps still counted, and the one that must expire before the next
// admission once they reach the limit.
func logUsage(w *window, p *algo.Params, ms int64) limiter.Usage {
	if w == nil {
		return limiter.Usage{}
	}
	c := w.CountFrom(ms - p.Period + 1)
	u := limiter.Usage{Window: int64(c)}
	if int64(c) >= p.Limit {
		u.Oldest = w.At(w.N - int32(p.Limit))
	}
	return u
}

// The sliding log's gate: while the log holds at least L timestamps, the
// L-th newest (at(n − L)) must have expired before the next admission. The
// entry keeps it in its word A (flagState), beside the window index in wi,
// so that a rejection — most decisions of a peer over its limit — reads
// the entry only, not the log. It is a cache of the log, set again from
// it after every change (and dropped when in doubt: expireAlgo, sync).

// logGate returns the Usage of e's log at ms from its gate when it is set:
// not expired, Window is L (at least L count, the log is full); expired,
// Window is L − 1 (fewer than L count: the next request is admitted) and
// exact is false. Without a gate (fewer than L timestamps held) it counts
// the log.
func (sh *shard) logGate(e *entry, p *algo.Params, ms int64) (u limiter.Usage, exact bool) {
	if e.flags&flagState != 0 {
		if gate := int64(uint64(uint32(e.tokens)) | uint64(e.tick)<<32); gate > ms-p.Period {
			return limiter.Usage{Window: p.Limit, Oldest: gate}, true
		}
		return limiter.Usage{Window: p.Limit - 1}, false
	}
	w := sh.win(e)
	if w == nil {
		return limiter.Usage{}, true
	}
	u = logUsage(w, p, ms)
	sh.setGate(e, w, p) // when the log holds L or more: a cache, not state
	return u, true
}

// setGate sets e's gate from its log w, and returns the Usage of a log
// whose timestamps all count.
func (sh *shard) setGate(e *entry, w *window, p *algo.Params) limiter.Usage {
	u := limiter.Usage{Window: int64(w.N)}
	if u.Window < p.Limit {
		e.flags &^= flagState
		return u
	}
	u.Oldest = w.At(w.N - int32(p.Limit))
	e.tokens, e.tick = int32(uint32(u.Oldest)), uint32(uint64(u.Oldest)>>32)
	e.flags |= flagState
	return u
}

// retrySeconds is the Retry-After of a wait in ms: whole seconds rounded
// up, at least 1.
func retrySeconds(ms int64) int64 { return max(1, (ms+999)/1000) }

// drop drops the state of the entry at slot, which is of another
// algorithm than its group's now (kind), counting it: as clear does. It
// reports whether the entry went.
func (sh *shard) drop(slot, tag uint32, kind algo.Kind) bool {
	sh.stats[sh.at(slot).key.group()].StateDrops++
	return sh.clear(slot, tag, kind)
}

// clear empties the entry at slot of its state (tokens, window, an
// algorithm's words). An entry with requests in flight stays, fresh for
// the algorithm kind, with its in-flight count: those requests keep
// counting against the peer's concurrency limit until they are released,
// and their releases find the entry (docs/limiting.md, "In-flight
// release"). One without goes. It reports whether the entry went; sh.mu
// is held.
func (sh *shard) clear(slot, tag uint32, kind algo.Kind) bool {
	e := sh.at(slot)
	sh.account(e, -1)
	if e.inflight == 0 {
		sh.remove(slot, sh.posOf(slot, tag))
		return true
	}
	sh.dropWin(e)
	e.tokens, e.tick, e.aux = 0, 0, 0
	e.flags = e.flags&^(flagTokens|flagState) | flagDirty
	e.algo = kind
	sh.account(e, 1) // its requests in flight
	return false
}

// sync brings sh's entries of g to g.StateVersion(): entries of another
// algorithm are dropped, the states of a token bucket or GCRA converted to
// the new limits (algo.Rescale). A shard without entries of g only takes
// note. sh.mu is held.
func (b *Backend) sync(sh *shard, g *limiter.Group) {
	ss := &sh.synced[g.ID]
	if sh.stats[g.ID].Entries > 0 {
		for slot := uint32(0); slot < sh.used; slot++ {
			e := sh.at(slot)
			if !e.key.live() || e.key.group() != g.ID {
				continue
			}
			if e.algo != g.Algorithm {
				if sh.drop(slot, uint32(b.hash.sum(&e.key)), g.Algorithm) {
					b.total.Add(-1)
				}
				continue
			}
			if e.algo == algo.SlidingLog {
				e.flags &^= flagState // the gate of another limit
				continue
			}
			if e.flags&flagState != 0 && ss.ver != 0 && ss.p != g.Params() {
				e.setWords(algo.Rescale(g.Algorithm, e.words(), ss.p, g.Params()))
				e.flags |= flagDirty
			}
		}
	}
	*ss = shardSync{ver: g.StateVersion(), p: g.Params()}
}

// syncAll syncs every shard for every group of gt that needs it, one shard
// lock at a time.
func (b *Backend) syncAll(gt *limiter.GroupTable) {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for id := range limiter.MaxGroups {
			if g, ok := gt.Lookup(limiter.GroupID(id)); ok && id != int(limiter.LocalPeers) && sh.synced[id].ver < g.StateVersion() {
				b.sync(sh, g)
			}
		}
		sh.mu.Unlock()
	}
}

// current reports whether e (of group g, live) may be read as g's state:
// the shard synced for g first. An entry of another algorithm is dropped
// (and false returned). sh.mu is held.
func (b *Backend) current(sh *shard, slot uint32, g *limiter.Group) bool {
	if g.Algorithm != algo.Hybrid && sh.synced[g.ID].ver < g.StateVersion() {
		b.sync(sh, g)
	}
	e := sh.at(slot)
	if !e.key.live() {
		return false // sync dropped it
	}
	if e.algo != g.Algorithm && sh.drop(slot, uint32(b.hash.sum(&e.key)), g.Algorithm) {
		b.total.Add(-1)
		return false
	}
	return true
}

// expireAlgo brings an entry of an algorithm other than the hybrid up to
// ms: a sliding log drops the timestamps that no longer count, a state
// with nothing left to remember goes back to fresh. It reports whether the
// entry holds nothing and may go.
func (sh *shard) expireAlgo(e *entry, g *limiter.Group, ms int64) bool {
	st := &sh.stats[g.ID]
	if w := sh.win(e); w != nil {
		p := g.Params()
		st.LogItems -= int64(w.DropBefore(ms - p.Period + 1))
		// The gate, the L-th newest, stays while L are held.
		sh.setGate(e, w, &p)
		if w.N == 0 {
			sh.dropWin(e)
		}
	} else if e.algo != algo.SlidingLog && e.flags&flagState != 0 && algo.Idle(g.Algorithm, e.words(), g.Params(), ms) {
		e.flags &^= flagState
		e.setWords(algo.State{})
		e.flags |= flagDirty
	}
	return sh.dead(e)
}

// pressure grades e's state at ms, its ticks or expiry applied or not:
// how much it restricts its peer now (eviction takes the lightest first).
func (sh *shard) pressure(e *entry, g *limiter.Group, ms int64) algo.Pressure {
	switch {
	case e.algo == algo.Hybrid:
		var n, tokens int64
		if w := sh.win(e); w != nil {
			n = int64(w.CountFrom(ms - g.SlidingWindowDuration + 1))
		}
		if e.flags&flagTokens != 0 {
			tokens = int64(e.tokens)
			// The leaky ticks since the entry was last touched, not
			// applied: the entry is only read.
			if n := int64(int32(uint32(sh.leakyIndex(g, ms)) - e.tick)); n > 0 {
				tokens, _, _ = limiter.LeakyTicks(tokens, n, g.LeakyTickReduction)
			}
		}
		return algo.PressureOf(max(0, g.SlidingWindowLimit-n)+max(0, g.LeakyLimit-tokens), g.SlidingWindowLimit+g.LeakyLimit)
	case e.algo == algo.SlidingLog:
		p := g.Params()
		return algo.PressureOf(p.Limit-logUsage(sh.win(e), &p, ms).Window, p.Limit)
	case e.flags&flagState != 0:
		return algo.PressureAt(g.Algorithm, e.words(), g.Params(), ms)
	default:
		return algo.Light
	}
}

// reduceAlgo is Reduce for an entry of an algorithm other than the hybrid:
// one admission given back (algo.Reduce; the sliding log's newest
// timestamp that still counts).
func (sh *shard) reduceAlgo(e *entry, g *limiter.Group, ms int64) limiter.ReduceResult {
	if g.Algorithm == algo.SlidingLog {
		w := sh.win(e)
		p := g.Params()
		if w == nil || w.N == 0 || w.At(w.N-1) <= ms-p.Period {
			return limiter.ReduceNoop
		}
		w.N--
		sh.stats[g.ID].LogItems--
		sh.setGate(e, w, &p)
		e.flags |= flagDirty
		return limiter.Reduced
	}
	if e.flags&flagState == 0 {
		return limiter.ReduceNoop
	}
	s, ok := algo.Reduce(g.Algorithm, e.words(), g.Params(), ms)
	if !ok {
		return limiter.ReduceNoop
	}
	e.setWords(s)
	e.flags |= flagDirty
	return limiter.Reduced
}

// viewAlgo is the state of an entry of an algorithm other than the hybrid
// in the algorithm's terms.
func (sh *shard) viewAlgo(e *entry, g *limiter.Group, ms int64) algo.View {
	p := g.Params()
	if g.Algorithm == algo.SlidingLog {
		u := logUsage(sh.win(e), &p, ms)
		return algo.View{Quota: algo.LogQuota(p, u.Window, u.Oldest, ms), Count: u.Window}
	}
	s := algo.Fresh(g.Algorithm, p, ms)
	if e.flags&flagState != 0 {
		s = e.words()
	}
	return algo.ViewOf(g.Algorithm, s, p, ms)
}
