package memory

import (
	"math"
	"slices"
	"sort"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// maxTokens bounds the tokens of a restored entry, as the settings bound
// leaky_limit.
const maxTokens = 1<<31 - 1

// widen turns a stored low-32-bit tick index back into a full index, given
// the current full index now (the stored one is never far behind it).
func widen(low uint32, now int64) int64 {
	return now - int64(int32(uint32(now)-low))
}

func (sh *shard) snapshotEntry(e *entry, gr *limiter.Group, ms int64) limiter.EntrySnapshot {
	es := limiter.EntrySnapshot{
		Peer:                e.key.peer(),
		Group:               gr.Name,
		Requests:            uint64(e.requests),
		RejectedConcurrency: uint64(e.rejConc),
		RejectedRateLimit:   uint64(e.rejRate),
		LastSeen:            int64(e.lastSeen),
	}
	if es.Algorithm = e.algo; e.flags&flagState != 0 {
		es.State = e.words()
	}
	if e.flags&flagTokens != 0 {
		es.InTokens = true
		es.Tokens = int64(e.tokens)
		es.LeakyTick = widen(e.tick, sh.leakyIndex(gr, ms))
	}
	if w := sh.win(e); w != nil && w.N > 0 {
		es.Window = make([]int64, w.N)
		for i := int32(0); i < w.N; i++ {
			es.Window[i] = w.At(i)
		}
		if e.algo == algo.Hybrid {
			es.CleanupTick = widen(w.Ctick, sh.cleanupIndex(gr, ms))
		}
	}
	return es
}

// SnapshotEntries copies every entry of a group defined in gt, one shard
// lock at a time.
func (b *Backend) SnapshotEntries(ms int64, gt *limiter.GroupTable) []limiter.EntrySnapshot {
	out := make([]limiter.EntrySnapshot, 0, b.Tracked())
	b.scan(func(sh *shard, slot uint32, e *entry) {
		if gr, ok := gt.Lookup(e.key.group()); ok && b.current(sh, slot, gr) {
			out = append(out, sh.snapshotEntry(e, gr, ms))
		}
	}, nil, false)
	return out
}

// Restore empties the tables and loads snap's entries as of ms (see
// Limiter.Restore), oldest first so that max_tracked keeps the most recent.
func (b *Backend) Restore(ms int64, gt *limiter.GroupTable, snap *limiter.Snapshot) limiter.RestoreReport {
	var rep limiter.RestoreReport
	shift := snap.Shift(ms)
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		sh.idx, sh.mask, sh.pages = nil, 0, nil
		sh.used, sh.free, sh.n = 0, 0, 0
		sh.deleted = nil
		sh.victims = nil
		sh.cand.Store(candEmpty)
		sh.wins, sh.winFree = nil, nil
		sh.epoch++
		for g := range sh.stats {
			s := &sh.stats[g]
			s.PeersConcurrency, s.PeersTokens, s.PeersWindow = 0, 0, 0
			s.ItemsConcurrency, s.ItemsTokens, s.ItemsWindow = 0, 0, 0
			s.Entries, s.LogItems = 0, 0
		}
		sh.mu.Unlock()
	}
	b.total.Store(0)

	byName := make(map[string]limiter.GroupID)
	for g := range limiter.MaxGroups {
		if gr, ok := gt.Lookup(limiter.GroupID(g)); ok && g != int(limiter.LocalPeers) {
			byName[gr.Name] = limiter.GroupID(g)
		}
	}
	// The limits each group's states were saved under: converted to
	// today's (a snapshot of an older limiterd has none: hybrid).
	savedParams := make(map[string]algo.Params, len(snap.Groups))
	for _, gs := range snap.Groups {
		if gs.Algorithm != algo.Hybrid && gs.Params.Limit > 0 && gs.Params.Period > 0 && gs.Params.Burst > 0 {
			savedParams[gs.Name] = gs.Params
		}
	}
	// The shards' entries are of today's limits once loaded.
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for g := range limiter.MaxGroups {
			sh.synced[g] = shardSync{}
			if gr, ok := gt.Lookup(limiter.GroupID(g)); ok {
				sh.synced[g] = shardSync{ver: gr.StateVersion(), p: gr.Params()}
			}
		}
		sh.mu.Unlock()
	}
	// The entries that can be restored, oldest first, so that max_tracked
	// keeps the most recent of them.
	order := make([]int, 0, len(snap.Entries))
	for i := range snap.Entries {
		es := &snap.Entries[i]
		g, ok := byName[es.Group]
		if !ok || !es.Peer.IsValid() || es.Tokens < 0 || es.Tokens > maxTokens {
			rep.Skipped++
			continue
		}
		if gr, _ := gt.Lookup(g); es.Algorithm != gr.Algorithm {
			// Dropped for good: the next delta deletes it from the store.
			rep.Dropped++
			key := makeEntryKey(g, limiter.KeyOf(&es.Peer))
			sh, _, _ := b.shardOf(&key)
			sh.mu.Lock()
			sh.deleted = append(sh.deleted, key)
			sh.mu.Unlock()
			continue
		}
		order = append(order, i)
	}
	sort.SliceStable(order, func(a, c int) bool { return snap.Entries[order[a]].LastSeen < snap.Entries[order[c]].LastSeen })
	if max := b.maxTracked.Load(); max > 0 && int64(len(order)) > max {
		cut := len(order) - int(max)
		rep.Skipped += cut
		// Evicted, in effect: the next delta deletes them from the store.
		for _, i := range order[:cut] {
			es := &snap.Entries[i]
			key := makeEntryKey(byName[es.Group], limiter.KeyOf(&es.Peer))
			sh, _, _ := b.shardOf(&key)
			sh.mu.Lock()
			sh.deleted = append(sh.deleted, key)
			sh.mu.Unlock()
		}
		order = order[cut:]
	}
	for _, i := range order {
		es := &snap.Entries[i]
		g := byName[es.Group]
		gr, _ := gt.Lookup(g)
		key := makeEntryKey(g, limiter.KeyOf(&es.Peer))
		sh, _, tag := b.shardOf(&key)
		sh.mu.Lock()
		if _, _, dup := sh.find(&key, tag); dup {
			sh.mu.Unlock()
			rep.Skipped++
			continue
		}
		slot := sh.insert(&key, tag)
		e := sh.at(slot)
		e.algo = gr.Algorithm
		e.lastSeen = uint32(max(0, es.LastSeen+shift/1000))
		e.requests = sat32(es.Requests)
		e.rejConc = sat32(es.RejectedConcurrency)
		e.rejRate = sat32(es.RejectedRateLimit)
		// The entry came from the store: deleting it must be reported, and
		// the ticks applied below changed it since.
		e.flags |= flagPersisted | flagDirty
		switch gr.Algorithm {
		case algo.Hybrid:
			if es.InTokens {
				e.flags |= flagTokens
				e.tokens = int32(es.Tokens)
				e.tick = tickSince(es.LeakyTick, gr.Leaky.IndexAt(ms))
			}
		case algo.SlidingLog:
		default:
			if es.State != (algo.State{}) {
				from, ok := savedParams[es.Group]
				if !ok {
					from = gr.Params()
				}
				e.setWords(algo.Rescale(gr.Algorithm, algo.Shift(gr.Algorithm, es.State, shift), from, gr.Params()))
				e.flags |= flagState
			}
		}
		if len(es.Window) > 0 && gr.Algorithm.Logged() {
			sh.setWin(e, restoredWindow(es.Window, shift, tickSince(es.CleanupTick, gr.Cleanup.IndexAt(ms))))
		}
		sh.account(e, 1)
		if sh.expire(e, gr, ms) {
			sh.remove(slot, sh.posOf(slot, tag))
			rep.Expired++
		} else {
			b.total.Add(1)
			rep.Loaded++
		}
		sh.mu.Unlock()
	}
	return rep
}

