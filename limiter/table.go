package limiter

import (
	"hash/maphash"
	"sync"
)

// entryKey is a (group, peer) pair: the group ID in the first byte, then
// the PeerKey.
type entryKey [18]byte

func makeEntryKey(g GroupID, k PeerKey) entryKey {
	var ek entryKey
	ek[0] = byte(g)
	copy(ek[1:], k[:])
	return ek
}

func (k *entryKey) group() GroupID { return GroupID(k[0]) }
func (k *entryKey) peer() PeerKey  { return PeerKey(k[1:]) }

// Entry flags.
const (
	flagTokens    uint8 = 1 << iota // in the leaky-token register (tokens may be 0)
	flagDirty                       // changed since the last incremental snapshot
	flagPersisted                   // written by a snapshot: its deletion must be reported
)

// entry is the state of one (peer, group). Its size is what a tracked peer
// costs; keep it at 72 bytes (checked by a test).
type entry struct {
	key      entryKey
	flags    uint8
	_        uint8
	tokens   int32  // tokens consumed, counted upward
	inflight int32  // requests admitted and not yet released
	gen      uint32 // bumped whenever the slot is freed
	prev     uint32 // LRU list, slot+1, 0 = none (toward the head, most recent)
	next     uint32 // LRU list toward the tail; free-list link when free
	tick     uint32 // low 32 bits of the index of the last leaky tick applied
	lastSeen uint32 // Unix seconds of the last decision
	requests uint32 // decisions for this entry (saturating)
	rejConc  uint32 // rejections by concurrency (saturating)
	rejRate  uint32 // rejections by rate limit (saturating)
	win      *window
}

const (
	pageBits = 10
	pageSize = 1 << pageBits
	minIndex = 64
)

// shard is one lock's worth of the (peer, group) table: an open-addressing
// index (linear probing; each slot holds a 32-bit hash tag and slot+1) over
// a paged slab of entries, a free list, an LRU list ordered by lastSeen,
// and the per-group counters of the entries it holds.
type shard struct {
	mu    sync.Mutex
	idx   []uint64
	mask  uint32
	pages [][]entry
	used  uint32 // slots handed out so far (high-water mark)
	free  uint32 // free list head, slot+1
	n     int    // live entries
	epoch uint32 // bumped when Restore replaces the tables
	head  uint32 // most recently seen, slot+1
	tail  uint32 // least recently seen, slot+1
	stats [MaxGroups]GroupStats

	// deleted holds the keys of persisted entries removed since the last
	// SnapshotDelta.
	deleted []entryKey

	leakyCache   [MaxGroups]tickSpan
	cleanupCache [MaxGroups]tickSpan
	_            [64]byte // keep the next shard's lock off this cache line
}

func (s *shard) at(slot uint32) *entry { return &s.pages[slot>>pageBits][slot&(pageSize-1)] }

// find returns the slot of k, or ok=false and the index position where k
// would be inserted.
func (s *shard) find(k *entryKey, tag uint32) (slot uint32, pos uint32, ok bool) {
	if s.idx == nil {
		return 0, 0, false
	}
	pos = tag & s.mask
	for {
		v := s.idx[pos]
		if v == 0 {
			return 0, pos, false
		}
		if uint32(v>>32) == tag {
			slot = uint32(v) - 1
			if s.at(slot).key == *k {
				return slot, pos, true
			}
		}
		pos = (pos + 1) & s.mask
	}
}

// insert adds k (absent) and returns its slot, the entry zeroed but for
// key and gen.
func (s *shard) insert(k *entryKey, tag uint32) uint32 {
	if s.idx == nil || (s.n+1)*4 > len(s.idx)*3 {
		s.grow()
	}
	var slot uint32
	if s.free != 0 {
		slot = s.free - 1
		s.free = s.at(slot).next
	} else {
		if s.used&(pageSize-1) == 0 && int(s.used>>pageBits) == len(s.pages) {
			s.pages = append(s.pages, make([]entry, pageSize))
		}
		slot = s.used
		s.used++
	}
	e := s.at(slot)
	gen := e.gen
	*e = entry{key: *k, gen: gen}
	pos := tag & s.mask
	for s.idx[pos] != 0 {
		pos = (pos + 1) & s.mask
	}
	s.idx[pos] = uint64(tag)<<32 | uint64(slot+1)
	s.n++
	return slot
}

func (s *shard) grow() {
	size := len(s.idx) * 2
	if size < minIndex {
		size = minIndex
	}
	old := s.idx
	s.idx = make([]uint64, size)
	s.mask = uint32(size - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		pos := uint32(v>>32) & s.mask
		for s.idx[pos] != 0 {
			pos = (pos + 1) & s.mask
		}
		s.idx[pos] = v
	}
}

// remove deletes the entry at slot (found at index position pos): backward
// shift deletion keeps every probe chain intact without tombstones.
func (s *shard) remove(slot, pos uint32) {
	i := pos
	j := i
	for {
		j = (j + 1) & s.mask
		v := s.idx[j]
		if v == 0 {
			break
		}
		home := uint32(v>>32) & s.mask
		// The entry at j may move to i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			s.idx[i] = v
			i = j
		}
	}
	s.idx[i] = 0
	s.unlink(slot)
	e := s.at(slot)
	if e.flags&flagPersisted != 0 {
		s.deleted = append(s.deleted, e.key)
	}
	gen := e.gen + 1
	*e = entry{gen: gen, next: s.free}
	s.free = slot + 1
	s.n--
}

// posOf finds the index position of slot (whose key hashes to tag).
func (s *shard) posOf(slot uint32, tag uint32) uint32 {
	pos := tag & s.mask
	for uint32(s.idx[pos]) != slot+1 {
		pos = (pos + 1) & s.mask
	}
	return pos
}

// pushFront makes slot the most recently seen.
func (s *shard) pushFront(slot uint32) {
	e := s.at(slot)
	e.prev = 0
	e.next = s.head
	if s.head != 0 {
		s.at(s.head - 1).prev = slot + 1
	}
	s.head = slot + 1
	if s.tail == 0 {
		s.tail = slot + 1
	}
}

func (s *shard) unlink(slot uint32) {
	e := s.at(slot)
	if e.prev != 0 {
		s.at(e.prev - 1).next = e.next
	} else if s.head == slot+1 {
		s.head = e.next
	}
	if e.next != 0 {
		s.at(e.next - 1).prev = e.prev
	} else if s.tail == slot+1 {
		s.tail = e.prev
	}
	e.prev, e.next = 0, 0
}

// touch records that slot was seen at sec, moving it to the LRU head when
// its second changed (at most once per second per entry).
func (s *shard) touch(slot uint32, sec uint32) {
	e := s.at(slot)
	if sec <= e.lastSeen {
		// Seen this second already, or a decision taken a moment earlier
		// on another goroutine: the order does not change.
		return
	}
	e.lastSeen = sec
	if s.head != slot+1 {
		s.unlink(slot)
		s.pushFront(slot)
	}
}

// hasher hashes entry keys with a per-process random seed, so that no
// client can choose addresses that collide in the index.
type hasher struct{ seed maphash.Seed }

func (h *hasher) sum(k *entryKey) uint64 { return maphash.Bytes(h.seed, k[:]) }
