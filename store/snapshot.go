package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
)

// SaveStats says what SaveDelta wrote.
type SaveStats struct {
	// Written is the number of entries written: all of an incremental
	// delta's changes (counting an entry changed twice once); those of a
	// full delta that were not stored as they are, or all of them when
	// the delta replaced most of the stored entries.
	Written int
	// Deleted is the number of entries deleted from the database: those
	// of Delta.Deleted that were stored; for a full delta, those stored
	// that it does not hold.
	Deleted int
	// Bytes is the file's size after the save.
	Bytes int64
}

// LoadReport says what LoadSnapshot read.
type LoadReport struct {
	// Entries is the number of entries returned.
	Entries int
	// Skipped is the number of entry records that did not decode (each is
	// logged with its key in hex).
	Skipped int
}

// fullFillPercent is how full SaveDelta packs the pages of a full save
// (keys come in order): dense, with a little room for values that grow.
const fullFillPercent = 0.9

// ctxEvery is how many records a long loop handles between checks of its
// context.
const ctxEvery = 1 << 16

// kv is one encoded entry.
type kv struct{ k, v []byte }

// entryOrder is an entry's place in key order: its group's rank among the
// group names, then its peer key as big-endian integers (hi, lo, then the
// last byte, packed under the rank in gl); i is its index in the delta.
type entryOrder struct {
	hi, lo uint64
	gl     uint32 // group rank << 8 | peer[16]
	i      uint32
}

// maxGroups bounds the group names of one delta (their rank takes 24 bits).
const maxGroups = 1 << 24

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

// encodeChanged encodes entries, returned in key order. bbolt builds a
// transaction's nodes in memory and splits them only at commit: keys put
// in order are appended, keys in random order each move half a node.
//
// The entries are read once, in their order (values encoded into one
// arena, their sort keys noted); the sort and the keys then need only the
// sort keys.
func encodeChanged(entries []limiter.EntrySnapshot) ([]kv, error) {
	if len(entries) >= math.MaxUint32 {
		return nil, fmt.Errorf("%d entries", len(entries))
	}
	// Rank the group names: their byte order is the keys' (no name holds
	// a NUL, so a name sorts before the names it is a prefix of, as its
	// key does).
	rank := map[string]uint32{}
	for i := range entries {
		g := entries[i].Group
		if i > 0 && g == entries[i-1].Group {
			continue
		}
		if _, ok := rank[g]; !ok {
			if err := checkGroupName(g); err != nil {
				return nil, fmt.Errorf("entry %d (%s): %w", i, entries[i].Peer, err)
			}
			rank[g] = 0
		}
	}
	names := slices.Sorted(maps.Keys(rank))
	if len(names) > maxGroups {
		return nil, fmt.Errorf("%d group names in one delta", len(names))
	}
	for r, g := range names {
		rank[g] = uint32(r)
	}

	order := make([]entryOrder, len(entries))
	vals := make([]byte, 0, len(entries)*16)
	vend := make([]uint32, len(entries)+1) // value i is vals[vend[i]:vend[i+1]]
	var and, or [3]uint64
	and = [3]uint64{^uint64(0), ^uint64(0), ^uint64(0)}
	sorted := true
	keyBytes := 0
	var r uint32
	for i := range entries {
		e := &entries[i]
		if i == 0 || e.Group != entries[i-1].Group {
			r = rank[e.Group]
		}
		keyBytes += len(e.Group) + 1 + peerLen
		p := &e.Peer
		o := entryOrder{
			hi: binary.BigEndian.Uint64(p[0:8]),
			lo: binary.BigEndian.Uint64(p[8:16]),
			gl: r<<8 | uint32(p[16]),
			i:  uint32(i),
		}
		order[i] = o
		w := [3]uint64{o.hi, o.lo, uint64(o.gl)}
		for k := range w {
			and[k] &= w[k]
			or[k] |= w[k]
		}
		if sorted && i > 0 && o.less(&order[i-1]) {
			sorted = false
		}
		vals = appendEntry(vals, e)
		if len(vals) > math.MaxUint32 {
			return nil, fmt.Errorf("%d bytes of entries", len(vals))
		}
		vend[i+1] = uint32(len(vals))
	}
	if !sorted {
		radixSort(order, [3]uint64{and[0] ^ or[0], and[1] ^ or[1], and[2] ^ or[2]})
	}

	keys := make([]byte, 0, keyBytes)
	out := make([]kv, len(entries))
	for j := range order {
		o := &order[j]
		var p limiter.PeerKey
		binary.BigEndian.PutUint64(p[0:8], o.hi)
		binary.BigEndian.PutUint64(p[8:16], o.lo)
		p[16] = byte(o.gl)
		ks := len(keys)
		keys = appendEntryKey(keys, names[o.gl>>8], p)
		out[j] = kv{k: keys[ks:len(keys):len(keys)], v: vals[vend[o.i]:vend[o.i+1]:vend[o.i+1]]}
	}
	return out, nil
}

