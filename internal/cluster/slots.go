package cluster

import (
	"sync"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
)

// Handles. A Handle of this package has handleMark in the low 32 bits of
// B above the slot-table shard; the local backend's handles hold a shard
// index below 64 there, so the two never meet (Backend.Release routes by
// it).
const (
	handleMark = 0xFFFF0000
	markMask   = 0xFFFF0000
	slotShards = 64
	shardMask  = slotShards - 1
)

func isOurs(h limiter.Handle) bool { return uint32(h.B)&markMask == handleMark }

// slot is one admitted request's in-flight slot: where it is counted in
// Redis (strict: this instance's count in the key's hash) or in this
// instance's view (local_first: an entry's own count).
type slot struct {
	gen   uint32
	used  bool
	group limiter.GroupID
	key   string   // strict: the hash holding the counts
	lf    *lfEntry // local_first
}

type slotShard struct {
	mu   sync.Mutex
	ents []slot
	free []uint32
	_    [48]byte
}

// slotTable holds this instance's open slots, so that Release can find
// them without allocating and the lease renewal can list them. It is safe
// for concurrent use.
type slotTable struct {
	next   atomic.Uint32
	shards [slotShards]slotShard
}

// put stores s and returns its Handle.
func (t *slotTable) put(s slot) limiter.Handle {
	si := t.next.Add(1) & shardMask
	sh := &t.shards[si]
	sh.mu.Lock()
	var i uint32
	if n := len(sh.free); n > 0 {
		i = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		sh.ents = append(sh.ents, slot{})
		i = uint32(len(sh.ents) - 1)
	}
	e := &sh.ents[i]
	s.gen = e.gen + 1
	s.used = true
	*e = s
	sh.mu.Unlock()
	return limiter.Handle{A: uint64(i) | uint64(s.gen)<<32, B: uint64(handleMark | si)}
}

// take removes the slot of h and returns it; ok is false when h is not an
// open slot (released already, or never ours).
func (t *slotTable) take(h limiter.Handle) (s slot, ok bool) {
	sh := &t.shards[uint32(h.B)&shardMask]
	i, gen := uint32(h.A), uint32(h.A>>32)
	sh.mu.Lock()
	if int(i) < len(sh.ents) && sh.ents[i].used && sh.ents[i].gen == gen {
		s = sh.ents[i]
		sh.ents[i] = slot{gen: gen}
		sh.free = append(sh.free, i)
		ok = true
	}
	sh.mu.Unlock()
	return s, ok
}

// each calls fn with every open slot, one shard locked at a time.
func (t *slotTable) each(fn func(s *slot)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.ents {
			if sh.ents[j].used {
				fn(&sh.ents[j])
			}
		}
		sh.mu.Unlock()
	}
}

// openByGroup adds the number of open slots of each group to out.
func (t *slotTable) openByGroup(out *[limiter.MaxGroups]int64) {
	t.each(func(s *slot) { out[s.group]++ })
}
