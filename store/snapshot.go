package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
)

// SaveStats says what SaveDelta wrote, and what the stored entries take.
type SaveStats struct {
	// Written is the number of entries written: all of the delta's changes,
	// counting an entry changed twice once.
	Written int
	// Deleted is the number of deletions recorded: the entries of an
	// incremental delta's Deleted that it does not also change (whether
	// they were stored or not: the log does not look). A full delta
	// replaces the stored entries and records none.
	Deleted int
	// Skipped is the number of records a compaction dropped because they
	// did not decode (any load would skip them too).
	Skipped int
	// Bytes is the file's size after the save.
	Bytes int64
	// BaseBytes is the size of the base (the entries of the last full
	// save), LogBytes that of the log of the incremental saves since, and
	// LogRecords their number (a save that changed nothing adds none).
	BaseBytes  int64
	LogBytes   int64
	LogRecords int
	// Compact says the log has grown enough (past a third of the base, or
	// maxLogRecords saves) that the next save should be full: a full save
	// writes a new base and empties the log, which a load reads whole.
	Compact bool
}

// LoadReport says what LoadSnapshot read.
type LoadReport struct {
	// Entries is the number of entries returned.
	Entries int
	// Skipped is the number of entry records that did not decode (each is
	// logged with its blob's key in hex and its place there). A blob whose
	// header or framing is broken is skipped whole and counts as the
	// records its header declares, at least one.
	Skipped int
}

// Compaction: SaveStats.Compact is set when the log holds more than
// max(compactMinBytes, base/compactRatio) bytes, or maxLogRecords saves.
// At a million entries the largest log (a third of the base, some 330 000
// changes) makes a load take about 1.7 times as long as the base alone;
// half the base took 3 times as long. With 1 % churn every 5 s a daemon
// then saves in full every 3 minutes or so.
const (
	compactRatio    = 3
	compactMinBytes = 256 << 10
	maxLogRecords   = 1024
)

func compactDue(base, log int64, records int) bool {
	return records >= maxLogRecords || (log > compactMinBytes && log > base/compactRatio)
}

// ctxEvery is how many records a long loop handles between checks of its
// context.
const ctxEvery = 1 << 16

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

func orderOf(rank uint32, p *limiter.PeerKey, i uint32) entryOrder {
	return entryOrder{
		hi: binary.BigEndian.Uint64(p[0:8]),
		lo: binary.BigEndian.Uint64(p[8:16]),
		gl: rank<<8 | uint32(p[16]),
		i:  i,
	}
}

func (o *entryOrder) rank() uint32 { return o.gl >> 8 }

func (o *entryOrder) peer() limiter.PeerKey {
	var p limiter.PeerKey
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

// logKey is the key of part part of the log record seq.
func logKey(seq uint64, part int) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint64(k, seq)
	binary.BigEndian.PutUint32(k[8:], uint32(part))
	return k
}

// replaceBase empties the base and the log and stores blobs as the base.
func replaceBase(ctx context.Context, tx *bbolt.Tx, blobs [][]byte) error {
	for _, name := range [][]byte{bucketBase, bucketLog} {
		if err := tx.DeleteBucket(name); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	if _, err := tx.CreateBucket(bucketLog); err != nil {
		return err
	}
	b, err := tx.CreateBucket(bucketBase)
	if err != nil {
		return err
	}
	b.FillPercent = 1 // keys come in order, and are never inserted between
	for i, v := range blobs {
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := b.Put(u64key(uint64(i)+1), v); err != nil {
			return fmt.Errorf("base blob %d: %w", i+1, err)
		}
	}
	return nil
}

// appendLog stores blobs as the next log record.
func appendLog(tx *bbolt.Tx, blobs [][]byte) error {
	b, err := bucket(tx, bucketLog)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	b.FillPercent = 1 // keys only ever grow
	for part, v := range blobs {
		if err := b.Put(logKey(seq, part), v); err != nil {
			return fmt.Errorf("log record %d part %d: %w", seq, part, err)
		}
	}
	return nil
}

// measure sets the sizes of st and whether compaction is due.
func measure(tx *bbolt.Tx, st *SaveStats) error {
	bb, err := bucket(tx, bucketBase)
	if err != nil {
		return err
	}
	c := bb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		st.BaseBytes += int64(len(v))
	}
	lb, err := bucket(tx, bucketLog)
	if err != nil {
		return err
	}
	c = lb.Cursor()
	var last []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		st.LogBytes += int64(len(v))
		if len(k) < 8 || !bytes.Equal(k[:8], last) {
			st.LogRecords++
			last = k[:min(8, len(k))]
		}
	}
	st.Compact = compactDue(st.BaseBytes, st.LogBytes, st.LogRecords)
	return nil
}

