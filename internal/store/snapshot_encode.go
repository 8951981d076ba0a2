package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// kv is one encoded key and value.
type kv struct{ k, v []byte }

// entryOrder is an entry's place in key order: its group's rank among the
// group names, then its peer key as big-endian integers (hi, lo, then the
// last byte, packed under the rank in gl); i is its index in the caller's
// list (delMark: a deletion, where the caller keeps none).
type entryOrder struct {
	hi, lo uint64
	gl     uint32 // group rank << 8 | peer[16]
	i      uint32
}

// delMark is the index of a deletion in a list of entries.
const delMark = math.MaxUint32

func orderOf(rank uint32, p *peer.Key, i uint32) entryOrder {
	return entryOrder{
		hi: binary.BigEndian.Uint64(p[0:8]),
		lo: binary.BigEndian.Uint64(p[8:16]),
		gl: rank<<8 | uint32(p[16]),
		i:  i,
	}
}

func (o *entryOrder) rank() uint32 { return o.gl >> 8 }

func (o *entryOrder) peer() peer.Key {
	var p peer.Key
	binary.BigEndian.PutUint64(p[0:8], o.hi)
	binary.BigEndian.PutUint64(p[8:16], o.lo)
	p[16] = byte(o.gl)
	return p
}

func (o *entryOrder) sameKey(p *entryOrder) bool {
	return o.hi == p.hi && o.lo == p.lo && o.gl == p.gl
}

func (o *entryOrder) less(p *entryOrder) bool {
	switch {
	case o.gl>>8 != p.gl>>8:
		return o.gl>>8 < p.gl>>8
	case o.hi != p.hi:
		return o.hi < p.hi
	case o.lo != p.lo:
		return o.lo < p.lo
	}
	return byte(o.gl) < byte(p.gl)
}

// maxGroups bounds the group names of one delta (their rank takes 24 bits).
const maxGroups = 1 << 24

// radixDigit is one byte of the sort key: a word of entryOrder (0 hi, 1 lo,
// 2 gl) and a shift.
type radixDigit struct{ word, shift uint8 }

// radixSort sorts order by key, stably (of two changes of one key, the
// later stays later and wins), least significant byte first, skipping the
// bytes that are the same in every entry (most of them: IPv4 keys differ
// in 4 bytes, /64 IPv6 keys in 8, and a delta holds few groups). vary holds
// the bits that differ somewhere, per word.
func radixSort(order []entryOrder, vary [3]uint64) {
	var digits []radixDigit
	add := func(word uint8, shift uint8) {
		if byte(vary[word]>>shift) != 0 {
			digits = append(digits, radixDigit{word, shift})
		}
	}
	add(2, 0) // the peer key's last byte
	for sh := uint8(0); sh < 64; sh += 8 {
		add(1, sh)
	}
	for sh := uint8(0); sh < 64; sh += 8 {
		add(0, sh)
	}
	for sh := uint8(8); sh < 32; sh += 8 {
		add(2, sh) // the group rank
	}
	if len(digits) == 0 {
		return
	}
	counts := make([][256]int, len(digits))
	for i := range order {
		o := &order[i]
		w := [3]uint64{o.hi, o.lo, uint64(o.gl)}
		for d, dg := range digits {
			counts[d][byte(w[dg.word]>>dg.shift)]++
		}
	}
	tmp := make([]entryOrder, len(order))
	src, dst := order, tmp
	for d, dg := range digits {
		var offs [256]int
		sum := 0
		for b, n := range counts[d] {
			offs[b] = sum
			sum += n
		}
		sh := dg.shift
		switch dg.word {
		case 0:
			for i := range src {
				b := byte(src[i].hi >> sh)
				dst[offs[b]] = src[i]
				offs[b]++
			}
		case 1:
			for i := range src {
				b := byte(src[i].lo >> sh)
				dst[offs[b]] = src[i]
				offs[b]++
			}
		default:
			for i := range src {
				b := byte(src[i].gl >> sh)
				dst[offs[b]] = src[i]
				offs[b]++
			}
		}
		src, dst = dst, src
	}
	if &src[0] != &order[0] {
		copy(order, src)
	}
}

