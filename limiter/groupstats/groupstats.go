// Package groupstats holds the counters and gauges of one limiter group
// (SPEC §9), as the limiter's backends keep them and sum them. It imports
// the standard library only. A Stats is a plain value, not safe for
// concurrent use: its holder locks.
package groupstats

// Stats are the counters and gauges of one group: the numbers behind
// the metrics of SPEC §9. Counters only grow; gauges are current.
type Stats struct {
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
}

// Add adds o's counters and gauges to s.
func (s *Stats) Add(o *Stats) {
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
	s.Entries += o.Entries
	s.LogItems += o.LogItems
	s.PeersConcurrency += o.PeersConcurrency
	s.PeersTokens += o.PeersTokens
	s.PeersWindow += o.PeersWindow
	s.ItemsConcurrency += o.ItemsConcurrency
	s.ItemsTokens += o.ItemsTokens
	s.ItemsWindow += o.ItemsWindow
}
