package memory

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// entryKey is a (peer, group) pair: the peer.Key, then the group ID in the
// last byte. A free slot's key is all zeros (no peer.Key starts with 0).
type entryKey [18]byte

// makeEntryKey returns the key of (k, g).
func makeEntryKey(g limiter.GroupID, k limiter.Key) entryKey {
	var ek entryKey
	ek.set(g, k)
	return ek
}

// set makes ek the key of (k, g), in the three words that eq and the
// hasher read back (decision 188).
func (ek *entryKey) set(g limiter.GroupID, k limiter.Key) {
	le := binary.LittleEndian
	le.PutUint64(ek[0:8], k.Lo)
	le.PutUint64(ek[8:16], k.Hi)
	le.PutUint16(ek[16:18], uint16(k.Last)|uint16(g)<<8)
}

func (k *entryKey) group() limiter.GroupID { return limiter.GroupID(k[17]) }

// live reports whether the slot holding k is in use.
func (k *entryKey) live() bool { return k[0] != 0 }

// eq compares two keys with three loads each (an [18]byte == calls memequal).
func (k *entryKey) eq(o *entryKey) bool {
	le := binary.LittleEndian
	return le.Uint64(k[0:8]) == le.Uint64(o[0:8]) &&
		le.Uint64(k[8:16]) == le.Uint64(o[8:16]) &&
		le.Uint16(k[16:18]) == le.Uint16(o[16:18])
}
func (k *entryKey) peer() peer.Key { return peer.Key(k[:17]) }

// Entry flags.
const (
	flagTokens    uint8 = 1 << iota // in the leaky-token register (tokens may be 0)
	flagDirty                       // changed since the last incremental snapshot
	flagPersisted                   // written by a snapshot: its deletion must be reported
	flagState                       // holds an algo.State in its words (the kinds without a log)
	flagGate                        // a sliding log's gate is set (logGate)
)

// entry is the state of one (peer, group). Its size is what a tracked peer
// costs, and one entry is one cache line: keep it at 64 bytes (checked by a
// test; pages are allocated on their own, so entries stay line-aligned).
//
// Four fields are a union, read as algo holds the entry: the hybrid's
// tokens, tick and window index (wi), the sliding log's window index, or
// the two words of the other algorithms' algo.State: A in tokens and tick,
// B in wi and aux (words, setWords). Code that reads them checks algo
// first.
type entry struct {
	key      entryKey
	flags    uint8
	algo     algo.Kind // the algorithm of the state held
	tokens   int32     // tokens consumed, counted upward
	inflight int32     // requests admitted and not yet released
	gen      uint32    // bumped whenever the slot is freed
	next     uint32    // free-list link (slot+1) while the slot is free
	tick     uint32    // low 32 bits of the index of the last leaky tick applied
	lastSeen uint32    // Unix seconds of the last decision
	requests uint32    // decisions for this entry (saturating)
	rejConc  uint32    // rejections by concurrency (saturating)
	rejRate  uint32    // rejections by rate limit (saturating)
	// wi is the entry's sliding window, index+1 in its shard's wins (0:
	// none). An index, not a pointer: entries then hold no pointer, so the
	// garbage collector never scans the slab (64 MB at a million entries).
	wi  uint32
	aux uint32 // the high half of an algo.State's B
}

// words returns the algo.State of an entry that holds one (flagState).
func (e *entry) words() algo.State {
	return algo.State{
		A: int64(uint64(uint32(e.tokens)) | uint64(e.tick)<<32),
		B: int64(uint64(e.wi) | uint64(e.aux)<<32),
	}
}

func (e *entry) setWords(s algo.State) {
	e.tokens, e.tick = int32(uint32(s.A)), uint32(uint64(s.A)>>32)
	e.wi, e.aux = uint32(s.B), uint32(uint64(s.B)>>32)
}

const (
	pageBits = 10
	pageSize = 1 << pageBits
	minIndex = 64
)