// sortOrders sorts order by key, stably (of two operations on one key, the
// later stays later), unless it is sorted already.
func sortOrders(order []entryOrder) {
	var and, or [3]uint64
	and = [3]uint64{^uint64(0), ^uint64(0), ^uint64(0)}
	sorted := true
	for j := range order {
		o := &order[j]
		w := [3]uint64{o.hi, o.lo, uint64(o.gl)}
		for k := range w {
			and[k] &= w[k]
			or[k] |= w[k]
		}
		if sorted && j > 0 && o.less(&order[j-1]) {
			sorted = false
		}
	}
	if !sorted {
		radixSort(order, [3]uint64{and[0] ^ or[0], and[1] ^ or[1], and[2] ^ or[2]})
	}
}

// lastOfEach keeps, of each run of equal keys in sorted order, the last
// (the operation that wins), in place.
func lastOfEach(order []entryOrder) []entryOrder {
	out := order[:0]
	for j := range order {
		if j+1 < len(order) && order[j].sameKey(&order[j+1]) {
			continue
		}
		out = append(out, order[j])
	}
	return out
}

// encoded is a delta as blobs of records in key order, one per key (the
// last operation on it).
type encoded struct {
	blobs   [][]byte
	size    int // bytes of blobs
	written int // records of an entry
	deleted int // records of a deletion
}

// opBucket holds the operations whose keys share their most significant
// varying bits: their sort keys (i: the value's index in vend, or delMark)
// and their values.
type opBucket struct {
	order []entryOrder
	vals  []byte
	vend  []uint32 // value k is vals[vend[k]:vend[k+1]]
}

// bucketOps is about how many operations a bucket of encodeDelta holds: its
// values and sort keys (some 100 KiB) stay in a core's cache while they are
// sorted and copied into blobs.
const bucketOps = 4096

// keyBit is one bit of a sort key: a word (0 the group rank, 1 hi, 2 lo,
// 3 the peer key's last byte) and a bit of it.
type keyBit struct{ word, bit uint8 }

// topBits returns up to n of the most significant bits that differ between
// the keys (vary holds them, per word as in keyBit), most significant first.
func topBits(vary [4]uint64, n int) []keyBit {
	widths := [4]uint8{24, 64, 64, 8}
	var bits []keyBit
	for w := range vary {
		for b := int(widths[w]) - 1; b >= 0 && len(bits) < n; b-- {
			if vary[w]>>b&1 != 0 {
				bits = append(bits, keyBit{uint8(w), uint8(b)})
			}
		}
	}
	return bits
}

// bucketOf returns the bucket of o: its bits, in order.
func bucketOf(o *entryOrder, bits []keyBit) int {
	words := [4]uint64{uint64(o.gl >> 8), o.hi, o.lo, uint64(o.gl & 0xff)}
	b := 0
	for _, kb := range bits {
		b = b<<1 | int(words[kb.word]>>kb.bit&1)
	}
	return b
}

