package memory

import (
	"github.com/limiterd/limiterd/limiter"
)

// tickBatch bounds how many entries a scan visits under one lock hold, so
// that a decision never waits long behind it.
const tickBatch = 256

// Sweep brings every entry up to ms (its ticks applied, what expired
// dropped: expire), interleaving the shards (see scan), and
// deletes the empty ones, those of groups gt no longer defines and those
// of another algorithm than their group's. The eviction candidates of
// every shard are dropped after it: their grades were made before time
// lapsed some restrictions, so the next eviction surveys afresh.
func (b *Backend) Sweep(ms int64, gt *limiter.GroupTable) {
	b.table.Store(gt)
	defer b.dropCandidates()
	b.scan(func(sh *shard, slot uint32, e *entry) {
		g := e.key.group()
		if gr, ok := gt.Lookup(g); ok {
			if !b.current(sh, slot, gr) {
				return // of another algorithm: dropped
			}
			if !sh.expire(e, gr, ms) {
				return
			}
		} else {
			sh.account(e, -1)
		}
		// Empty, or its group was removed from the config.
		sh.remove(slot, sh.posOf(slot, uint32(b.hash.sum(&e.key))))
		b.total.Add(-1)
	}, nil, true)
}

// dropCandidates empties every shard's eviction candidates (see evictOne).
func (b *Backend) dropCandidates() {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		sh.victims = sh.victims[:0]
		sh.cand.Store(candEmpty)
		sh.mu.Unlock()
	}
}

// scan calls visit with every live entry of every shard, tickBatch slots
// per lock hold, and after each hold calls flush (when not nil) without
// the lock; flush returning false ends the scan. visit may remove the
// entry it is given. It goes shard by shard, or with interleave round the
// shards, one batch of each in turn.
//
// Taking the same shard's lock again at once wins over a decision waiting
// for it (sync.Mutex lets a running goroutine barge in), so such a
// decision can wait for the whole shard's scan. The sweeper (Sweep), whose
// batches write every entry, interleaves: measured at a million entries,
// the worst decision wait fell from 300–660 µs to 107–174 µs and the p99
// from 140–330 µs to 4–15 µs. SnapshotDelta does not: interleaved, its
// decisions' p99 was about twice as high (3.3–3.9 µs against 1.6–1.9).
func (b *Backend) scan(visit func(sh *shard, slot uint32, e *entry), flush func() bool, interleave bool) {
	if !interleave {
		for i := range b.shards {
			if !scanShard(&b.shards[i], 0, ^uint32(0), visit, flush) {
				return
			}
		}
		return
	}
	for start := uint32(0); ; start += tickBatch {
		more := false
		for i := range b.shards {
			sh := &b.shards[i]
			sh.mu.Lock()
			used := sh.used
			sh.mu.Unlock()
			if start >= used {
				continue
			}
			more = true
			if !scanShard(sh, start, start+tickBatch, visit, flush) {
				return
			}
		}
		if !more {
			return
		}
	}
}

// scanShard visits the live entries of sh's slots [from, to), tickBatch
// per lock hold, calling flush after each hold; false when flush ended the
// scan.
func scanShard(sh *shard, from, to uint32, visit func(sh *shard, slot uint32, e *entry), flush func() bool) bool {
	for start := from; start < to; start += tickBatch {
		sh.mu.Lock()
		if start >= sh.used {
			sh.mu.Unlock()
			return true
		}
		for slot, end := start, min(start+tickBatch, to, sh.used); slot < end; slot++ {
			if e := sh.at(slot); e.key.live() {
				visit(sh, slot, e)
			}
		}
		sh.mu.Unlock()
		if flush != nil && !flush() {
			return false
		}
	}
	return true
}