// shard is one lock's worth of the (peer, group) table: an open-addressing
// index (linear probing; each slot holds a 32-bit hash tag and slot+1) over
// a paged slab of entries, a free list, the eviction candidates, and the
// per-group counters of the entries it holds.
type shard struct {
	mu    sync.Mutex
	idx   []uint64
	mask  uint32
	pages [][]entry
	used  uint32 // slots handed out so far (high-water mark)
	free  uint32 // free list head, slot+1
	n     int    // live entries
	epoch uint32 // bumped when Restore replaces the tables
	stats [limiter.MaxGroups]limiter.GroupStats

	// wins holds the entries' sliding windows (see entry.wi), by value (a
	// pointer less to follow per decision); winFree the free indexes in it.
	wins    []window
	winFree []uint32

	// victims are the entries of the lowest eviction keys when the shard
	// was last surveyed (see evictOne), the lowest last; *cand is the key
	// of the last one, or candEmpty when there is none. cand points into
	// the local backend's array of them, which evictOne reads in eight
	// cache lines. Only a full table uses them.
	victims []victim
	cand    *atomic.Uint64
	// inserted counts insertions (wrapping); surveyed is its value at the
	// last survey (see resurveyAfter).
	inserted, surveyed uint32

	// deleted holds the keys of persisted entries removed since the last
	// SnapshotDelta.
	deleted []entryKey

	leakyCache   [limiter.MaxGroups]limiter.TickSpan
	cleanupCache [limiter.MaxGroups]limiter.TickSpan
	// synced is, per group, the Group.stateVer the shard's entries are
	// kept for, with the limits they are measured in (see sync).
	synced [limiter.MaxGroups]shardSync
	_      [64]byte // keep the next shard's lock off this cache line
}

type shardSync struct {
	ver uint64
	p   algo.Params
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
			if s.at(slot).key.eq(k) {
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
	s.stats[k.group()].Entries++
	s.noteInsert()
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
	e := s.at(slot)
	s.dropWin(e)
	s.stats[e.key.group()].Entries--
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

// touch records that slot was seen at sec. lastSeen never goes back: a
// decision taken a moment earlier on another goroutine changes nothing.
func (s *shard) touch(slot uint32, sec uint32) {
	if e := s.at(slot); sec > e.lastSeen {
		e.lastSeen = sec
	}
}

// hasher hashes entry keys with per-process random secrets, so that no
// client can choose addresses that collide in the index: the folded
// 128-bit products of the key's words with the secrets (the construction
// of wyhash, which the Go runtime also uses where AES is missing). It reads
// the key as three words instead of hashing 18 bytes.
type hasher struct{ s [4]uint64 }

func newHasher() hasher {
	var h hasher
	for i := range h.s {
		// Odd, so that no secret is zero.
		h.s[i] = rand.Uint64() | 1
	}
	return h
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (h *hasher) sum(k *entryKey) uint64 {
	le := binary.LittleEndian
	a := le.Uint64(k[0:8]) ^ h.s[0]
	b := le.Uint64(k[8:16]) ^ h.s[1]
	c := uint64(le.Uint16(k[16:18])) ^ h.s[2]
	return mix(mix(a, b)^c, h.s[3])
}

// win returns e's sliding window (the hybrid's, the sliding log's), nil
// when it has none. The pointer is valid until the next setWin.
func (s *shard) win(e *entry) *window {
	if e.wi == 0 || !e.algo.Logged() {
		return nil
	}
	return &s.wins[e.wi-1]
}

// setWin gives e (which has none) the window w and returns where it is
// kept (valid until the next setWin).
func (s *shard) setWin(e *entry, w window) *window {
	if n := len(s.winFree); n > 0 {
		i := s.winFree[n-1]
		s.winFree = s.winFree[:n-1]
		s.wins[i] = w
		e.wi = i + 1
		return &s.wins[i]
	}
	s.wins = append(s.wins, w)
	e.wi = uint32(len(s.wins))
	return &s.wins[e.wi-1]
}

// dropWin takes e's window away, if it has one.
func (s *shard) dropWin(e *entry) {
	if e.wi == 0 || !e.algo.Logged() {
		return
	}
	s.wins[e.wi-1] = window{}
	s.winFree = append(s.winFree, e.wi-1)
	e.wi = 0
}
