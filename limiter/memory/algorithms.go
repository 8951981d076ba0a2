package memory

import (
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// How an entry holds its algorithm's state (package algo decides on it,
// algo.Step and the rest, one dispatch on the kind; decision 230): the
// hybrid its leaky tokens in tokens, its place in the leaky-token register
// in flagTokens (the State's B) with the index of the last leaky tick in
// tick, and its window's timestamps in a ring (wi); the sliding log its
// timestamps in a ring bounded by the limit, with a gate in the words
// (logGate); the other algorithms their algo.State in the union fields
// (entry.words, flagState). The entry's algo says which; an entry of
// another algorithm than its group's is dropped where it is met (the
// group's algorithm changed), and a shard converts its entries when the
// limits their state is measured in change (sync).

// state returns e's algo.State at ms (fresh when it holds none).
func (sh *shard) state(e *entry, g *limiter.Group, ms int64) algo.State {
	switch {
	case e.flags&flagTokens != 0:
		return algo.State{A: int64(e.tokens), B: 1}
	case e.flags&flagState != 0:
		return e.words()
	}
	return algo.Fresh(e.algo, g.Params(), ms)
}

// read sets what algo.Step reads of e at ms in r: its State and the
// summary of its log with its requests in flight. It returns false when a
// sliding log's gate expired: Count is then Limit − 1, enough to decide an
// admission (logGate), and logHeld counts it when needed.
func (sh *shard) read(e *entry, l *algo.Limits, ms int64, r *algo.Result) (exact bool) {
	h := &r.Held
	h.Inflight = int64(e.inflight)
	switch {
	case e.algo == algo.Hybrid:
		// Its tokens while in the register, its window.
		if e.flags&flagTokens != 0 {
			r.State = algo.State{A: int64(e.tokens), B: 1}
		}
		if e.wi != 0 {
			w := &sh.wins[e.wi-1]
			if n := w.CountFrom(ms - l.WindowDuration + 1); n > 0 {
				h.Count, h.Mark = int64(n), w.At(w.N-n)
			}
		}
	case e.algo == algo.SlidingLog:
		*h, exact = sh.logGate(e, &l.Params, ms)
		h.Inflight = int64(e.inflight)
		return exact
	case e.flags&flagState != 0:
		r.State = e.words()
	default:
		r.State = algo.Fresh(e.algo, l.Params, ms)
	}
	return true
}

// usageOf is the limiter.Usage of a step's result: the State's words, or
// for a kind that keeps a log its tokens and the log's summary.
func usageOf(k algo.Kind, r *algo.Result, next int64) limiter.Usage {
	if k.Logged() {
		return limiter.Usage{Tokens: r.State.A, Window: r.Held.Count, Oldest: r.Held.Mark, ResetAt: next}
	}
	return limiter.Usage{Tokens: r.State.A, Window: r.State.B, ResetAt: next}
}

// entryFor is the entry of key for a decision in g when find did not
// give one of g's algorithm (found, at slot): it drops one of another
// algorithm, or creates it (evicting one at max_tracked; a new entry of a
// closed group is rejected and deleted at once, so it does not evict
// another peer's). ok is false for a new entry. sh.mu is held; eviction
// releases it for a while.
func (b *Backend) entryFor(sh *shard, key *entryKey, tag uint32, g *limiter.Group, ms int64, sec uint32, slot uint32, ok bool) (uint32, bool) {
	if ok && sh.at(slot).algo != g.Algorithm && sh.drop(slot, tag, g.Algorithm) {
		// The group's algorithm changed: that state went.
		b.total.Add(-1)
		ok = false
	}
	if !ok && !g.Closed() {
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
	return slot, ok
}

// logHeld is the Held of a sliding log w (nil: empty) at ms: the
// timestamps still counted, and the one that must expire before the next
// admission once they reach the limit.
func logHeld(w *window, p *algo.Params, ms int64) algo.Held {
	if w == nil {
		return algo.Held{}
	}
	c := w.CountFrom(ms - p.Period + 1)
	h := algo.Held{Count: int64(c)}
	if int64(c) >= p.Limit {
		h.Mark = w.At(w.N - int32(p.Limit))
	}
	return h
}

// The sliding log's gate: while the log holds at least L timestamps, the
// L-th newest (at(n − L)) must have expired before the next admission. The
// entry keeps it in its word A (flagGate), beside the window index in wi,
// so that a rejection — most decisions of a peer over its limit — reads
// the entry only, not the log. It is a cache of the log, set again from
// it after every change (and dropped when in doubt: expire, sync).

// logGate returns the Held of e's log at ms from its gate when it is set:
// not expired, Count is L (at least L count, the log is full); expired,
// Count is L − 1 (fewer than L count: the next request is admitted) and
// exact is false. Without a gate (fewer than L timestamps held) it counts
// the log.
func (sh *shard) logGate(e *entry, p *algo.Params, ms int64) (h algo.Held, exact bool) {
	if e.flags&flagGate != 0 {
		if gate := int64(uint64(uint32(e.tokens)) | uint64(e.tick)<<32); gate > ms-p.Period {
			return algo.Held{Count: p.Limit, Mark: gate}, true
		}
		return algo.Held{Count: p.Limit - 1}, false
	}
	w := sh.win(e)
	if w == nil {
		return algo.Held{}, true
	}
	h = logHeld(w, p, ms)
	sh.setGate(e, w, p) // when the log holds L or more: a cache, not state
	return h, true
}

// setGate sets e's gate from its log w, and returns the Held of a log
// whose timestamps all count.
func (sh *shard) setGate(e *entry, w *window, p *algo.Params) algo.Held {
	h := algo.Held{Count: int64(w.N), Inflight: int64(e.inflight)}
	if h.Count < p.Limit {
		e.flags &^= flagGate
		return h
	}
	h.Mark = w.At(w.N - int32(p.Limit))
	e.tokens, e.tick = int32(uint32(h.Mark)), uint32(uint64(h.Mark)>>32)
	e.flags |= flagGate
	return h
}

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
	e.flags = e.flags&^(flagTokens|flagState|flagGate) | flagDirty
	e.algo = kind
	sh.account(e, 1) // its requests in flight
	return false
}

// sync brings sh's entries of g to g.StateVersion(): entries of another
// algorithm are dropped, the states of a token bucket or GCRA converted to
// the new limits (algo.Rescale), a sliding log's gate of other limits
// dropped. A shard without entries of g only takes note. sh.mu is held.
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
			e.flags &^= flagGate // a sliding log's gate of another limit
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
	if sh.synced[g.ID].ver < g.StateVersion() {
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

// expire brings e up to ms: its ticks applied (applyTicks), a sliding
// log's timestamps that no longer count dropped, a State with nothing
// left to remember (algo.Idle) back to fresh. It reports whether the
// entry holds nothing and may go.
func (sh *shard) expire(e *entry, g *limiter.Group, ms int64) bool {
	st := &sh.stats[g.ID]
	sh.applyTicks(e, g, ms, st)
	switch {
	case e.algo == algo.SlidingLog:
		if w := sh.win(e); w != nil {
			p := g.Params()
			st.LogItems -= int64(w.DropBefore(ms - p.Period + 1))
			// The gate, the L-th newest, stays while L are held.
			sh.setGate(e, w, &p)
			if w.N == 0 {
				sh.dropWin(e)
			}
		}
	case e.flags&flagState != 0 && algo.Idle(e.algo, e.words(), g.Params(), ms):
		e.flags &^= flagState
		e.setWords(algo.State{})
		e.flags |= flagDirty
	}
	return sh.dead(e)
}

// pressure grades e's state at ms, its ticks or expiry applied or not:
// how much it restricts its peer now (eviction takes the lightest first).
func (sh *shard) pressure(e *entry, g *limiter.Group, ms int64) algo.Pressure {
	lim := g.Limits()
	var s algo.State
	var h algo.Held
	switch {
	case e.algo == algo.SlidingLog:
		h = logHeld(sh.win(e), &lim.Params, ms)
	default:
		var r algo.Result
		sh.read(e, lim, ms, &r)
		s, h = r.State, r.Held
		// The leaky ticks since the entry was last touched, not applied:
		// the entry is only read.
		if e.flags&flagTokens != 0 {
			s, _ = algo.Tick(e.algo, s, lim, int64(int32(uint32(sh.leakyIndex(g, ms))-e.tick)))
		}
	}
	return algo.PressureAt(e.algo, s, h, lim, ms)
}

// reduce gives back one admission of e at ms (algo.Reduce): a leaky token
// or an algorithm's State, the newest timestamp of a sliding log that
// still counts, or the oldest of the hybrid's window (Arweave 2.9.7
// without a bucket: the node drops the head of the list it stored, which
// only its cleanup ticks prune, so a reduction may change no decision).
func (sh *shard) reduce(e *entry, g *limiter.Group, ms int64, st *limiter.GroupStats) limiter.ReduceResult {
	lim := g.Limits()
	s := sh.state(e, g, ms)
	ns, give := algo.Reduce(e.algo, s, lim, ms)
	w := sh.win(e)
	switch give {
	case algo.GiveState:
		if e.flags&flagTokens != 0 {
			st.ItemsTokens -= s.A - ns.A
			e.tokens = int32(ns.A)
		} else {
			e.setWords(ns)
			e.flags |= flagState
		}
	case algo.GiveNewest:
		if w == nil || w.N == 0 || w.At(w.N-1) <= ms-lim.Period {
			return limiter.ReduceNoop
		}
		w.N--
		st.LogItems--
		sh.setGate(e, w, &lim.Params)
	case algo.GiveOldest:
		if w == nil || w.N == 0 {
			return limiter.ReduceNoop
		}
		w.DropOldest()
		st.ItemsWindow--
		if w.N == 0 {
			sh.dropWin(e)
			st.PeersWindow--
		}
	default:
		return limiter.ReduceNoop
	}
	e.flags |= flagDirty
	return limiter.Reduced
}

// viewAlgo is the state of an entry of an algorithm other than the hybrid
// in the algorithm's terms.
func (sh *shard) viewAlgo(e *entry, g *limiter.Group, ms int64) algo.View {
	p := g.Params()
	if e.algo == algo.SlidingLog {
		h := logHeld(sh.win(e), &p, ms)
		return algo.View{Quota: algo.QuotaOf(e.algo, algo.State{}, h, g.Limits(), ms, 0), Count: h.Count}
	}
	return algo.ViewOf(g.Algorithm, sh.state(e, g, ms), p, ms)
}
