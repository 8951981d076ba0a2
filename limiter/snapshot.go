package limiter

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Snapshot is all of a Limiter's state as plain values: what a restart
// must not forget. In-flight counts are not part of it.
type Snapshot struct {
	// TakenAt is when the snapshot was taken, Unix ms.
	TakenAt int64 `json:"taken_at_ms"`
	// Enabled is the global switch.
	Enabled bool            `json:"enabled"`
	Groups  []GroupSnapshot `json:"groups"`
	Entries []EntrySnapshot `json:"entries"`
}

// GroupSnapshot is the tick phase of one group.
type GroupSnapshot struct {
	Name    string   `json:"name"`
	Leaky   Schedule `json:"leaky"`
	Cleanup Schedule `json:"cleanup"`
	// Algorithm and its limits, burst resolved (not the hybrid): what the
	// entries' states are measured in, so that a restart under other
	// limits converts them, and under another algorithm drops them.
	Algorithm algo.Kind   `json:"algorithm"`
	Params    algo.Params `json:"params,omitzero"`
}

// EntrySnapshot is the state of one (peer, group).
type EntrySnapshot struct {
	Peer  peer.Key `json:"peer"`
	Group string   `json:"group"`
	// InTokens is true while the entry is in the leaky-token register;
	// Tokens is then the tokens consumed and LeakyTick the index of the
	// last leaky tick applied.
	InTokens  bool  `json:"in_tokens,omitempty"`
	Tokens    int64 `json:"tokens,omitempty"`
	LeakyTick int64 `json:"leaky_tick,omitempty"`
	// Window holds the window timestamps (Unix ms, oldest first) and
	// CleanupTick the index of the last cleanup tick applied to them.
	Window              []int64 `json:"window,omitempty"`
	CleanupTick         int64   `json:"cleanup_tick,omitempty"`
	Requests            uint64  `json:"requests,omitempty"`
	RejectedConcurrency uint64  `json:"rejected_concurrency,omitempty"`
	RejectedRateLimit   uint64  `json:"rejected_rate_limit,omitempty"`
	// LastSeen is the Unix second of the entry's last decision.
	LastSeen int64 `json:"last_seen"`
	// Algorithm is the algorithm the state is of (its group's when it was
	// saved). For the token bucket, GCRA and the windows, State holds it
	// (zero: nothing to remember); the sliding log keeps its timestamps in
	// Window. InTokens, Tokens and the ticks are the hybrid's.
	Algorithm algo.Kind  `json:"algorithm,omitempty"`
	State     algo.State `json:"state,omitzero"`
}

// widen turns a stored low-32-bit tick index back into a full index, given
// the current full index now (the stored one is never far behind it).
func widen(low uint32, now int64) int64 {
	return now - int64(int32(uint32(now)-low))
}

