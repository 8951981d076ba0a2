package limiter

import (
	"math"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter/algo"
)

const (
	shardBits = 6
	nShards   = 1 << shardBits
)

// local is the Backend of a Limiter's own memory: a sharded table of
// 64-byte pointer-free entries (table.go) with their sliding windows
// (window.go). It implements every optional interface: Sweeper,
// Snapshotter, Viewer and StatsReporter. It is safe for concurrent use:
// decisions on one (peer, group) are linearisable under its shard's lock,
// decisions on different shards proceed in parallel.
type local struct {
	total      atomic.Int64 // live entries in all shards
	maxTracked atomic.Int64 // peers.max_tracked; 0: no cap
	evictions  atomic.Uint64
	hash       hasher

	shards *[nShards]shard
	cands  [nShards]atomic.Uint64 // each shard's next eviction candidate

	afterScan func() // tests: runs between SnapshotDelta's scan and its drain
}

var (
	_ Backend       = (*local)(nil)
	_ Sweeper       = (*local)(nil)
	_ Snapshotter   = (*local)(nil)
	_ Viewer        = (*local)(nil)
	_ StatsReporter = (*local)(nil)
)

func newLocal() *local {
	b := &local{shards: new([nShards]shard), hash: newHasher()}
	for i := range b.shards {
		b.shards[i].cand = &b.cands[i]
		b.cands[i].Store(candEmpty)
	}
	return b
}

func (b *local) shardOf(k *entryKey) (*shard, uint16, uint32) {
	h := b.hash.sum(k)
	i := uint16(h >> (64 - shardBits))
	return &b.shards[i], i, uint32(h)
}

// Admit runs the hybrid decision for (k, g) under the shard's lock: it
// finds or creates the entry (evicting one at max_tracked), brings it up to
// date with the ticks since it was last touched, reads its HybridState,
// lets StepHybrid decide, and writes the outcome back. The other
// algorithms are admitAlgo's.
func (b *local) Admit(ms int64, k Key, g *Group) (out Outcome, u Usage, h Handle) {
	if g.Algorithm != algo.Hybrid {
		return b.admitAlgo(ms, k, g)
	}
	sec := uint32(ms / 1000)
	var key entryKey
	key.set(g.ID, k)
	sh, si, tag := b.shardOf(&key)
	sh.mu.Lock()
	slot, _, ok := sh.find(&key, tag)
	if ok && sh.at(slot).algo != algo.Hybrid {
		// The group's algorithm changed to the hybrid: that state goes.
		sh.drop(slot, tag)
		b.total.Add(-1)
		ok = false
	}
	// A new entry in a closed group (no window, no bucket) is rejected and
	// deleted at once, below: it must not evict another peer's entry.
	if !ok && !g.closed() {
		if max := b.maxTracked.Load(); max > 0 && b.total.Load() >= max {
			sh.mu.Unlock()
			b.evictOne()
			sh.mu.Lock()
			slot, _, ok = sh.find(&key, tag)
		}
	}
	if !ok {
		slot = sh.insert(&key, tag)
		sh.at(slot).lastSeen = sec
		b.total.Add(1)
	}
	e := sh.at(slot)
	stats := &sh.stats[g.ID]
	// The leaky tick span holding ms, looked up once for the decision.
	lc := &sh.leakyCache[g.ID]
	lk := lc.Index(&g.Leaky, g.Version, ms)
	if ok {
		sh.applyTicks(e, g, ms, stats)
	}
	sh.touch(slot, sec)
	stats.Requests++
	satInc(&e.requests)

	cut := ms - g.SlidingWindowDuration + 1 // timestamps < cut have expired
	s := HybridState{Inflight: int64(e.inflight), Tokens: int64(e.tokens)}
	w := sh.win(e)
	if w != nil {
		if wn := w.CountFrom(cut); wn > 0 {
			s.Window, s.Oldest = int64(wn), w.At(w.N-wn)
		}
	}
	resetAt := lc.To // read under the lock: another decision may move the span
	s, out = StepHybrid(s, &g.GroupSettings, ms, resetAt)
	e.setPress(hybridPress(s.Window, s.Tokens, &g.GroupSettings))
	switch out.Via {
	case ViaLeaky:
		if e.flags&flagTokens == 0 {
			e.flags |= flagTokens
			e.tick = uint32(lk)
			stats.PeersTokens++
		}
		e.tokens = int32(s.Tokens)
		stats.ItemsTokens++
		stats.AllowedLeaky++
	case ViaSliding:
		if w == nil {
			w = sh.setWin(e, window{Ctick: uint32(sh.cleanupIndex(g, ms))})
		}
		if w.N == 0 {
			stats.PeersWindow++
		}
		stats.ItemsWindow -= int64(w.DropBefore(cut))
		w.Add(ms, int32(g.SlidingWindowLimit))
		stats.ItemsWindow++
		stats.AllowedSliding++
	default:
		if out.Reason == ReasonConcurrency {
			satInc(&e.rejConc)
			stats.RejectedConcurrency++
		} else {
			satInc(&e.rejRate)
			stats.RejectedRateLimit++
		}
	}
	if out.Via != ViaNone {
		if e.inflight == 0 {
			stats.PeersConcurrency++
		}
		e.inflight = int32(s.Inflight)
		stats.ItemsConcurrency++
		h = localHandle(si, slot, e.gen, sh.epoch)
	}
	e.flags |= flagDirty
	if sh.dead(e) {
		sh.remove(slot, sh.posOf(slot, tag))
		b.total.Add(-1)
	}
	u = Usage{Tokens: s.Tokens, Window: s.Window, Oldest: s.Oldest, ResetAt: resetAt}
	sh.mu.Unlock()
	return out, u, h
}

