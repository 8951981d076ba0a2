package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// ---- entry blobs ----
//
// The (peer, group) entries are not stored one bbolt key each but packed,
// in key order, into blobs of about blobTarget bytes: a full save writes
// the whole population as a few hundred large values (sequential writes,
// no per-key bbolt overhead), an incremental one appends a few.
//
// A blob (format blobV1):
//
//	byte     format (1)
//	uvarint  number of records
//	uvarint  number of group names, then each: uvarint length, the name
//	records, each:
//	  uvarint  length of the rest of the record
//	  uvarint  index of its group in the names above << 1 | 1 if a deletion
//	  byte     n (0..16); the peer key is k[:n], zeros up to 16, then:
//	  n bytes  k[:n]
//	  byte     k[16]
//	  value    the entry (appendEntry), absent in a deletion
//
// An IPv4 peer's key takes 7 bytes (5 + 2); with the length, the group and
// a token-only value (10 to 14 bytes) a record is 19 to 23 bytes. The framing (the lengths) lets a record that does not decode be
// skipped without losing the others; a blob whose header or framing is
// broken is skipped whole.
const blobV1 = 1

// blobTarget is the size a blob is filled to (at most; a single record
// larger than it gets a blob of its own). bbolt puts at least two values in
// a leaf: two blobs and their page and element headers fit in 32 pages of
// 4 KiB.
const blobTarget = 64<<10 - 128

// maxBlobNames bounds the group names of one blob's header.
const maxBlobNames = 1 << 20

// recordOverhead is the most a record adds to its value: the length and
// group varints (at most 5 bytes each for the sizes a blob holds), n, the
// 16 bytes of the key and its last byte.
const recordOverhead = 5 + 5 + 1 + 16 + 1

// blobWriter packs records, in key order, into blobs.
type blobWriter struct {
	names []string // every group name, by rank
	blobs [][]byte // finished blobs
	body  []byte   // records of the blob being filled
	n     int      // records in body
	lo    uint32   // rank of body's first record: group index = rank − lo
	hi    uint32   // rank of body's last record
	size  int      // bytes of the finished blobs
}

// add appends one record: the entry of (group rank, peer) encoded as value,
// or a deletion when del. Records must come in key order (ranks never go
// down).
func (w *blobWriter) add(rank uint32, peer *peer.Key, del bool, value []byte) {
	n := 16
	for n > 0 && peer[n-1] == 0 {
		n--
	}
	if w.n > 0 && (len(w.body)+recordOverhead+len(value) > blobTarget || rank < w.lo) {
		w.flush()
	}
	if w.n == 0 {
		w.lo = rank
		if w.body == nil {
			w.body = make([]byte, 0, blobTarget)
		}
	}
	g := uint64(rank-w.lo) << 1
	if del {
		g |= 1
		value = nil
	}
	size := uvarintLen(g) + 1 + n + 1 + len(value)
	b := binary.AppendUvarint(w.body, uint64(size))
	b = binary.AppendUvarint(b, g)
	b = append(b, byte(n))
	b = append(b, peer[:n]...)
	b = append(b, peer[16])
	w.body = append(b, value...)
	w.n++
	w.hi = rank
}

// flush finishes the blob being filled, if it holds anything.
func (w *blobWriter) flush() {
	if w.n == 0 {
		return
	}
	names := w.names[w.lo : w.hi+1]
	hdr := 1 + uvarintLen(uint64(w.n)) + uvarintLen(uint64(len(names)))
	for _, name := range names {
		hdr += uvarintLen(uint64(len(name))) + len(name)
	}
	b := make([]byte, 0, hdr+len(w.body))
	b = append(b, blobV1)
	b = binary.AppendUvarint(b, uint64(w.n))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
	}
	b = append(b, w.body...)
	w.blobs = append(w.blobs, b)
	w.size += len(b)
	w.body, w.n = w.body[:0], 0
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// blob is a parsed blob header: its names and its records, framing checked.
type blob struct {
	names   [][]byte // alias the blob's bytes
	count   int      // records
	records []byte   // the records, framing checked
}

// errFraming reports a blob whose records do not add up.
var errFraming = errors.New("broken framing")

// parseBlob reads v's header and checks that its records' lengths add up
// to the end of v, count of them. It keeps v (the caller's transaction
// must still be open when the records are read).
func parseBlob(v []byte) (blob, error) {
	var bl blob
	if len(v) == 0 {
		return bl, errors.New("empty blob")
	}
	if v[0] != blobV1 {
		return bl, fmt.Errorf("unknown blob format %d", v[0])
	}
	r := entryReader{b: v[1:]}
	count := r.uvarint()
	nn := r.uvarint()
	if r.err == nil && (nn > maxBlobNames || nn > uint64(len(r.b))) {
		return bl, fmt.Errorf("header: %d group names in %d bytes", nn, len(r.b))
	}
	if r.err == nil && count > uint64(len(r.b))/4 {
		return bl, fmt.Errorf("header: %d records in %d bytes", count, len(r.b))
	}
	for i := uint64(0); i < nn && r.err == nil; i++ {
		l := r.uvarint()
		if r.err == nil && l > uint64(len(r.b)) {
			return bl, fmt.Errorf("header: group name %d: %d bytes past the end", i, l)
		}
		if r.err == nil {
			bl.names = append(bl.names, r.b[:l:l])
			r.b = r.b[l:]
		}
	}
	if r.err != nil {
		return bl, fmt.Errorf("header: %w", r.err)
	}
	bl.count, bl.records = int(count), r.b
	rest, n := r.b, 0
	for len(rest) > 0 {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return bl, fmt.Errorf("%w: record %d: bad length", errFraming, n)
		}
		rest = rest[k+int(l):]
		n++
	}
	if n != bl.count {
		return bl, fmt.Errorf("%w: %d records, the header says %d", errFraming, n, bl.count)
	}
	return bl, nil
}

// nextRecord splits the first record off records (framing already checked
// by parseBlob).
func nextRecord(records []byte) (rec, rest []byte) {
	l, k := binary.Uvarint(records)
	return records[k : k+int(l)], records[k+int(l):]
}

// decodeRecord decodes a record's group index, peer key and, unless it is
// a deletion, its entry into e (all fields but Group).
func decodeRecord(rec []byte, e *limiter.EntrySnapshot) (group int, del bool, err error) {
	g, k := binary.Uvarint(rec)
	if k <= 0 || g>>1 > maxBlobNames {
		return 0, false, errors.New("bad group index")
	}
	rec = rec[k:]
	if len(rec) < 2 || rec[0] > 16 || len(rec) < 2+int(rec[0]) {
		return 0, false, errors.New("bad peer key")
	}
	n := int(rec[0])
	var p peer.Key
	copy(p[:], rec[1:1+n])
	p[16] = rec[1+n]
	rec = rec[2+n:]
	group, del = int(g>>1), g&1 != 0
	if del {
		if len(rec) != 0 {
			return 0, false, fmt.Errorf("a deletion with %d bytes of value", len(rec))
		}
		e.Peer = p
		return group, true, nil
	}
	e.Peer = p
	if err := decodeEntry(rec, e); err != nil {
		return 0, false, err
	}
	return group, false, nil
}
