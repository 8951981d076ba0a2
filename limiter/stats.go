package limiter

import (
	"time"

	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// GroupStats are the counters and gauges of one group: the numbers behind the
// metrics of docs/metrics.md. Counters only grow; gauges are current. A
// GroupStats is a plain value, not safe for concurrent use: its holder locks.
type GroupStats struct {
	// Counters.
	Requests            uint64 // ar_limiter_requests_total
	RejectedConcurrency uint64 // ar_limiter_rejected_total{reason="concurrency"}
	RejectedRateLimit   uint64 // ar_limiter_rejected_total{reason="rate_limit"}
	Denied              uint64 // requests of denied peers (403)
	WouldReject         uint64 // dry_run rejections let through
	AllowedSliding      uint64 // admitted by the sliding window
	AllowedLeaky        uint64 // admitted with a leaky-bucket token
	Unlimited           uint64 // admitted with no limiting applied
	Unavailable         uint64 // answered ReasonUnavailable by the backend
	ReduceRequests      uint64 // ar_limiter_reduce_requests_total
	TickReductionsPeer  uint64 // ar_limiter_leaky_tick_reductions_peer
	TickTokenReductions uint64 // ar_limiter_leaky_tick_token_reductions_total
	TickDeletePeer      uint64 // ar_limiter_leaky_tick_delete_peer_total
	CleanupDeletePeer   uint64 // ar_limiter_cleanup_tick_expired_sliding_peers_deleted_total
	Evictions           uint64 // entries evicted by max_tracked
	LeakyTicks          uint64 // ar_limiter_leaky_ticks
	AllowedAlgorithm    uint64 // admitted by an algorithm other than the hybrid
	StateDrops          uint64 // entries dropped because the group's algorithm changed
	// RejectedAdaptive counts the requests the adaptive limit shed
	// (ar_limiter_rejected_total{reason="adaptive"}); a dry_run group's
	// are in WouldReject.
	RejectedAdaptive uint64

	// Gauges: ar_limiter_peers and ar_limiter_tracked_items_total.
	PeersConcurrency int64
	PeersTokens      int64
	PeersWindow      int64
	ItemsConcurrency int64
	ItemsTokens      int64
	ItemsWindow      int64
	// Entries are the group's (peer, group) entries, LogItems the
	// timestamps its sliding logs hold (limiterd's gauges).
	Entries  int64
	LogItems int64
	// The adaptive concurrency's gauges (0 when it is off): the limit, the
	// requests in flight it counts, the last window's latency and the
	// unloaded one, µs. Add sums them as the other gauges.
	AdaptiveLimit      int64
	AdaptiveInflight   int64
	AdaptiveLatencyUS  int64
	AdaptiveUnloadedUS int64
}

// Add adds o's counters and gauges to s.
func (s *GroupStats) Add(o *GroupStats) {
	s.Requests += o.Requests
	s.RejectedConcurrency += o.RejectedConcurrency
	s.RejectedRateLimit += o.RejectedRateLimit
	s.Denied += o.Denied
	s.WouldReject += o.WouldReject
	s.AllowedSliding += o.AllowedSliding
	s.AllowedLeaky += o.AllowedLeaky
	s.Unlimited += o.Unlimited
	s.Unavailable += o.Unavailable
	s.ReduceRequests += o.ReduceRequests
	s.TickReductionsPeer += o.TickReductionsPeer
	s.TickTokenReductions += o.TickTokenReductions
	s.TickDeletePeer += o.TickDeletePeer
	s.CleanupDeletePeer += o.CleanupDeletePeer
	s.Evictions += o.Evictions
	s.AllowedAlgorithm += o.AllowedAlgorithm
	s.StateDrops += o.StateDrops
	s.RejectedAdaptive += o.RejectedAdaptive
	s.AdaptiveLimit += o.AdaptiveLimit
	s.AdaptiveInflight += o.AdaptiveInflight
	s.AdaptiveLatencyUS += o.AdaptiveLatencyUS
	s.AdaptiveUnloadedUS += o.AdaptiveUnloadedUS
	s.Entries += o.Entries
	s.LogItems += o.LogItems
	s.PeersConcurrency += o.PeersConcurrency
	s.PeersTokens += o.PeersTokens
	s.PeersWindow += o.PeersWindow
	s.ItemsConcurrency += o.ItemsConcurrency
	s.ItemsTokens += o.ItemsTokens
	s.ItemsWindow += o.ItemsWindow
}

// Stats returns the counters and gauges of every group ever defined (a
// removed group keeps its counters), keyed by group name: the policy's
// own, and the backend's when it is a StatsReporter. The local backend
// takes each shard lock briefly; call it at scrape time, not per request.
func (l *Limiter) Stats() map[string]GroupStats {
	var sum [MaxGroups]GroupStats
	// The policy's counters first: a dry_run rejection is counted by the
	// backend before the policy counts it let through, so the backend's
	// rejections read next are never fewer than those moved out of them.
	// The shard rejections (shardFull) are the policy's alone: the
	// let-through ones read first, so never more than all of them.
	// The adaptive sheds are the policy's alone too.
	var would, shard [MaxGroups][2]uint64
	st := l.set.Load()
	for g := range sum {
		p, s := &l.policy[g], &sum[g]
		s.Denied = p.denied.Load()
		s.Unlimited = p.unlimited.Load()
		s.Unavailable = p.unavailable.Load()
		s.ReduceRequests = p.reduce.Load()
		shard[g][1] = p.shardWould.Load()
		shard[g][0] = p.shardConc.Load()
		s.RejectedAdaptive = p.shed.Load()
		shedWould := p.shedWould.Load()
		s.Requests = s.Denied + s.Unlimited + s.Unavailable + shard[g][0] + s.RejectedAdaptive + shedWould
		s.RejectedConcurrency = shard[g][0] - shard[g][1]
		would[g] = [2]uint64{p.wouldConc.Load(), p.wouldRate.Load()}
		s.WouldReject = would[g][0] + would[g][1] + shard[g][1] + shedWould
		if a := st.groups[g].adaptive; a != nil {
			v := a.view()
			s.AdaptiveLimit, s.AdaptiveInflight = v.Limit, v.Inflight
			s.AdaptiveLatencyUS, s.AdaptiveUnloadedUS = v.Latency.Microseconds(), v.Unloaded.Microseconds()
		}
	}
	if sr, ok := l.backend.(StatsReporter); ok {
		sr.AddStats(&sum)
		for g := range sum {
			sum[g].RejectedConcurrency -= would[g][0]
			sum[g].RejectedRateLimit -= would[g][1]
		}
	}
	l.mu.Lock()
	names := l.names
	l.mu.Unlock()
	out := make(map[string]GroupStats)
	for g, name := range names {
		if name == "" {
			continue
		}
		sum[g].LeakyTicks = l.leakyTicks[g].Load()
		out[name] = sum[g]
	}
	return out
}

// Adaptive returns what group g's adaptive concurrency stands at
// (docs/limiting.md, "Adaptive concurrency"); ok is false when g is not
// defined or its adaptive_concurrency is off.
func (l *Limiter) Adaptive(g GroupID) (v AdaptiveView, ok bool) {
	if int(g) >= MaxGroups {
		return v, false
	}
	a := l.set.Load().groups[g].adaptive
	if a == nil {
		return v, false
	}
	return a.view(), true
}

// Tracked returns the number of (peer, group) entries tracked, 0 when the
// backend does not say.
func (l *Limiter) Tracked() int {
	if sr, ok := l.backend.(StatsReporter); ok {
		return sr.Tracked()
	}
	return 0
}

// EntryView is the state of one (peer, group), for the admin API and the
// dashboard.
type EntryView struct {
	Peer     peer.Key
	Group    string
	GroupID  GroupID
	Inflight int64
	// Tokens are the leaky-bucket tokens consumed.
	Tokens int64
	// Window is the number of window timestamps held (expired ones
	// included until a cleanup tick); WindowActive those still in the
	// window at the time of the view.
	Window              int64
	WindowActive        int64
	Requests            uint64
	RejectedConcurrency uint64
	RejectedRateLimit   uint64
	LastSeen            time.Time
	// Algorithm is the group's; for all but the hybrid, Algo is the state
	// in its terms (Tokens and Window are then 0).
	Algorithm algo.Kind
	Algo      algo.View
}

// Peer returns the state of peer k in every group it is tracked in, with
// the ticks due at now applied.
func (l *Limiter) Peer(now time.Time, k peer.Key) []EntryView {
	st := l.set.Load()
	var out []EntryView
	for g := range st.groups {
		if v, ok := l.Entry(now, k, GroupID(g)); ok {
			out = append(out, v)
		}
	}
	return out
}

// Each calls fn with every tracked entry as of now (ticks due but not yet
// applied are not reflected; Tick applies them) until fn returns false,
// when the backend is a Viewer. The local backend holds one shard lock at
// a time, a few hundred entries at a time; fn must not call back into l.
func (l *Limiter) Each(now time.Time, fn func(EntryView) bool) {
	if vw, ok := l.backend.(Viewer); ok {
		vw.Each(now.UnixMilli(), &l.set.Load().GroupTable, fn)
	}
}

// NextTicks returns the times of group g's next leaky and cleanup ticks
// after now (zero times for an unknown group or local_peers).
func (l *Limiter) NextTicks(g GroupID, now time.Time) (leaky, cleanup time.Time) {
	if int(g) >= MaxGroups || g == LocalPeers {
		return
	}
	gr := &l.set.Load().groups[g]
	if !gr.defined {
		return
	}
	ms := now.UnixMilli()
	return time.UnixMilli(gr.Leaky.NextAfter(ms)), time.UnixMilli(gr.Cleanup.NextAfter(ms))
}

// Entry returns the state of peer k in group g, with the ticks due at now
// applied; ok is false when it is not tracked (or the backend is not a
// Viewer).
func (l *Limiter) Entry(now time.Time, k peer.Key, g GroupID) (v EntryView, ok bool) {
	st := l.set.Load()
	if int(g) >= MaxGroups || g == LocalPeers || !st.groups[g].defined {
		return v, false
	}
	gr := &st.groups[g]
	vw, ok := gr.backend.(Viewer)
	if !ok {
		return v, false
	}
	return vw.Entry(now.UnixMilli(), KeyOf(&k), gr)
}
