package limiter

// The requests in flight of a group's worker shards: Arweave 2.9.7
// compares concurrency_limit with the in-flight count of the peer's shard,
// over all its peers (docs/arweave297.md). One padded atomic counter per shard,
// taken and given back without a lock.

import "sync/atomic"

// shardCounters are the in-flight counts of one group's worker shards. They
// are safe for concurrent use. A slot is taken by Acquire and given back
// through the counter Acquire returned, so a slot taken under one
// shardCounters is given back to it whatever replaced it since.
type shardCounters struct{ c []counter }

// counter is one shard's count, alone on its cache line: decisions on
// different shards do not contend.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

// newShardCounters returns the counters of workers shards (clamped to 1 …
// MaxWorkers), all at 0.
func newShardCounters(workers int) *shardCounters {
	return &shardCounters{c: make([]counter, min(max(workers, 1), MaxWorkers))}
}

// Len returns the number of shards.
func (c *shardCounters) Len() int { return len(c.c) }

// Shard returns the shard of a peer whose key's shard byte is b: b mod
// the number of shards (Arweave: the last octet of the IPv4 address rem
// number_of_workers).
func (c *shardCounters) Shard(b byte) int { return int(b) % len(c.c) }

// Acquire takes one in-flight slot in shard i when fewer than limit are
// held there, and returns the counter to decrement once (Add(-1)) when
// the request ends; nil when the shard is full. It adds first and rolls
// back when over the limit, so two requests racing for the last slot
// never both get it (one of them may be refused while the other's slot
// is being rolled back: never an admission over the limit).
func (c *shardCounters) Acquire(i int, limit int64) *atomic.Int64 {
	n := &c.c[i].n
	if n.Add(1) > limit {
		n.Add(-1)
		return nil
	}
	return n
}

// InFlight returns the slots held in shard i.
func (c *shardCounters) InFlight(i int) int64 { return c.c[i].n.Load() }