// SaveDelta applies d in one transaction. A full delta replaces the stored
// entries: afterwards they are exactly d.Changed (see fullPlan for how). An
// incremental one deletes d.Deleted, then puts d.Changed (so an entry
// deleted and created again ends up stored). Then the groups' tick phase is
// replaced, and the switch and the time stored. On error nothing changed;
// the caller must then save a full delta next (limiter.SnapshotDelta has
// already marked the entries saved).
func (db *DB) SaveDelta(ctx context.Context, d limiter.Delta) (SaveStats, error) {
	var st SaveStats
	puts, err := encodeChanged(d.Changed)
	if err != nil {
		return st, fmt.Errorf("save snapshot: %w", err)
	}
	dels := make([][]byte, 0, len(d.Deleted))
	for i, r := range d.Deleted {
		if err := checkGroupName(r.Group); err != nil {
			return st, fmt.Errorf("save snapshot: deleted %d (%s): %w", i, r.Peer, err)
		}
		dels = append(dels, appendEntryKey(nil, r.Group, r.Peer))
	}
	slices.SortFunc(dels, bytes.Compare)
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
		st = SaveStats{}
		b, err := bucket(tx, bucketEntries)
		if err != nil {
			return err
		}
		toPut := puts
		if d.Full {
			plan, err := planFull(ctx, b, puts)
			if err != nil {
				return err
			}
			st.Deleted = plan.deleted
			dels = plan.stale
			if plan.rebuild {
				if err := tx.DeleteBucket(bucketEntries); err != nil {
					return err
				}
				if b, err = tx.CreateBucket(bucketEntries); err != nil {
					return err
				}
				// Keys come in order: pack the pages.
				b.FillPercent = fullFillPercent
			} else {
				toPut = make([]kv, len(plan.changed))
				for i, j := range plan.changed {
					toPut[i] = puts[j]
				}
			}
		}
		for _, k := range dels {
			if b.Get(k) == nil {
				continue
			}
			if err := b.Delete(k); err != nil {
				return err
			}
			if !d.Full {
				st.Deleted++
			}
		}
		for i, p := range toPut {
			if i%ctxEvery == ctxEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := b.Put(p.k, p.v); err != nil {
				return fmt.Errorf("entry %x: %w", p.k, err)
			}
			if i+1 == len(toPut) || !bytes.Equal(p.k, toPut[i+1].k) {
				st.Written++
			}
		}
		return writeGroups(tx, groups, hdr)
	})
	if err != nil {
		return SaveStats{}, err
	}
	st.Bytes = db.Size()
	return st, nil
}

// fullPlan is how a full delta is applied: either the entries bucket is
// dropped and every entry put (when much changed: puts in key order into an
// empty bucket are bbolt's fastest writes), or only the difference is
// applied (when little changed: the pages left as they were are not
// rewritten, where bbolt copies every page a transaction touches).
type fullPlan struct {
	rebuild bool
	changed []int    // if not rebuild: the puts that are new or differ
	stale   [][]byte // if not rebuild: the stored keys to delete
	deleted int      // stored entries the delta does not hold
}

// planFull compares the stored entries with puts (in key order, the last
// of equal keys winning).
func planFull(ctx context.Context, b *bbolt.Bucket, puts []kv) (fullPlan, error) {
	var p fullPlan
	limit := len(puts)/4 + 1024
	drop := func(k []byte) {
		p.deleted++
		if !p.rebuild {
			p.stale = append(p.stale, bytes.Clone(k))
		}
	}
	c := b.Cursor()
	k, v := c.First()
	for i := 0; i < len(puts); i++ {
		if i%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return p, err
			}
		}
		put := puts[i]
		if i+1 < len(puts) && bytes.Equal(put.k, puts[i+1].k) {
			continue // a later change of the same key wins
		}
		for k != nil && bytes.Compare(k, put.k) < 0 {
			drop(k)
			k, v = c.Next()
		}
		if k != nil && bytes.Equal(k, put.k) {
			if !p.rebuild && !bytes.Equal(v, put.v) {
				p.changed = append(p.changed, i)
			}
			k, v = c.Next()
		} else if !p.rebuild {
			p.changed = append(p.changed, i)
		}
		if !p.rebuild && len(p.changed)+len(p.stale) > limit {
			p.rebuild, p.changed, p.stale = true, nil, nil
		}
	}
	for ; k != nil; k, _ = c.Next() {
		drop(k)
	}
	if !p.rebuild && len(p.changed)+len(p.stale) > limit {
		p.rebuild, p.changed, p.stale = true, nil, nil
	}
	return p, nil
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
// when none was saved yet), entries in key order. An entry record that
// does not decode is skipped, counted in the report and logged with its key
// in hex; so is a group whose tick phase does not decode (limiter.Restore
// then starts it afresh).
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

	eb, err := bucket(tx, bucketEntries)
	if err != nil {
		return snap, rep, err
	}
	snap.Entries = make([]limiter.EntrySnapshot, 0, eb.Stats().KeyN)
	names := map[string]string{} // one string per group name
	c := eb.Cursor()
	i := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if i++; i%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return snap, rep, err
			}
		}
		var e limiter.EntrySnapshot
		group, peer, err := parseEntryKey(k)
		if err == nil {
			err = decodeEntry(v, &e)
		}
		if err != nil {
			rep.Skipped++
			if rep.Skipped <= maxLogged {
				db.log.Warn("snapshot entry record does not decode: skipped", "path", db.path, "key", hex.EncodeToString(k), "err", err)
			}
			continue
		}
		name, ok := names[string(group)]
		if !ok {
			name = string(group)
			names[name] = name
		}
		e.Group, e.Peer = name, peer
		snap.Entries = append(snap.Entries, e)
	}
	if rep.Skipped > maxLogged {
		db.log.Warn("more snapshot entry records did not decode", "path", db.path, "skipped", rep.Skipped, "logged", maxLogged)
	}
	rep.Entries = len(snap.Entries)
	return snap, rep, nil
}
