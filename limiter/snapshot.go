package limiter

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Snapshot is all of a Limiter's state as plain values: what a restart
// must not forget. In-flight counts are not part of it.
type Snapshot struct {
	// TakenAt is when the snapshot was taken, Unix ms, on the timeline the
	// Limiter was given its times on.
	TakenAt int64 `json:"taken_at_ms"`
	// WallAt is the wall clock's reading at the same moment, when the
	// caller's timeline is not the wall clock (a monotonic clock that a
	// step of the wall clock left apart from it); 0 when they agree. A
	// Restore on the wall clock moves every time of the snapshot by
	// WallAt − TakenAt first (Shift).
	WallAt int64 `json:"wall_at_ms,omitempty"`
	// Enabled is the global switch.
	Enabled bool            `json:"enabled"`
	Groups  []GroupSnapshot `json:"groups"`
	Entries []EntrySnapshot `json:"entries"`
}

// GroupSnapshot is the tick phase of one group, and its adaptive limit.
type GroupSnapshot struct {
	Name    string   `json:"name"`
	Leaky   Schedule `json:"leaky"`
	Cleanup Schedule `json:"cleanup"`
	// Algorithm and its limits, burst resolved (not the hybrid): what the
	// entries' states are measured in, so that a restart under other
	// limits converts them, and under another algorithm drops them.
	Algorithm algo.Kind   `json:"algorithm"`
	Params    algo.Params `json:"params,omitzero"`
	// Adaptive is the group's adaptive concurrency limit and the node's
	// unloaded latency (docs/limiting.md, "Adaptive concurrency"): nil when
	// it is off or has measured nothing yet.
	Adaptive *AdaptiveSnapshot `json:"adaptive,omitempty"`
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
			if gr.adaptive != nil {
				gs.Adaptive = gr.adaptive.snapshot()
			}
			out = append(out, gs)
		}
	}
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
	// Dropped entries were saved under another algorithm than their group's
	// now (docs/limiting.md, "Other algorithms": a change of algorithm drops
	// the state).
	Dropped int
	// Gap is the time between the snapshot and now; 0 when the clock went
	// backwards (which counts as no gap).
	Gap time.Duration
}

// Shift returns how far every time of snap moves when it is restored at
// ms: by the step between its timeline and the wall clock (WallAt −
// TakenAt, when WallAt is set and they are MinWallStep or more apart),
// then back with a clock that went backwards since it was taken (a clock
// that went back counts as no gap).
func (snap *Snapshot) Shift(ms int64) int64 {
	var off int64
	if snap.WallAt != 0 {
		if off = snap.WallAt - snap.TakenAt; off > -MinWallStep && off < MinWallStep {
			off = 0 // the two readings' own jitter, not a step
		}
	}
	return off + min(0, ms-(snap.TakenAt+off))
}

// MinWallStep is, in ms, how far a snapshot's WallAt must be from its
// TakenAt for Shift to move the snapshot by it: the two clocks are read a
// moment apart, so a millisecond between them is no step of the wall
// clock (a step is one second or more).
const MinWallStep = 1000

// Restore replaces all state with snap, as of now: the group schedules keep
// their phase, a group whose adaptive concurrency is on starts from its
// saved limit and unloaded latency, and the ticks that fell between
// snap.TakenAt and now apply
// (entries left empty are not loaded). A clock that went backwards counts
// as no gap: every time in the snapshot is moved back with it; a snapshot
// taken on a timeline apart from the wall clock is moved onto it first
// (Snapshot.WallAt). Requests in flight before Restore release nothing
// afterwards. Call it before serving.
//
// For the next SnapshotDelta, which need not be full: every entry loaded
// is changed (its ticks were applied), the entries left out by max_tracked
// or emptied by the gap are deleted, and the entries of groups not defined
// now are not mentioned, so that a store keeps them until the group is
// back.
func (l *Limiter) Restore(now time.Time, snap Snapshot) (RestoreReport, error) {
	ms := now.UnixMilli()
	var gap time.Duration
	shift := snap.Shift(ms)
	if taken := snap.TakenAt + shift; taken <= ms {
		gap = time.Duration(ms-taken) * time.Millisecond
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
	l.install(l.set.Load(), st)
	for _, sg := range snap.Groups {
		if sg.Adaptive == nil {
			continue
		}
		if id, ok := l.ids[sg.Name]; ok && st.groups[id].defined && st.groups[id].adaptive != nil {
			st.groups[id].adaptive.restore(sg.Adaptive, ms)
		}
	}
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
	Full    bool  `json:"full"`
	TakenAt int64 `json:"taken_at_ms"`
	// WallAt is as Snapshot's: set by the caller that knows it.
	WallAt  int64           `json:"wall_at_ms,omitempty"`
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
