package memory

import (
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// AddStats adds every shard's counters and gauges to sum.
func (b *Backend) AddStats(sum *[limiter.MaxGroups]limiter.GroupStats) {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for g := range sum {
			sum[g].Add(&sh.stats[g])
		}
		sh.mu.Unlock()
	}
}

// Tracked returns the number of live entries.
func (b *Backend) Tracked() int { return int(b.total.Load()) }

func (sh *shard) view(e *entry, g *limiter.Group, ms int64) limiter.EntryView {
	v := limiter.EntryView{
		Peer:                e.key.peer(),
		Group:               g.Name,
		GroupID:             g.ID,
		Inflight:            int64(e.inflight),
		Requests:            uint64(e.requests),
		RejectedConcurrency: uint64(e.rejConc),
		RejectedRateLimit:   uint64(e.rejRate),
		LastSeen:            time.Unix(int64(e.lastSeen), 0),
	}
	if v.Algorithm = g.Algorithm; v.Algorithm != algo.Hybrid {
		v.Algo = sh.viewAlgo(e, g, ms)
		return v
	}
	if e.flags&flagTokens != 0 {
		v.Tokens = int64(e.tokens)
	}
	if w := sh.win(e); w != nil {
		v.Window = int64(w.N)
		v.WindowActive = int64(w.CountFrom(ms - g.SlidingWindowDuration + 1))
	}
	return v
}

// Each copies a batch of views under each lock hold and hands them to fn
// without it.
func (b *Backend) Each(ms int64, gt *limiter.GroupTable, fn func(limiter.EntryView) bool) {
	buf := make([]limiter.EntryView, 0, tickBatch)
	b.scan(func(sh *shard, slot uint32, e *entry) {
		if g, ok := gt.Lookup(e.key.group()); ok && b.current(sh, slot, g) {
			buf = append(buf, sh.view(e, g, ms))
		}
	}, func() bool {
		for _, v := range buf {
			if !fn(v) {
				return false
			}
		}
		buf = buf[:0]
		return true
	}, false)
}

// Entry finds (k, g), applies its due ticks, and deletes it instead when
// that left it empty.
func (b *Backend) Entry(ms int64, k limiter.Key, g *limiter.Group) (v limiter.EntryView, ok bool) {
	key := makeEntryKey(g.ID, k)
	sh, _, tag := b.shardOf(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, found := sh.find(&key, tag)
	if !found || !b.current(sh, slot, g) {
		return v, false
	}
	e := sh.at(slot)
	if sh.expire(e, g, ms) {
		sh.remove(slot, sh.posOf(slot, tag))
		b.total.Add(-1)
		return v, false
	}
	return sh.view(e, g, ms), true
}