// SaveDelta stores d in one transaction. A full delta replaces the stored
// entries: it writes them as a new base and empties the log. An
// incremental one appends its deletions and changes to the log as one
// record (an entry in both ends up stored; of two changes of one entry the
// later wins). Then the groups' tick phase is replaced, and the switch and
// the time stored. On error (a cancelled ctx included) nothing changed; the
// caller must then save a full delta next (limiter.SnapshotDelta has
// already marked the entries saved). When the returned SaveStats.Compact is
// set, the caller should make its next delta full.
func (db *DB) SaveDelta(ctx context.Context, d limiter.Delta) (SaveStats, error) {
	var st SaveStats
	var enc encoded
	var err error
	if d.Full {
		enc, err = encodeDelta(ctx, d.Changed, nil)
	} else {
		enc, err = encodeDelta(ctx, d.Changed, d.Deleted)
	}
	if err != nil {
		return st, fmt.Errorf("save snapshot: %w", err)
	}
	groups := make([]kv, 0, len(d.Groups))
	for i := range d.Groups {
		g := &d.Groups[i]
		if g.Name == "" {
			return st, fmt.Errorf("save snapshot: group %d: empty name", i)
		}
		v, err := encodeGroup(g)
		if err != nil {
			return st, fmt.Errorf("save snapshot: group %s: %w", g.Name, err)
		}
		groups = append(groups, kv{k: []byte(g.Name), v: v})
	}
	hdr, err := encodeHeader(header{TakenAt: d.TakenAt, Enabled: d.Enabled})
	if err != nil {
		return st, fmt.Errorf("save snapshot: %w", err)
	}

	err = db.update(ctx, "save snapshot", func(tx *bbolt.Tx) error {
		st = SaveStats{Written: enc.written, Deleted: enc.deleted}
		switch {
		case d.Full:
			if err := replaceBase(ctx, tx, enc.blobs); err != nil {
				return err
			}
		case len(enc.blobs) > 0:
			if err := appendLog(tx, enc.blobs); err != nil {
				return err
			}
		}
		if err := writeGroups(tx, groups, hdr); err != nil {
			return err
		}
		if err := measure(tx, &st); err != nil {
			return err
		}
		// The last moment to give up: nothing is written yet.
		return ctx.Err()
	})
	if err != nil {
		return SaveStats{}, err
	}
	st.Bytes = db.Size()
	return st, nil
}

