package memory

import (
	"cmp"
	"math"
	"slices"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// Eviction at max_tracked picks, among the (peer, group) entries with
// nothing in flight, the one of the lowest pressure (algo.Pressure: light,
// some, limited; graded from its state when the shard is surveyed), and
// among those the one idle longest, to the second: so that a
// flood of new peers, each light, cannot launder an exhausted peer's
// entry. An entry with requests in flight is never evicted (its slots
// would be freed by nobody's release): when every entry has some, the
// table goes over max_tracked by those.
//
// It keeps no LRU list (whose upkeep cost every decision two more cache
// misses at a million entries): each shard keeps the victimBatch entries
// of the lowest eviction keys (pressure, then lastSeen) it found the last
// time it surveyed its slab, and evictions take from those. A candidate
// whose key is unchanged since the survey is still below every entry that
// was outside the batch then, except entries inserted since (light, most
// often) and entries a sweep made lighter: so a shard whose next candidate
// carries state drops its candidates, to be surveyed again, once
// resurveyAfter entries were inserted since its survey (noteInsert). That
// bounds both how many light newcomers (fewer than resurveyAfter per
// shard) a candidate with state can be taken before, and what the
// surveys cost (a shard's size per resurveyAfter insertions, at worst).

// victim is an eviction candidate: its slot, the generation of the slot,
// its decisions and its eviction key at the survey. A decision since the
// survey (its requests moved) may have changed its pressure: it is no
// longer a candidate.
type victim struct {
	slot, gen, requests uint32
	key                 uint64
}

// evictKey orders eviction candidates: pressure p, then lastSeen.
func evictKey(p algo.Pressure, e *entry) uint64 { return uint64(p)<<32 | uint64(e.lastSeen) }

// resurveyAfter is how many insertions since its survey make a shard
// whose next candidate carries state (pressure above light) survey again.
const resurveyAfter = 64

// victimBatch is how many candidates one survey of a shard keeps.
const victimBatch = 512

// candEmpty marks a shard without candidates: the next eviction surveys it.
const candEmpty = math.MaxUint64

// valid reports whether v still names an untouched entry that may go.
func (sh *shard) valid(v victim) bool {
	if v.slot >= sh.used {
		return false
	}
	e := sh.at(v.slot)
	return e.gen == v.gen && e.key.live() && e.requests == v.requests && e.lastSeen == uint32(v.key) && e.inflight == 0
}

// survey refills the shard's candidates with the victimBatch entries of
// the lowest eviction keys, their pressure graded at ms under the groups
// of gt (an entry of a group gt does not define is light), tickBatch
// slots per lock hold so that no decision waits long.
func (sh *shard) survey(ms int64, gt *limiter.GroupTable) {
	sh.mu.Lock()
	epoch := sh.epoch
	sh.surveyed = sh.inserted
	// Reuse the spent list's memory (a concurrent survey of the same
	// shard finds nil and allocates its own).
	heap := sh.victims[:0] // a max-heap on key
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
			p := algo.Light
			if g, ok := gt.Lookup(e.key.group()); ok {
				p = sh.pressure(e, g, ms)
			}
			v := victim{slot, e.gen, e.requests, evictKey(p, e)}
			switch {
			case len(heap) < victimBatch:
				heap = append(heap, v)
				siftUp(heap, len(heap)-1)
			case v.key < heap[0].key:
				heap[0] = v
				siftDown(heap, 0)
			}
		}
		sh.mu.Unlock()
	}
	// Lowest last: evictions pop from the end.
	slices.SortFunc(heap, func(a, b victim) int { return cmp.Compare(b.key, a.key) })
	sh.mu.Lock()
	if sh.epoch == epoch {
		sh.victims = heap
		sh.setCand()
	}
	sh.mu.Unlock()
}

// noteInsert counts an insertion into sh; when resurveyAfter came since
// the survey and the next candidate carries state, the candidates are
// dropped so that the next eviction surveys the shard again. sh.mu is
// held.
func (sh *shard) noteInsert() {
	sh.inserted++
	if sh.inserted-sh.surveyed < resurveyAfter {
		return
	}
	if c := sh.cand.Load(); c != candEmpty && c>>32 != uint64(algo.Light) {
		sh.victims = sh.victims[:0]
		sh.cand.Store(candEmpty)
	}
}

// setCand drops the candidates that no longer qualify from the end of the
// list and publishes the key of the next one. sh.mu must be held.
func (sh *shard) setCand() {
	for len(sh.victims) > 0 && !sh.valid(sh.victims[len(sh.victims)-1]) {
		sh.victims = sh.victims[:len(sh.victims)-1]
	}
	if len(sh.victims) == 0 {
		sh.cand.Store(candEmpty)
		return
	}
	sh.cand.Store(sh.victims[len(sh.victims)-1].key)
}

func siftUp(h []victim, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key >= h[i].key {
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
		if c+1 < len(h) && h[c+1].key > h[c].key {
			c++
		}
		if h[i].key >= h[c].key {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// evictOne deletes the (peer, group) entry of the lowest eviction key
// (pressure, then idle longest) among those with nothing in flight, when
// the table is full. It reads every shard's next
// candidate without a lock and locks the one shard it evicts from (and,
// now and then, each shard in turn for a survey).
func (b *Backend) evictOne(ms int64) {
	gt := b.table.Load()
	// Each look that finds its shard's candidate seen again since the
	// survey corrects that shard's published candidate, so a few looks per
	// shard settle on the true oldest; past that, take what is found.
	const looks = 2 * nShards
	for attempt := 0; attempt < looks; attempt++ {
		best, bestKey, next := -1, uint64(candEmpty), uint64(candEmpty)
		for i := range b.cands {
			c := b.cands[i].Load()
			if c == candEmpty {
				b.shards[i].survey(ms, gt)
				c = b.cands[i].Load()
			}
			switch {
			case c < bestKey:
				best, bestKey, next = i, c, bestKey
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
