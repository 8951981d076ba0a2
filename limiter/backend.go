package limiter

import (
	"encoding/binary"

	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Backend is where the state of every (peer, group) lives: the local slab
// of this package, or (cluster mode, docs/cluster.md) a shared store. A Limiter
// runs the policy of a decision (deny list, exemption, the group's mode,
// the global switch) and asks the group's Backend only for the state part:
// admit a request, release its in-flight slot, reduce, forget.
//
// A Backend must be safe for concurrent use, and one Admit, Release or
// Reduce on a (peer, group) must be linearisable with every other on it.
// Times are Unix milliseconds. A *Group handed to a Backend is immutable:
// it must not be modified, and may be kept.
//
// Views, snapshots, sweeps and counters are optional: see Sweeper,
// Snapshotter, Viewer and StatsReporter. The Limiter asks for them with a
// type assertion and goes without when a Backend does not offer them.
type Backend interface {
	// Admit decides one request of peer k in group g at ms, on the group's
	// algorithm (algo.Step with the group's Limits: concurrency first, then
	// the algorithm; docs/limiting.md), updates
	// the state as the decision says, and returns the outcome, the usage
	// after it and, when admitted, the Handle of the request's in-flight
	// slot, held until Release. A backend that cannot decide answers Reason
	// ReasonUnavailable and changes nothing, or, told to fail open, Via
	// ViaUnlimited and the zero Handle (the request is admitted as not
	// Limited: no RateLimit fields; the backend counts it as Unlimited).
	Admit(ms int64, k Key, g *Group) (Outcome, Usage, Handle)
	// Release gives back the in-flight slot of an admission. The Limiter
	// calls it at most once per Handle; a Handle whose entry is gone (by
	// Forget, eviction or Restore), or the zero Handle of a ViaUnlimited
	// admission, releases nothing. It must not allocate.
	Release(h Handle)
	// Reduce is the manual reduction (docs/limiting.md, "Reduce") for peer k
	// in group g at ms (for the other algorithms: algo.Reduce, or the
	// sliding log's newest timestamp): Reduced when one admission was given
	// back, else ReduceNoop. It never creates state. The policy
	// (is_manual_reduction_disabled) is the Limiter's.
	Reduce(ms int64, k Key, g *Group) ReduceResult
	// Forget deletes the state of peer k in group g and reports whether
	// there was any. Its requests in flight keep counting against the
	// concurrency limit until they are released (a Backend keeps their
	// count, or its lease, across the forget).
	Forget(k Key, g *Group) bool
}

// Key is a peer.Key as a Backend receives it, in three words: the key's
// first eight bytes (Lo) and next eight (Hi), little-endian, and its last
// byte (decision 188). Make one with KeyOf; Peer gives the peer.Key back.
// The zero Key is no peer's.
type Key struct {
	Lo, Hi uint64
	Last   uint8
}

// KeyOf returns k as a Key.
func KeyOf(k *peer.Key) Key {
	return Key{Lo: binary.LittleEndian.Uint64(k[0:8]), Hi: binary.LittleEndian.Uint64(k[8:16]), Last: k[16]}
}

// Peer returns the peer.Key k holds.
func (k Key) Peer() peer.Key {
	var p peer.Key
	le := binary.LittleEndian
	le.PutUint64(p[0:8], k.Lo)
	le.PutUint64(p[8:16], k.Hi)
	p[16] = k.Last
	return p
}

// Handle names an admitted request's in-flight slot to the Backend that
// admitted it. It is opaque to everyone else; a backend that needs more
// than 128 bits keeps a table of its slots and hands out an index.
type Handle struct{ A, B uint64 }

// Usage is what a (peer, group) has used right after a decision: what the
// RateLimit fields are made of (see Decision.Quota). Their meaning is the
// group's algorithm's.
type Usage struct {
	// Hybrid: Tokens is the State's A (the tokens consumed), Window and
	// Oldest the Held's Count and Mark after the decision (a rejection
	// changes nothing). Token bucket, GCRA, fixed and sliding window:
	// Tokens and Window are the words A and B of the algo.State after the
	// decision. Sliding log: Window is the timestamps counted, Oldest the
	// one that must expire before the next admission (when Window ≥
	// limit): the Held's Count and Mark. Decision.Quota reads them as
	// algo.QuotaOf(State{Tokens, Window}, Held{Count: Window, Mark:
	// Oldest}).
	Tokens int64
	Window int64
	Oldest int64
	// ResetAt is the time of the hybrid's next leaky tick after the
	// decision, Unix ms.
	ResetAt int64
}

// Sweeper is a Backend that must be swept now and then: Limiter.Tick
// calls Sweep. A backend whose state expires by itself (a TTL) need not
// implement it.
type Sweeper interface {
	// Sweep applies the leaky and cleanup ticks due at ms to every entry,
	// keeping the gauges current, and deletes the entries left empty and
	// those of groups no longer defined in gt. It must not stop the world:
	// decisions go on while it runs. Calls on several goroutines are safe.
	Sweep(ms int64, gt *GroupTable)
}

// Snapshotter is a Backend whose state the Limiter saves and restores
// (Limiter.Snapshot, SnapshotDelta, Restore): a backend whose state lives
// elsewhere (Redis) need not implement it.
type Snapshotter interface {
	// SnapshotEntries returns every entry of a group defined in gt as of
	// ms (ticks due but not yet applied are not reflected), never nil.
	SnapshotEntries(ms int64, gt *GroupTable) []EntrySnapshot
	// SnapshotDelta returns the entries changed since the previous call
	// (with full, every entry) and those deleted, as Limiter.SnapshotDelta
	// documents, and marks them saved. Call it from one goroutine.
	SnapshotDelta(ms int64, gt *GroupTable, full bool) (changed []EntrySnapshot, deleted []EntryRef)
	// Restore replaces all state with snap's entries as of ms, applying the
	// ticks of the gap, as Limiter.Restore documents; the report's Gap is
	// left to the caller.
	Restore(ms int64, gt *GroupTable, snap *Snapshot) RestoreReport
}

// Viewer is a Backend whose entries the admin API and the dashboard can
// read one by one.
type Viewer interface {
	// Entry returns the state of peer k in group g with the ticks due at ms
	// applied; ok is false when it is not tracked.
	Entry(ms int64, k Key, g *Group) (v EntryView, ok bool)
	// Each calls fn with every entry of a group defined in gt as of ms until
	// fn returns false, without holding any lock while fn runs.
	Each(ms int64, gt *GroupTable, fn func(EntryView) bool)
}

// Reconfigurer is a Backend told of every configuration a Limiter installs
// (New, Apply, Restore), once it is in force, with the group tables before
// and after it (prev is nil for the first). A change of a group's algorithm
// drops the group's state; a change of the limits its state is measured in
// converts it (docs/limiting.md, "Other algorithms"). Reconfigured returns
// how many entries of each group it dropped, for the Limiter to report (nil
// when none, or when it cannot tell).
type Reconfigurer interface {
	Reconfigured(prev, next *GroupTable) map[GroupID]int
}

// StatsReporter is a Backend that keeps counters and gauges of its own.
type StatsReporter interface {
	// AddStats adds the backend's counters and gauges, per GroupID, to sum:
	// Requests, AllowedSliding, AllowedLeaky, RejectedConcurrency and
	// RejectedRateLimit count the admissions it decided (a dry_run group's
	// rejections included: the Limiter moves those to WouldReject), the
	// tick counters and evictions its own work, the gauges its entries. An
	// admission answered ReasonUnavailable is not counted (the Limiter
	// counts it).
	AddStats(sum *[MaxGroups]GroupStats)
	// Tracked returns the number of (peer, group) entries held.
	Tracked() int
}

// Group is one version of a group as a Limiter and its Backend see it: the
// settings, the tick schedules and the identity. A Limiter builds a new one
// on every change (Apply, Restore) and never modifies a built one, so it is
// safe for concurrent reads.
type Group struct {
	// ID is the group's index in its Limiter, stable across Apply.
	ID      GroupID
	defined bool
	// backend is where the group's state lives (nil for local_peers).
	backend Backend
	// Version changes whenever the settings or schedules may have changed:
	// what is derived from them (a tick span) is valid for one Version.
	Version uint64
	Name    string
	GroupSettings
	// Leaky and Cleanup place the group's leaky and cleanup ticks.
	Leaky   Schedule
	Cleanup Schedule
	// Arweave is arweave.version: which node's cleanup (CleanupAge) and
	// reduce rules apply.
	Arweave ArweaveVersion
	// inflight counts the requests in flight per worker shard when the
	// scope is "shard" (nil otherwise); it is kept across versions while
	// the scope and number_of_workers stay (see Limiter.build).
	inflight *shardCounters
	// adaptive is the group's adaptive concurrency (nil when off), kept
	// across versions while it stays on (see groupAdaptive).
	adaptive *adaptiveGroup
	// params are GroupSettings.Params(); stateVer changes when the
	// algorithm or the limits its state is measured in change (see
	// local.sync).
	params   algo.Params
	limits   algo.Limits
	stateVer uint64
}

// Params returns the group's limits, burst resolved (the algorithms but
// the hybrid).
func (g *Group) Params() algo.Params { return g.params }

// Limits returns what the group's algorithm decides with
// (GroupSettings.Limits), made once with the group: it must not be
// modified.
func (g *Group) Limits() *algo.Limits { return &g.limits }

// CleanupAge returns how far before a cleanup tick a window timestamp
// must lie for the tick to drop it: more than
// sliding_window_timestamp_cleanup_expiry ms (2.9.6); with arweave.version
// 2.9.7, which has no expiry, at least sliding_window_duration ms (the
// node drops ts when ts + duration ≤ the tick), that is more than
// duration − 1.
func (g *Group) CleanupAge() int64 {
	if g.Arweave == Arweave297 {
		return g.SlidingWindowDuration - 1
	}
	return g.CleanupExpiry
}

// Closed reports whether the group admits nothing: a hybrid group without
// window and without bucket (both limits 0).
func (g *Group) Closed() bool {
	return g.Algorithm == algo.Hybrid && g.SlidingWindowLimit == 0 && g.LeakyLimit == 0
}

// StateVersion changes when the algorithm of the group, or (for the
// algorithms whose state is measured in units of the limits, and the
// sliding log) its limits, change: state kept for an older StateVersion
// must be dropped (another algorithm) or converted (algo.Rescale) before
// it is read.
func (g *Group) StateVersion() uint64 { return g.stateVer }

// GroupTable is one version of every group of a Limiter, indexed by
// GroupID: what a Backend that visits all its entries needs. It is
// immutable and safe for concurrent reads.
type GroupTable struct {
	groups [MaxGroups]Group
	// names holds every name a GroupID was ever given, removed groups
	// included, so that their entries' deletion can be reported.
	names [MaxGroups]string
	// maxTracked is peers.max_tracked.
	maxTracked int
}

// MaxTracked returns peers.max_tracked: the most (peer, group) entries a
// Backend that keeps entries should hold, 0 for no cap. At the cap a new
// entry evicts one idle long (an entry with requests in flight is never
// evicted, so a table may go over it by those).
func (gt *GroupTable) MaxTracked() int { return gt.maxTracked }

// Lookup returns group id when it is defined (local_peers included, which
// never reaches a Backend).
func (gt *GroupTable) Lookup(id GroupID) (*Group, bool) {
	if gt == nil || int(id) >= MaxGroups || !gt.groups[id].defined {
		return nil, false
	}
	return &gt.groups[id], true
}

// Name returns the name group id had when it was last defined, "" when it
// never was.
func (gt *GroupTable) Name(id GroupID) string {
	if int(id) >= MaxGroups {
		return ""
	}
	return gt.names[id]
}