func (sh *shard) snapshotEntry(e *entry, gr *Group, ms int64) EntrySnapshot {
	es := EntrySnapshot{
		Peer:                e.key.peer(),
		Group:               gr.Name,
		Requests:            uint64(e.requests),
		RejectedConcurrency: uint64(e.rejConc),
		RejectedRateLimit:   uint64(e.rejRate),
		LastSeen:            int64(e.lastSeen),
	}
	if es.Algorithm = e.algo; e.flags&flagState != 0 && e.algo != algo.SlidingLog {
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

// Snapshot returns all state as of now: the switch, the groups' tick
// phase, and the backend's entries when it is a Snapshotter. The local
// backend holds one shard lock at a time, so decisions go on while it
// runs; each entry is copied consistently.
func (l *Limiter) Snapshot(now time.Time) Snapshot {
	ms := now.UnixMilli()
	st := l.set.Load()
	snap := Snapshot{TakenAt: ms, Enabled: l.Enabled(), Groups: st.groupSnapshots(ms)}
	if sn, ok := l.backend.(Snapshotter); ok {
		snap.Entries = sn.SnapshotEntries(ms, &st.GroupTable)
	}
	return snap
}

// groupSnapshots returns the tick phase of every limited group at ms.
func (st *settings) groupSnapshots(ms int64) []GroupSnapshot {
	var out []GroupSnapshot
	for g := range st.groups {
		gr := &st.groups[g]
		if gr.defined && g != int(LocalPeers) {
			gs := GroupSnapshot{Name: gr.Name, Leaky: gr.Leaky.Settled(ms), Cleanup: gr.Cleanup.Settled(ms), Algorithm: gr.Algorithm}
			if gr.Algorithm != algo.Hybrid {
				gs.Params = gr.params
			}
			out = append(out, gs)
		}
	}
	return out
}

// SnapshotEntries copies every entry of a group defined in gt, one shard
// lock at a time.
func (b *local) SnapshotEntries(ms int64, gt *GroupTable) []EntrySnapshot {
	out := make([]EntrySnapshot, 0, b.Tracked())
	b.scan(func(sh *shard, slot uint32, e *entry) {
		if gr := &gt.groups[e.key.group()]; gr.defined && b.current(sh, slot, gr) {
			out = append(out, sh.snapshotEntry(e, gr, ms))
		}
	}, nil, false)
	return out
}

// RestoreReport says what Restore did with a snapshot.
type RestoreReport struct {
	// Loaded entries are tracked again.
	Loaded int
	// Expired entries had nothing left once the ticks of the gap applied.
	Expired int
	// Skipped entries belong to groups no longer configured, or carry an
	// invalid peer key, or did not fit under max_tracked.
	Skipped int
	// Dropped entries were saved under another algorithm than their
	// group's now (SPEC §6.2: a change of algorithm drops the state).
	Dropped int
	// Gap is the time between the snapshot and now; 0 when the clock went
	// backwards (which counts as no gap).
	Gap time.Duration
}

// Restore replaces all state with snap, as of now: the group schedules keep
// their phase, and the ticks that fell between snap.TakenAt and now apply
// (entries left empty are not loaded). A clock that went backwards counts
// as no gap: every time in the snapshot is moved back with it. Requests in
// flight before Restore release nothing afterwards. Call it before serving.
//
// For the next SnapshotDelta, which need not be full: every entry loaded
// is changed (its ticks were applied), the entries left out by max_tracked
// or emptied by the gap are deleted, and the entries of groups not defined
// now are not mentioned, so that a store keeps them until the group is
// back.
func (l *Limiter) Restore(now time.Time, snap Snapshot) (RestoreReport, error) {
	ms := now.UnixMilli()
	var gap time.Duration
	shift := restoreShift(ms, snap.TakenAt)
	if shift == 0 {
		gap = time.Duration(ms-snap.TakenAt) * time.Millisecond
	}
	saved := make(map[string][2]Schedule, len(snap.Groups))
	for _, g := range snap.Groups {
		if !g.Leaky.Valid() || !g.Cleanup.Valid() {
			return RestoreReport{Gap: gap}, fmt.Errorf("snapshot: group %q: invalid tick schedule", g.Name)
		}
		saved[g.Name] = [2]Schedule{g.Leaky.Shifted(shift), g.Cleanup.Shifted(shift)}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := l.build(ms, l.set.Load().cfg, nil, saved)
	if err != nil {
		return RestoreReport{Gap: gap}, err
	}
	l.install(st)
	l.enabled.Store(snap.Enabled)
	for g := range st.groups {
		if st.groups[g].defined && g != int(LocalPeers) {
			l.lastTick[g] = st.groups[g].Leaky.IndexAt(ms)
		}
	}
	var rep RestoreReport
	if sn, ok := l.backend.(Snapshotter); ok {
		rep = sn.Restore(ms, &st.GroupTable, &snap)
	}
	rep.Gap = gap
	return rep, nil
}

// restoreShift is how far every time of a snapshot taken at takenAt moves
// when it is restored at ms: back with a clock that went backwards, else
// not at all.
func restoreShift(ms, takenAt int64) int64 {
	return min(0, ms-takenAt)
}

// Restore empties the tables and loads snap's entries as of ms (see
// Limiter.Restore), oldest first so that max_tracked keeps the most recent.
func (b *local) Restore(ms int64, gt *GroupTable, snap *Snapshot) RestoreReport {
	var rep RestoreReport
	shift := restoreShift(ms, snap.TakenAt)
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

	byName := make(map[string]GroupID)
	for g := range gt.groups {
		if gt.groups[g].defined && g != int(LocalPeers) {
			byName[gt.groups[g].Name] = GroupID(g)
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
		for g := range gt.groups {
			sh.synced[g] = shardSync{ver: gt.groups[g].stateVer, p: gt.groups[g].params}
		}
		sh.mu.Unlock()
	}
	// The entries that can be restored, oldest first, so that max_tracked
	// keeps the most recent of them.
	order := make([]int, 0, len(snap.Entries))
	for i := range snap.Entries {
		es := &snap.Entries[i]
		g, ok := byName[es.Group]
		if !ok || !es.Peer.IsValid() || es.Tokens < 0 || es.Tokens > maxSetting {
			rep.Skipped++
			continue
		}
		if es.Algorithm != gt.groups[g].Algorithm {
			// Dropped for good: the next delta deletes it from the store.
			rep.Dropped++
			key := makeEntryKey(g, KeyOf(&es.Peer))
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
			key := makeEntryKey(byName[es.Group], KeyOf(&es.Peer))
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
		gr := &gt.groups[g]
		key := makeEntryKey(g, KeyOf(&es.Peer))
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
		limit := gr.SlidingWindowLimit
		switch gr.Algorithm {
		case algo.Hybrid:
			if es.InTokens {
				e.flags |= flagTokens
				e.tokens = int32(es.Tokens)
				e.tick = tickSince(es.LeakyTick, gr.Leaky.IndexAt(ms))
			}
		case algo.SlidingLog:
			limit = gr.Limit
		default:
			if es.State != (algo.State{}) {
				from, ok := savedParams[es.Group]
				if !ok {
					from = gr.params
				}
				e.setWords(algo.Rescale(gr.Algorithm, algo.Shift(gr.Algorithm, es.State, shift), from, gr.params))
				e.flags |= flagState
			}
		}
		if len(es.Window) > 0 && gr.Algorithm.Logged() {
			w := window{Ctick: tickSince(es.CleanupTick, gr.Cleanup.IndexAt(ms))}
			for _, t := range es.Window {
				w.Add(t+shift, int32(max(limit, int64(len(es.Window)))))
			}
			sh.setWin(e, w)
		}
		sh.account(e, 1)
		sh.applyTicks(e, gr, ms, &sh.stats[g])
		if (gr.Algorithm == algo.Hybrid && sh.dead(e)) || (gr.Algorithm != algo.Hybrid && sh.expireAlgo(e, gr, ms)) {
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

// EntryRef names one (peer, group).
type EntryRef struct {
	Peer  peer.Key `json:"peer"`
	Group string   `json:"group"`
}

// Delta is what changed since the previous SnapshotDelta: the entries
// changed (whole), the entries deleted, and the groups' tick phase and the
// switch (always). When Full is set, Changed holds every entry and the
// store replaces all it has.
type Delta struct {
	Full    bool            `json:"full"`
	TakenAt int64           `json:"taken_at_ms"`
	Enabled bool            `json:"enabled"`
	Groups  []GroupSnapshot `json:"groups"`
	Changed []EntrySnapshot `json:"changed"`
	Deleted []EntryRef      `json:"deleted"`
}

// SnapshotDelta returns the changes since the previous call (or, with full,
// every entry) and marks them saved: the cost follows the churn, not the
// population. Deletions are reported only for entries a previous delta (or
// Restore) reported, or that replaced such an entry during the scan. A key
// is in both Changed and Deleted only when it was deleted and created again;
// a store applies deletions first. Its state in Changed is the newer one,
// unless the scan copied the old entry just before its deletion: the new one
// is then still dirty, and the next delta saves or deletes it. An entry that
// the scan copied and that was deleted before the scan ended is left out of
// Changed (and, in an incremental delta, reported deleted), so that no store
// brings it back. Call it from one goroutine; decisions go on while it runs
// (one shard lock at a time, a few hundred entries per hold). If the caller
// fails to store the delta it must ask for a full one next.
func (l *Limiter) SnapshotDelta(now time.Time, full bool) Delta {
	ms := now.UnixMilli()
	st := l.set.Load()
	d := Delta{Full: full, TakenAt: ms, Enabled: l.Enabled(), Groups: st.groupSnapshots(ms)}
	if sn, ok := l.backend.(Snapshotter); ok {
		d.Changed, d.Deleted = sn.SnapshotDelta(ms, &st.GroupTable, full)
	}
	return d
}

// SnapshotDelta scans for the dirty entries (all, with full), then drains
// the deletions of each shard (see Limiter.SnapshotDelta).
func (b *local) SnapshotDelta(ms int64, gt *GroupTable, full bool) (changed []EntrySnapshot, deleted []EntryRef) {
	if full {
		// Sized once: appending a million entries would leave about six
		// times their size in garbage behind (measured: 454 MB of heap
		// growth for 69 MB of entries).
		changed = make([]EntrySnapshot, 0, b.Tracked()+b.Tracked()/16+64)
	}
	b.scan(func(sh *shard, slot uint32, e *entry) {
		if !full && e.flags&flagDirty == 0 {
			return
		}
		if gr := &gt.groups[e.key.group()]; gr.defined && b.current(sh, slot, gr) {
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
				deleted = append(deleted, EntryRef{Peer: k.peer(), Group: gt.names[k.group()]})
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
		ids := make(map[string]GroupID)
		for g, name := range gt.names {
			if name != "" {
				ids[name] = GroupID(g)
			}
		}
		changed = slices.DeleteFunc(changed, func(es EntrySnapshot) bool {
			return gone[makeEntryKey(ids[es.Group], KeyOf(&es.Peer))]
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