// writeGroups replaces the groups' tick phase and the snapshot header.
func writeGroups(tx *bbolt.Tx, groups []kv, hdr []byte) error {
	gb, err := bucket(tx, bucketGroups)
	if err != nil {
		return err
	}
	var stale [][]byte
	err = gb.ForEach(func(k, _ []byte) error {
		if !slices.ContainsFunc(groups, func(g kv) bool { return bytes.Equal(g.k, k) }) {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := gb.Delete(k); err != nil {
			return err
		}
	}
	for _, g := range groups {
		if err := gb.Put(g.k, g.v); err != nil {
			return err
		}
	}
	sb, err := bucket(tx, bucketSnapshot)
	if err != nil {
		return err
	}
	return sb.Put(keyHeader, hdr)
}

// LoadSnapshot returns the stored snapshot (the zero Snapshot, TakenAt 0,
// when none was saved yet), entries in key order (group, then peer key
// bytes): the base, with the log's records applied in order (a later
// change wins, a deletion removes). An entry record that does not decode is
// skipped, counted in the report and logged (its blob's key in hex, its
// place there); so is a blob whose header or framing is broken, whole, and
// a group whose tick phase does not decode (limiter.Restore then starts it
// afresh). A load never writes.
func (db *DB) LoadSnapshot(ctx context.Context) (limiter.Snapshot, LoadReport, error) {
	var snap limiter.Snapshot
	var rep LoadReport
	err := db.view(ctx, "load snapshot", func(tx *bbolt.Tx) error {
		var err error
		snap, rep, err = db.readSnapshot(ctx, tx)
		return err
	})
	return snap, rep, err
}

// maxLogged bounds the records logged one by one per load.
const maxLogged = 20

func (db *DB) readSnapshot(ctx context.Context, tx *bbolt.Tx) (limiter.Snapshot, LoadReport, error) {
	var snap limiter.Snapshot
	var rep LoadReport
	sb, err := bucket(tx, bucketSnapshot)
	if err != nil {
		return snap, rep, err
	}
	if v := sb.Get(keyHeader); v != nil {
		h, err := decodeHeader(v)
		if err != nil {
			return snap, rep, fmt.Errorf("snapshot/header: %w", err)
		}
		snap.TakenAt, snap.Enabled = h.TakenAt, h.Enabled
	}
	gb, err := bucket(tx, bucketGroups)
	if err != nil {
		return snap, rep, err
	}
	err = gb.ForEach(func(k, v []byte) error {
		g, err := decodeGroup(v)
		if err != nil || g.Name != string(k) {
			db.log.Warn("snapshot group record does not decode: skipped", "path", db.path, "key", hex.EncodeToString(k), "err", err)
			return nil
		}
		snap.Groups = append(snap.Groups, g)
		return nil
	})
	if err != nil {
		return snap, rep, err
	}

	ld := loader{db: db, ctx: ctx, rep: &rep}
	base, err := ld.blobs(tx, bucketBase)
	if err != nil {
		return snap, rep, err
	}
	logs, err := ld.blobs(tx, bucketLog)
	if err != nil {
		return snap, rep, err
	}
	ld.rankNames(base, logs)
	if snap.Entries, err = ld.entries(base, logs); err != nil {
		return snap, rep, err
	}
	if ld.logged > maxLogged {
		db.log.Warn("more snapshot entry records did not decode", "path", db.path, "skipped", rep.Skipped, "logged", maxLogged)
	}
	rep.Entries = len(snap.Entries)
	return snap, rep, nil
}

// loader reads the entry blobs of one transaction.
type loader struct {
	db     *DB
	ctx    context.Context
	rep    *LoadReport
	logged int
	n      int // records read, for the context checks

	names []string          // every group name of the blobs, sorted
	rank  map[string]uint32 // a name's index in names
}

// storedBlob is a blob read from bucket bucket under key.
type storedBlob struct {
	bucket []byte
	key    []byte
	blob
	groups []blobGroup // the header's names
}

// blobGroup is a name of a blob's header resolved: its rank and interned
// string, or !ok when it is not a valid group name.
type blobGroup struct {
	rank uint32
	name string
	ok   bool
}

func (ld *loader) skip(b *storedBlob, rec int, n int, err error) {
	ld.rep.Skipped += n
	if ld.logged++; ld.logged > maxLogged {
		return
	}
	if rec < 0 {
		ld.db.log.Warn("snapshot blob does not decode: skipped whole", "path", ld.db.path, "bucket", string(b.bucket), "key", hex.EncodeToString(b.key), "records", n, "err", err)
		return
	}
	ld.db.log.Warn("snapshot entry record does not decode: skipped", "path", ld.db.path, "bucket", string(b.bucket), "key", hex.EncodeToString(b.key), "record", rec, "err", err)
}

func (ld *loader) tick() error {
	if ld.n++; ld.n%ctxEvery == 0 {
		return ld.ctx.Err()
	}
	return nil
}

// blobs returns the blobs of a bucket that parse, in key order; the others
// are skipped, counted and logged.
func (ld *loader) blobs(tx *bbolt.Tx, name []byte) ([]storedBlob, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return nil, err
	}
	var out []storedBlob
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sb := storedBlob{bucket: name, key: k}
		if v == nil {
			ld.skip(&sb, -1, 1, fmt.Errorf("a bucket, not a blob"))
			continue
		}
		bl, err := parseBlob(v)
		if err != nil {
			ld.skip(&sb, -1, max(1, bl.count), err)
			continue
		}
		sb.blob = bl
		out = append(out, sb)
	}
	return out, nil
}

// rankNames ranks the group names of every blob, and interns them.
func (ld *loader) rankNames(lists ...[]storedBlob) {
	ld.rank = map[string]uint32{}
	for _, l := range lists {
		for _, b := range l {
			for _, n := range b.names {
				if _, ok := ld.rank[string(n)]; !ok && checkGroupName(string(n)) == nil {
					ld.rank[string(n)] = 0
				}
			}
		}
	}
	ld.names = slices.Sorted(maps.Keys(ld.rank))
	for r, n := range ld.names {
		ld.rank[n] = uint32(r)
	}
	for _, l := range lists {
		for i := range l {
			b := &l[i]
			b.groups = make([]blobGroup, len(b.names))
			for j, n := range b.names {
				if r, ok := ld.rank[string(n)]; ok {
					b.groups[j] = blobGroup{rank: r, name: ld.names[r], ok: true}
				}
			}
		}
	}
}

