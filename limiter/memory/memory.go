package memory

import (
	"math"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

const (
	shardBits = 6
	nShards   = 1 << shardBits
)

// Backend keeps the state of every (peer, group) of a Limiter in this
// process's memory (limiter.Backend): a sharded table of entries of one
// cache line each, with the sliding windows of those that have one. It
// implements every optional interface of the seam: Sweeper, Snapshotter,
// Viewer, StatsReporter and Reconfigurer. It holds at most max_tracked
// entries (limiter.GroupTable.MaxTracked), evicting the lightest idle one
// for a new one. It is safe for concurrent use: decisions on one (peer,
// group) are linearisable, decisions on different shards proceed in
// parallel, and a sweep or a snapshot holds one shard's lock at a time,
// for a few hundred entries.
type Backend struct {
	total      atomic.Int64 // live entries in all shards
	maxTracked atomic.Int64 // peers.max_tracked; 0: no cap
	evictions  atomic.Uint64
	hash       hasher
	// table is the group table in force (Reconfigured), which eviction
	// grades entries with.
	table atomic.Pointer[limiter.GroupTable]

	shards *[nShards]shard
	cands  [nShards]atomic.Uint64 // each shard's next eviction candidate

	afterScan func() // tests: runs between SnapshotDelta's scan and its drain
}

var (
	_ limiter.Backend       = (*Backend)(nil)
	_ limiter.Reconfigurer  = (*Backend)(nil)
	_ limiter.Sweeper       = (*Backend)(nil)
	_ limiter.Snapshotter   = (*Backend)(nil)
	_ limiter.Viewer        = (*Backend)(nil)
	_ limiter.StatsReporter = (*Backend)(nil)
)

// New returns an empty Backend, for one Limiter (limiter.New).
func New() *Backend {
	b := &Backend{shards: new([nShards]shard), hash: newHasher()}
	for i := range b.shards {
		b.shards[i].cand = &b.cands[i]
		b.cands[i].Store(candEmpty)
	}
	return b
}

// Reconfigured takes the group table now in force (limiter.Reconfigurer):
// its max_tracked at once, and, for every group whose algorithm changed,
// its entries dropped, and for every group whose limits changed, its
// states converted (algo.Rescale) — now, rather than when a decision
// meets them, so that the drops can be reported; it returns them.
func (b *Backend) Reconfigured(prev, next *limiter.GroupTable) map[limiter.GroupID]int {
	b.table.Store(next)
	b.maxTracked.Store(int64(next.MaxTracked()))
	if prev == nil {
		return nil
	}
	var switched []limiter.GroupID
	for id := range limiter.MaxGroups {
		g, ok := next.Lookup(limiter.GroupID(id))
		p, was := prev.Lookup(limiter.GroupID(id))
		if ok && was && p.StateVersion() != g.StateVersion() {
			switched = append(switched, limiter.GroupID(id))
		}
	}
	if len(switched) == 0 {
		return nil
	}
	var before, after [limiter.MaxGroups]limiter.GroupStats
	b.AddStats(&before)
	b.syncAll(next)
	b.AddStats(&after)
	dropped := map[limiter.GroupID]int{}
	for _, id := range switched {
		if n := after[id].StateDrops - before[id].StateDrops; n > 0 {
			dropped[id] = int(n)
		}
	}
	return dropped
}

func (b *Backend) shardOf(k *entryKey) (*shard, uint16, uint32) {
	h := b.hash.sum(k)
	i := uint16(h >> (64 - shardBits))
	return &b.shards[i], i, uint32(h)
}

// Admit decides one request of (k, g) under the shard's lock: it finds or
// creates the entry (evicting one at max_tracked), brings it up to date
// with the ticks since it was last touched, reads its State and the
// summary of its log, lets algo.Step decide, and writes the result back.
func (b *Backend) Admit(ms int64, k limiter.Key, g *limiter.Group) (out limiter.Outcome, u limiter.Usage, h limiter.Handle) {
	sec := uint32(ms / 1000)
	var key entryKey
	key.set(g.ID, k)
	sh, si, tag := b.shardOf(&key)
	sh.mu.Lock()
	// Only a state measured against the limits needs converting before it
	// is read; an entry of another algorithm is dropped where it is met
	// (entryFor), and the hybrid's decisions skip a cache line.
	if g.Algorithm.Measured() && sh.synced[g.ID].ver < g.StateVersion() {
		b.sync(sh, g)
	}
	slot, _, ok := sh.find(&key, tag)
	var e *entry
	if ok {
		e = sh.at(slot)
	}
	if !ok || e.algo != g.Algorithm {
		slot, ok = b.entryFor(sh, &key, tag, g, ms, sec, slot, ok)
		e = sh.at(slot)
	}
	stats := &sh.stats[g.ID]
	// The leaky tick span holding ms, looked up once for the decision.
	lc := &sh.leakyCache[g.ID]
	lk := lc.Index(&g.Leaky, g.Version, ms)
	if ok {
		sh.applyTicksAt(e, g, ms, stats, lk)
	}
	sh.touch(slot, sec)
	stats.Requests++
	satInc(&e.requests)

	lim := g.Limits()
	var r algo.Result
	exact := sh.read(e, lim, ms, &r)
	next := lc.To // read under the lock: another decision may move the span
	algo.Step(g.Algorithm, &r, lim, ms, next)
	out = limiter.OutcomeOf(&r)
	switch r.Via {
	case algo.ViaBucket:
		if e.flags&flagTokens == 0 {
			e.flags |= flagTokens
			e.tick = uint32(lk)
			stats.PeersTokens++
		}
		e.tokens = int32(r.State.A)
		stats.ItemsTokens++
		stats.AllowedLeaky++
	case algo.ViaWindow:
		w := sh.win(e)
		if w == nil {
			w = sh.setWin(e, window{Ctick: uint32(sh.cleanupIndex(g, ms))})
		}
		if w.N == 0 {
			stats.PeersWindow++
		}
		stats.ItemsWindow -= int64(w.DropBefore(ms - lim.WindowDuration + 1))
		w.Add(ms, int32(lim.WindowLimit))
		stats.ItemsWindow++
		stats.AllowedSliding++
	case algo.ViaAlgorithm:
		if r.Append {
			// The sliding log.
			w := sh.win(e)
			if w == nil {
				w = sh.setWin(e, window{})
			}
			stats.LogItems -= int64(w.DropBefore(ms - lim.Period + 1))
			w.Add(ms, int32(lim.Limit))
			stats.LogItems++
			// Every timestamp left counts (an out-of-order ms is in the
			// past by a few µs at most).
			r.Held = sh.setGate(e, w, &lim.Params)
		} else {
			e.setWords(r.State)
			e.flags |= flagState
		}
		stats.AllowedAlgorithm++
	default:
		if r.Concurrency {
			satInc(&e.rejConc)
			stats.RejectedConcurrency++
		} else {
			satInc(&e.rejRate)
			stats.RejectedRateLimit++
		}
		if !exact {
			r.Held = logHeld(sh.win(e), &lim.Params, ms)
		}
	}
	if r.Via != algo.ViaNone {
		if e.inflight == 0 {
			stats.PeersConcurrency++
		}
		e.inflight++
		stats.ItemsConcurrency++
		h = localHandle(si, slot, e.gen, sh.epoch)
	}
	e.flags |= flagDirty
	if sh.dead(e) {
		sh.remove(slot, sh.posOf(slot, tag))
		b.total.Add(-1)
	}
	u = usageOf(e.algo, &r, next)
	sh.mu.Unlock()
	return out, u, h
}

// localHandle packs an in-flight slot: the slot and its generation, the
// shard and its epoch (Restore replaces the tables).
func localHandle(shard uint16, slot, gen, epoch uint32) limiter.Handle {
	return limiter.Handle{A: uint64(slot) | uint64(gen)<<32, B: uint64(shard) | uint64(epoch)<<32}
}

// Release gives back the in-flight slot h; a no-op when the slot's entry
// was freed (its generation moved on) or the tables were replaced.
func (b *Backend) Release(h limiter.Handle) {
	slot, gen := uint32(h.A), uint32(h.A>>32)
	sh := &b.shards[uint16(h.B)&(nShards-1)]
	sh.mu.Lock()
	if sh.epoch != uint32(h.B>>32) || int(slot>>pageBits) >= len(sh.pages) {
		// The tables were replaced (Restore) since the decision.
		sh.mu.Unlock()
		return
	}
	e := sh.at(slot)
	if e.gen == gen && e.key.live() && e.inflight > 0 {
		st := &sh.stats[e.key.group()]
		e.inflight--
		st.ItemsConcurrency--
		if e.inflight == 0 {
			st.PeersConcurrency--
		}
		if sh.dead(e) {
			sh.remove(slot, sh.posOf(slot, uint32(b.hash.sum(&e.key))))
			b.total.Add(-1)
		}
	}
	sh.mu.Unlock()
}

// Reduce gives back one admission of (k, g), algo.Reduce on the entry
// with its due ticks applied (reduce); it never creates an entry.
func (b *Backend) Reduce(ms int64, k limiter.Key, g *limiter.Group) limiter.ReduceResult {
	key := makeEntryKey(g.ID, k)
	sh, _, tag := b.shardOf(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, ok := sh.find(&key, tag)
	if !ok || !b.current(sh, slot, g) {
		return limiter.ReduceNoop
	}
	e := sh.at(slot)
	st := &sh.stats[g.ID]
	sh.applyTicks(e, g, ms, st)
	res := sh.reduce(e, g, ms, st)
	if sh.expire(e, g, ms) {
		sh.remove(slot, sh.posOf(slot, tag))
		b.total.Add(-1)
	}
	return res
}

// Forget drops the state of (k, g), if any (clear): the entry goes unless
// requests of it are in flight.
func (b *Backend) Forget(k limiter.Key, g *limiter.Group) bool {
	key := makeEntryKey(g.ID, k)
	sh, _, tag := b.shardOf(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, ok := sh.find(&key, tag)
	if !ok {
		return false
	}
	if sh.clear(slot, tag, sh.at(slot).algo) {
		b.total.Add(-1)
	}
	return true
}

// dead reports whether e holds nothing: it can go.
func (sh *shard) dead(e *entry) bool {
	if e.inflight != 0 || e.flags&(flagTokens|flagState) != 0 {
		return false
	}
	w := sh.win(e)
	return w == nil || w.N == 0
}

// account adds (sign 1) or removes (sign -1) e's share of the gauges.
func (sh *shard) account(e *entry, sign int64) {
	st := &sh.stats[e.key.group()]
	if e.inflight > 0 {
		st.PeersConcurrency += sign
		st.ItemsConcurrency += sign * int64(e.inflight)
	}
	if e.flags&flagTokens != 0 {
		st.PeersTokens += sign
		st.ItemsTokens += sign * int64(e.tokens)
	}
	if w := sh.win(e); w != nil && w.N > 0 {
		if e.algo != algo.Hybrid {
			st.LogItems += sign * int64(w.N)
			return
		}
		st.PeersWindow += sign
		st.ItemsWindow += sign * int64(w.N)
	}
}

func satInc(p *uint32) {
	if *p != math.MaxUint32 {
		*p++
	}
}

// applyTicks brings e up to date with the ticks of its group's schedules
// that fell since it was last touched: the leaky ticks (algo.Tick) and the
// cleanup ticks of a window (CleanupCut), counting them as the eager ticks
// of the Arweave node would, and keeping the gauges in step. Only the
// entries of a Ticked kind keep tick indexes (flagTokens, window.Ctick);
// the others have nothing to do here (expire).
func (sh *shard) applyTicks(e *entry, g *limiter.Group, ms int64, st *limiter.GroupStats) {
	sh.applyTicksAt(e, g, ms, st, -1)
}

// applyTicksAt is applyTicks with the index of the leaky tick span
// holding ms already looked up (lk), or -1.
func (sh *shard) applyTicksAt(e *entry, g *limiter.Group, ms int64, st *limiter.GroupStats, lk int64) {
	if e.flags&flagTokens != 0 {
		k := lk
		if k < 0 {
			k = sh.leakyIndex(g, ms)
		}
		if n := int64(int32(uint32(k) - e.tick)); n > 0 {
			s, t := algo.Tick(e.algo, algo.State{A: int64(e.tokens), B: 1}, g.Limits(), n)
			st.TickReductionsPeer += uint64(t.Reducing)
			st.TickTokenReductions += uint64(t.Taken)
			st.ItemsTokens -= t.Taken
			e.tokens = int32(s.A)
			if t.Left {
				st.TickDeletePeer++
				st.PeersTokens--
				e.flags &^= flagTokens
			}
			e.tick = uint32(k)
			e.flags |= flagDirty
		}
	}
	if w := sh.win(e); w != nil && e.algo.Ticked() {
		k := sh.cleanupIndex(g, ms)
		if d := int32(uint32(k) - w.Ctick); d > 0 {
			had := w.N
			w.DropBefore(limiter.CleanupCut(g, k))
			st.ItemsWindow -= int64(had - w.N)
			w.Ctick = uint32(k)
			if w.N == 0 {
				sh.dropWin(e)
				if had > 0 {
					st.PeersWindow--
				}
				st.CleanupDeletePeer++
			}
			e.flags |= flagDirty
		}
	}
}

func (sh *shard) leakyIndex(g *limiter.Group, ms int64) int64 {
	return sh.leakyCache[g.ID].Index(&g.Leaky, g.Version, ms)
}

func (sh *shard) cleanupIndex(g *limiter.Group, ms int64) int64 {
	return sh.cleanupCache[g.ID].Index(&g.Cleanup, g.Version, ms)
}