// localHandle packs an in-flight slot: the slot and its generation, the
// shard and its epoch (Restore replaces the tables).
func localHandle(shard uint16, slot, gen, epoch uint32) Handle {
	return Handle{A: uint64(slot) | uint64(gen)<<32, B: uint64(shard) | uint64(epoch)<<32}
}

// Release gives back the in-flight slot h; a no-op when the slot's entry
// was freed (its generation moved on) or the tables were replaced.
func (b *local) Release(h Handle) {
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

// Reduce gives back one token of (k, g), ReduceHybrid on the entry with
// its due ticks applied (with arweave.version 2.9.7 and no bucket, the
// oldest window timestamp: reduceOldest; one admission of the other
// algorithms: reduceAlgo); it never creates an entry.
func (b *local) Reduce(ms int64, k Key, g *Group) ReduceResult {
	key := makeEntryKey(g.ID, k)
	sh, _, tag := b.shardOf(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, ok := sh.find(&key, tag)
	if !ok || !b.current(sh, slot, g) {
		return ReduceNoop
	}
	e := sh.at(slot)
	if g.Algorithm != algo.Hybrid {
		res := sh.reduceAlgo(e, g, ms)
		if sh.expireAlgo(e, g, ms) {
			sh.remove(slot, sh.posOf(slot, tag))
			b.total.Add(-1)
		}
		return res
	}
	pos := sh.posOf(slot, tag)
	sh.applyTicks(e, g, ms, &sh.stats[g.ID])
	if g.Arweave == Arweave297 && g.LeakyLimit == 0 {
		res := sh.reduceOldest(e, &sh.stats[g.ID])
		if sh.dead(e) {
			sh.remove(slot, pos)
			b.total.Add(-1)
		}
		return res
	}
	ns, res := ReduceHybrid(HybridState{Inflight: int64(e.inflight), Tokens: int64(e.tokens)})
	if res == Reduced {
		sh.stats[g.ID].ItemsTokens -= int64(e.tokens) - ns.Tokens
		e.tokens = int32(ns.Tokens)
		e.flags |= flagDirty
	}
	if sh.dead(e) {
		sh.remove(slot, pos)
		b.total.Add(-1)
	}
	return res
}

// reduceOldest is the reduction of Arweave 2.9.7 in a group without a
// bucket (leaky_limit 0, SPEC §6.3): the oldest window timestamp held
// goes, expired or not (the node drops the head of the list it stored,
// which only its cleanup ticks prune), so a reduction may change no
// decision. Reduced when one went.
func (sh *shard) reduceOldest(e *entry, st *GroupStats) ReduceResult {
	w := sh.win(e)
	if w == nil || w.N == 0 {
		return ReduceNoop
	}
	w.DropOldest()
	st.ItemsWindow--
	if w.N == 0 {
		sh.dropWin(e)
		st.PeersWindow--
	}
	e.flags |= flagDirty
	return Reduced
}

// Forget deletes the entry of (k, g), if any.
func (b *local) Forget(k Key, g *Group) bool {
	key := makeEntryKey(g.ID, k)
	sh, _, tag := b.shardOf(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, ok := sh.find(&key, tag)
	if !ok {
		return false
	}
	sh.account(sh.at(slot), -1)
	sh.remove(slot, pos)
	b.total.Add(-1)
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

// hybridPress grades a hybrid state of window unexpired timestamps and
// tokens consumed: what both admit at once against a fresh entry's.
func hybridPress(window, tokens int64, g *GroupSettings) algo.Pressure {
	return algo.PressureOf(max(0, g.SlidingWindowLimit-window)+max(0, g.LeakyLimit-tokens), g.SlidingWindowLimit+g.LeakyLimit)
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

// applyTicks brings e up to date with the leaky and cleanup ticks that fell
// since it was last touched (LeakyTicks, CleanupCut), counting them as the
// eager ticks of the Arweave node would, and keeping the gauges in step.
func (sh *shard) applyTicks(e *entry, g *Group, ms int64, st *GroupStats) {
	if e.algo != algo.Hybrid {
		return // no ticks: expireAlgo
	}
	if e.flags&flagTokens != 0 {
		k := sh.leakyIndex(g, ms)
		if n := int64(int32(uint32(k) - e.tick)); n > 0 {
			t := int64(e.tokens)
			left, reducing, deleted := LeakyTicks(t, n, g.LeakyTickReduction)
			st.TickReductionsPeer += uint64(reducing)
			st.TickTokenReductions += uint64(t - left)
			st.ItemsTokens -= t - left
			e.tokens = int32(left)
			if deleted {
				st.TickDeletePeer++
				st.PeersTokens--
				e.flags &^= flagTokens
			}
			e.tick = uint32(k)
			e.flags |= flagDirty
		}
	}
	if w := sh.win(e); w != nil {
		k := sh.cleanupIndex(g, ms)
		if d := int32(uint32(k) - w.Ctick); d > 0 {
			had := w.N
			w.DropBefore(CleanupCut(g, k))
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

func (sh *shard) leakyIndex(g *Group, ms int64) int64 {
	return sh.leakyCache[g.ID].Index(&g.Leaky, g.Version, ms)
}

func (sh *shard) cleanupIndex(g *Group, ms int64) int64 {
	return sh.cleanupCache[g.ID].Index(&g.Cleanup, g.Version, ms)
}
