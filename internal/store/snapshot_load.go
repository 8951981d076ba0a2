package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/limiterd/limiterd/limiter"
	"go.etcd.io/bbolt"
)

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
		snap.TakenAt, snap.WallAt, snap.Enabled = h.TakenAt, h.WallAt, h.Enabled
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
