package limiter

import (
	"math"
	"slices"
)

// Eviction at max_tracked picks the (peer, group) entry idle longest, to
// the second, among those with nothing in flight. It keeps no LRU list
// (whose upkeep cost every decision two more cache misses at a million
// entries): each shard keeps the victimBatch entries it found idle longest
// the last time it surveyed its slab, and evictions take from those. An
// entry's lastSeen only grows, so a candidate that was not touched since
// the survey is still older than every entry outside the batch; one that
// was touched is dropped when met.

// victim is an eviction candidate: its slot, the generation of the slot,
// and its lastSeen at the survey.
type victim struct{ slot, gen, seen uint32 }

// victimBatch is how many candidates one survey of a shard keeps.
const victimBatch = 512

// candEmpty marks a shard without candidates: the next eviction surveys it.
const candEmpty = math.MaxUint32

// valid reports whether v still names an untouched entry that may go.
func (sh *shard) valid(v victim) bool {
	if v.slot >= sh.used {
		return false
	}
	e := sh.at(v.slot)
	return e.gen == v.gen && e.key.live() && e.lastSeen == v.seen && e.inflight == 0
}

// survey refills the shard's candidates with the victimBatch entries idle
// longest, tickBatch slots per lock hold so that no decision waits long.
func (sh *shard) survey() {
	sh.mu.Lock()
	epoch := sh.epoch
	// Reuse the spent list's memory (a concurrent survey of the same
	// shard finds nil and allocates its own).
	heap := sh.victims[:0] // a max-heap on seen
	sh.victims = nil
	sh.mu.Unlock()
	if cap(heap) < victimBatch {
		heap = make([]victim, 0, victimBatch)
	}
	for start := uint32(0); ; start += tickBatch {
		sh.mu.Lock()
		if start >= sh.used || sh.epoch != epoch {
			sh.mu.Unlock()
			break
		}
		for slot, end := start, min(start+tickBatch, sh.used); slot < end; slot++ {
			e := sh.at(slot)
			if !e.key.live() || e.inflight != 0 {
				continue
			}
			v := victim{slot, e.gen, e.lastSeen}
			switch {
			case len(heap) < victimBatch:
				heap = append(heap, v)
				siftUp(heap, len(heap)-1)
			case v.seen < heap[0].seen:
				heap[0] = v
				siftDown(heap, 0)
			}
		}
		sh.mu.Unlock()
	}
	// Oldest last: evictions pop from the end.
	slices.SortFunc(heap, func(a, b victim) int { return int(int64(b.seen) - int64(a.seen)) })
	sh.mu.Lock()
	if sh.epoch == epoch {
		sh.victims = heap
		sh.setCand()
	}
	sh.mu.Unlock()
}

// setCand drops the candidates that no longer qualify from the end of the
// list and publishes the lastSeen of the next one. sh.mu must be held.
func (sh *shard) setCand() {
	for len(sh.victims) > 0 && !sh.valid(sh.victims[len(sh.victims)-1]) {
		sh.victims = sh.victims[:len(sh.victims)-1]
	}
	if len(sh.victims) == 0 {
		sh.cand.Store(candEmpty)
		return
	}
	sh.cand.Store(sh.victims[len(sh.victims)-1].seen)
}

func siftUp(h []victim, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].seen >= h[i].seen {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDown(h []victim, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].seen > h[c].seen {
			c++
		}
		if h[i].seen >= h[c].seen {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// evictOne deletes the (peer, group) entry idle longest among those with
// nothing in flight, when the table is full. It reads every shard's next
// candidate without a lock and locks the one shard it evicts from (and,
// now and then, each shard in turn for a survey).
func (b *local) evictOne() {
	// Each look that finds its shard's candidate seen again since the
	// survey corrects that shard's published candidate, so a few looks per
	// shard settle on the true oldest; past that, take what is found.
	const looks = 2 * nShards
	for attempt := 0; attempt < looks; attempt++ {
		best, bestSeen, next := -1, uint32(candEmpty), uint32(candEmpty)
		for i := range b.cands {
			c := b.cands[i].Load()
			if c == candEmpty {
				b.shards[i].survey()
				c = b.cands[i].Load()
			}
			switch {
			case c < bestSeen:
				best, bestSeen, next = i, c, bestSeen
			case c < next:
				next = c
			}
		}
		if best < 0 {
			return // nothing may go: everything is in flight
		}
		sh := &b.shards[best]
		sh.mu.Lock()
		sh.setCand()
		if len(sh.victims) == 0 || (sh.cand.Load() > next && attempt < looks-1) {
			// Its candidates were touched since: look again.
			sh.mu.Unlock()
			continue
		}
		v := sh.victims[len(sh.victims)-1]
		sh.victims = sh.victims[:len(sh.victims)-1]
		e := sh.at(v.slot)
		g := e.key.group()
		sh.account(e, -1)
		sh.stats[g].Evictions++
		sh.remove(v.slot, sh.posOf(v.slot, uint32(b.hash.sum(&e.key))))
		b.total.Add(-1)
		b.evictions.Add(1)
		sh.setCand()
		sh.mu.Unlock()
		return
	}
}
