package limiter

import "github.com/limiterd/limiterd/limiter/peer"

// ShardCounters are the in-flight counts of a group's worker shards, for
// the external tests.
type ShardCounters = shardCounters

// NewShardCounters is newShardCounters, for the external tests.
var NewShardCounters = newShardCounters

// ShardCountersOf returns the shard in-flight counters of group g (nil
// unless its scope is "shard").
func ShardCountersOf(l *Limiter, g GroupID) *shardCounters {
	return l.set.Load().groups[g].inflight
}

// AdaptiveSlotOf returns the slot of the adaptive concurrency's table p
// counts in.
func AdaptiveSlotOf(p peer.Peer) uint32 { return slotOf(KeyOf(&p.Key)) }