// encodeDelta encodes the deletions, then the changes (so that an entry
// deleted and changed ends up stored), into blobs.
//
// A million entries come in random key order. Sorting their sort keys and
// then copying each value into place would read the values at random, a
// cache miss each; instead the operations are first dealt, in their order
// (reading the entries once, in order), into buckets by the most
// significant bits in which their keys differ: the buckets are in key
// order, and each is sorted and copied into blobs while it is in cache.
func encodeDelta(ctx context.Context, changed []limiter.EntrySnapshot, deleted []limiter.EntryRef) (encoded, error) {
	var enc encoded
	nd := len(deleted)
	n := nd + len(changed)
	if uint64(n) >= math.MaxUint32 {
		return enc, fmt.Errorf("%d entries", n)
	}
	// The sort keys, in the operations' order, the groups numbered as
	// they come, then ranked.
	ids := map[string]uint32{}
	var seen []string
	idOf := func(g string) (uint32, error) {
		if id, ok := ids[g]; ok {
			return id, nil
		}
		if err := checkGroupName(g); err != nil {
			return 0, err
		}
		if len(seen) == maxGroups {
			return 0, fmt.Errorf("more than %d group names in one delta", maxGroups)
		}
		ids[g] = uint32(len(seen))
		seen = append(seen, g)
		return ids[g], nil
	}
	order := make([]entryOrder, 0, n)
	for i := range deleted {
		id, err := idOf(deleted[i].Group)
		if err != nil {
			return enc, fmt.Errorf("deleted %d (%s): %w", i, deleted[i].Peer, err)
		}
		order = append(order, orderOf(id, &deleted[i].Peer, delMark))
	}
	var id uint32
	for i := range changed {
		if i%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return enc, err
			}
		}
		e := &changed[i]
		if i == 0 || e.Group != changed[i-1].Group {
			var err error
			if id, err = idOf(e.Group); err != nil {
				return enc, fmt.Errorf("entry %d (%s): %w", i, e.Peer, err)
			}
		}
		order = append(order, orderOf(id, &e.Peer, uint32(i)))
	}
	names := slices.Clone(seen)
	slices.Sort(names)
	if !slices.Equal(names, seen) {
		rank := make([]uint32, len(seen))
		for r, g := range names {
			rank[ids[g]] = uint32(r)
		}
		for j := range order {
			o := &order[j]
			o.gl = rank[o.gl>>8]<<8 | o.gl&0xff
		}
	}
	var and, or [4]uint64
	and = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	for j := range order {
		o := &order[j]
		w := [4]uint64{uint64(o.gl >> 8), o.hi, o.lo, uint64(o.gl & 0xff)}
		for k := range w {
			and[k] &= w[k]
			or[k] |= w[k]
		}
	}
	nbits := 0
	for n>>nbits > bucketOps && nbits < 16 {
		nbits++
	}
	bits := topBits([4]uint64{and[0] ^ or[0], and[1] ^ or[1], and[2] ^ or[2], and[3] ^ or[3]}, nbits)

	// Deal the operations into the buckets.
	bucketIDs := make([]uint16, n)
	counts := make([]int, 1<<len(bits))
	for j := range order {
		b := bucketOf(&order[j], bits)
		bucketIDs[j] = uint16(b)
		counts[b]++
	}
	buckets := make([]opBucket, len(counts))
	for b, c := range counts {
		buckets[b] = opBucket{order: make([]entryOrder, 0, c), vals: make([]byte, 0, c*16), vend: make([]uint32, 1, c+1)}
	}
	for j := range order {
		if j%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return enc, err
			}
		}
		b := &buckets[bucketIDs[j]]
		o := order[j]
		if j >= nd {
			b.vals = appendEntry(b.vals, &changed[j-nd])
			if len(b.vals) > math.MaxUint32 {
				return enc, fmt.Errorf("%d bytes of entries", len(b.vals))
			}
			o.i = uint32(len(b.vend) - 1)
			b.vend = append(b.vend, uint32(len(b.vals)))
		}
		b.order = append(b.order, o)
	}
	order, bucketIDs = nil, nil

	// Sort each bucket, and write it.
	w := blobWriter{names: names}
	for bi := range buckets {
		b := &buckets[bi]
		sortOrders(b.order)
		for _, o := range lastOfEach(b.order) {
			p := o.peer()
			if o.i == delMark {
				w.add(o.rank(), &p, true, nil)
				enc.deleted++
				continue
			}
			w.add(o.rank(), &p, false, b.vals[b.vend[o.i]:b.vend[o.i+1]])
			enc.written++
		}
		*b = opBucket{}
	}
	w.flush()
	enc.blobs, enc.size = w.blobs, w.size
	return enc, nil
}