// SnapshotDelta scans for the dirty entries (all, with full), then drains
// the deletions of each shard (see Limiter.SnapshotDelta).
func (b *Backend) SnapshotDelta(ms int64, gt *limiter.GroupTable, full bool) (changed []limiter.EntrySnapshot, deleted []limiter.EntryRef) {
	if full {
		// Sized once: appending a million entries would leave about six
		// times their size in garbage behind (measured: 454 MB of heap
		// growth for 69 MB of entries).
		changed = make([]limiter.EntrySnapshot, 0, b.Tracked()+b.Tracked()/16+64)
	}
	b.scan(func(sh *shard, slot uint32, e *entry) {
		if !full && e.flags&flagDirty == 0 {
			return
		}
		if gr, ok := gt.Lookup(e.key.group()); ok && b.current(sh, slot, gr) {
			changed = append(changed, sh.snapshotEntry(e, gr, ms))
			e.flags = e.flags&^flagDirty | flagPersisted
		}
	}, nil, false)
	if b.afterScan != nil {
		b.afterScan()
	}
	// Deletions are drained after the scan. Those of keys gone now may have
	// happened after the scan copied the entry: such copies are dropped.
	var gone map[entryKey]bool
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, k := range sh.deleted {
			if !full {
				deleted = append(deleted, limiter.EntryRef{Peer: k.peer(), Group: gt.Name(k.group())})
			}
			_, _, tag := b.shardOf(&k)
			slot, _, live := sh.find(&k, tag)
			if !live {
				if gone == nil {
					gone = make(map[entryKey]bool)
				}
				gone[k] = true
				continue
			}
			// Created again. If the scan copied the old entry, that copy
			// goes to the store: the new entry's deletion must be reported
			// even if no delta saves it first.
			sh.at(slot).flags |= flagPersisted
		}
		sh.deleted = sh.deleted[:0]
		sh.mu.Unlock()
	}
	if gone != nil {
		ids := make(map[string]limiter.GroupID)
		for g := range limiter.MaxGroups {
			if name := gt.Name(limiter.GroupID(g)); name != "" {
				ids[name] = limiter.GroupID(g)
			}
		}
		changed = slices.DeleteFunc(changed, func(es limiter.EntrySnapshot) bool {
			return gone[makeEntryKey(ids[es.Group], limiter.KeyOf(&es.Peer))]
		})
	}
	return changed, deleted
}

// tickSince returns the 32-bit tick index an entry keeps for the saved
// index, k being the index now. Entries count ticks in the low 32 bits, so a
// gap of 2³¹ ticks or more (25 days of 1 ms ticks) would wrap into a
// negative one: it is cut to the most the entry can count, more than any
// bucket or window needs to empty. A saved index ahead of k (from a clock
// that went back) counts as no gap.
func tickSince(saved, k int64) uint32 {
	saved = min(max(saved, k-math.MaxInt32), k)
	return uint32(saved)
}

func sat32(v uint64) uint32 {
	if v > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(v)
}

// restoredWindow returns the window of a restored entry: its timestamps
// ts moved by shift, sorted (a snapshot from anywhere may hold them in any
// order; sorting first keeps a restore O(n log n), where inserting each
// in order would be quadratic in a window given newest first), its cleanup
// tick ctick. The ring is full: the next admission grows it (window.Add).
func restoredWindow(ts []int64, shift int64, ctick uint32) window {
	buf := make([]int64, len(ts))
	for i, t := range ts {
		buf[i] = t + shift
	}
	if !slices.IsSorted(buf) {
		slices.Sort(buf)
	}
	return window{ts: buf, N: int32(len(ts)), Ctick: ctick}
}