// each decodes the records of blobs, each appended to *dst and given to
// fn (its index in *dst, its group's rank, whether it is a deletion), which
// may shorten *dst (to drop it) or rearrange its end. A record that does
// not decode is skipped, and so is a deletion unless dels.
func (ld *loader) each(blobs []storedBlob, dels bool, dst *[]limiter.EntrySnapshot, fn func(i int, rank uint32, del bool)) error {
	return ld.eachRecord(blobs, func(b *storedBlob, j int, rec []byte) error {
		n := len(*dst)
		*dst = append(*dst, limiter.EntrySnapshot{})
		e := &(*dst)[n]
		g, del, err := decodeRecord(rec, e)
		if err == nil {
			err = b.checkRecord(g, del, dels)
		}
		if err != nil {
			*dst = (*dst)[:n]
			ld.skip(b, j, 1, err)
			return nil
		}
		e.Group = b.groups[g].name
		fn(n, b.groups[g].rank, del)
		return nil
	})
}

// checkRecord refuses a record of the blob whose group index names no
// valid group, or that is a deletion where none may be (!dels: the base).
func (b *storedBlob) checkRecord(g int, del, dels bool) error {
	switch {
	case g >= len(b.groups) || !b.groups[g].ok:
		return fmt.Errorf("group index %d: no such group name in the blob", g)
	case del && !dels:
		return errors.New("a deletion in the base")
	}
	return nil
}

// entries returns the base's entries with the log applied, in key order.
func (ld *loader) entries(base, logs []storedBlob) ([]limiter.EntrySnapshot, error) {
	// The log: its operations sorted by key (stably: later records after
	// earlier ones), the last of each key kept.
	n := 0
	for i := range logs {
		n += logs[i].count
	}
	ops := make([]entryOrder, 0, n)
	puts := make([]limiter.EntrySnapshot, 0, n)
	err := ld.each(logs, true, &puts, func(i int, rank uint32, del bool) {
		o := orderOf(rank, &puts[i].Peer, uint32(i))
		if del {
			o.i = delMark
			puts = puts[:i]
		}
		ops = append(ops, o)
	})
	if err != nil {
		return nil, err
	}
	sortOrders(ops)
	ops = lastOfEach(ops)
	nputs := 0
	for j := range ops {
		if ops[j].i != delMark {
			nputs++
		}
	}

	// The base, in key order as a full save writes it (checked), merged
	// with the operations as it is read: each entry is decoded in its
	// place in the result, moved only when operations go before it.
	n = 0
	for i := range base {
		n += base[i].count
	}
	out := make([]limiter.EntrySnapshot, 0, n+nputs)
	sorted := true
	var prev entryOrder
	j := 0
	err = ld.each(base, false, &out, func(i int, rank uint32, _ bool) {
		o := orderOf(rank, &out[i].Peer, 0)
		if i > 0 && !prev.less(&o) {
			sorted = false
		}
		prev = o
		if !sorted {
			return // resort will apply the operations
		}
		if j < len(ops) && ops[j].less(&o) {
			e := out[i]
			out = out[:i]
			for ; j < len(ops) && ops[j].less(&o); j++ {
				if ops[j].i != delMark {
					out = append(out, puts[ops[j].i])
				}
			}
			out = append(out, e)
		}
		if j < len(ops) && ops[j].sameKey(&o) {
			if ops[j].i != delMark {
				out[len(out)-1] = puts[ops[j].i]
			} else {
				out = out[:len(out)-1]
			}
			j++
		}
	})
	if err != nil {
		return nil, err
	}
	if !sorted {
		// Operations already applied to the start are applied again:
		// each is the final state of its key, so that is harmless.
		return ld.resort(out, ops, puts), nil
	}
	for ; j < len(ops); j++ {
		if ops[j].i != delMark {
			out = append(out, puts[ops[j].i])
		}
	}
	return out, nil
}

// resort is the slow way, for a base not in key order (not written by
// limiterd): the base's entries, then the log's operations, sorted
// together, the last of each key kept.
func (ld *loader) resort(base []limiter.EntrySnapshot, ops []entryOrder, puts []limiter.EntrySnapshot) []limiter.EntrySnapshot {
	all := make([]entryOrder, 0, len(base)+len(ops))
	for i := range base {
		all = append(all, orderOf(ld.rank[base[i].Group], &base[i].Peer, uint32(i)))
	}
	for _, o := range ops {
		if o.i != delMark {
			o.i += uint32(len(base))
		}
		all = append(all, o)
	}
	sortOrders(all)
	all = lastOfEach(all)
	out := make([]limiter.EntrySnapshot, 0, len(all))
	for _, o := range all {
		switch {
		case o.i == delMark:
		case int(o.i) < len(base):
			out = append(out, base[o.i])
		default:
			out = append(out, puts[int(o.i)-len(base)])
		}
	}
	return out
}
