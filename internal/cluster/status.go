package cluster

import (
	"time"
)

// Status is the cluster backend's state, for people: the dashboard and
// the logs.
type Status struct {
	Mode      Mode
	OnFailure OnFailure
	Addrs     []string
	// MasterName is the Sentinel master's name (Addrs are then the
	// sentinels').
	MasterName string
	// Up is true while decisions use Redis.
	Up bool
	// Since is when Up last changed.
	Since time.Time
	// Reason says why Redis is not used, when it is not.
	Reason string
	// Down is the hash slots of a Redis Cluster whose master does not
	// answer while Up (decision 236): the peers whose keys they hold are
	// decided as OnFailure says.
	Down SlotsDown
}

// Status returns the backend's state now.
func (b *Backend) Status() Status {
	addrs := b.opts.Addrs
	if b.opts.MasterName != "" {
		addrs = b.opts.SentinelAddrs
	}
	st := Status{
		Mode: b.opts.Mode, OnFailure: b.opts.OnFailure, Addrs: addrs, MasterName: b.opts.MasterName,
		Up: b.h.up.Load(), Since: time.UnixMilli(b.h.since.Load()),
	}
	if !st.Up {
		st.Reason = *b.h.reason.Load()
	}
	st.Down = b.cut.state()
	return st
}

// Stats are the backend's counters, read at scrape time.
type Stats struct {
	// Up is limiterd_cluster_redis_up: decisions use Redis.
	Up bool
	// SlotsDown is limiterd_cluster_redis_slots_down: the hash slots of a
	// Redis Cluster decided as on_failure says while Up.
	SlotsDown int
	// Errors counts failed Redis calls by kind (see Kinds).
	Errors map[string]uint64
	// FailOpen, FailClosed and FailLocal count the decisions answered as
	// on_failure says, by what was answered.
	FailOpen, FailClosed, FailLocal uint64
	// RoundTrips counts the round trips to Redis (a pipeline is one), and
	// Commands the commands they carried.
	RoundTrips, Commands uint64
	// DroppedReleases counts the released slots left to their lease
	// because Redis could not be told in time.
	DroppedReleases uint64
	// Entries counts the operations sent (decisions, reductions,
	// releases; a batch script call of n entries counts n).
	Entries uint64
	// Repaired counts the (peer, group)s whose keys were found of the
	// wrong type or corrupt, and deleted.
	Repaired uint64
}

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats {
	s := Stats{
		Up: b.h.up.Load(), Errors: make(map[string]uint64, len(Kinds)),
		FailOpen: b.failOpen.Load(), FailClosed: b.failClose.Load(), FailLocal: b.failLocal.Load(),
		RoundTrips: b.t.roundTrips.Load(), Commands: b.t.commands.Load(),
	}
	for i, k := range Kinds {
		s.Errors[k] = b.h.errs[i].Load()
	}
	s.DroppedReleases = b.keeper.dropped.Load()
	s.Entries = b.t.entries.Load()
	s.Repaired = b.keeper.repaired.Load()
	if b.cut != nil {
		s.SlotsDown = int(b.cut.n.Load())
	}
	return s
}
