package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Compact folds the log into the base: it rewrites the stored entries as a
// new base holding the base with the log applied, and empties the log, in
// one transaction. It works on the stored records as they are, merging the
// base (in key order) with the log's last operation per key, and never
// decodes the population into limiter values: a compaction costs the
// limiter nothing, and allocates the new blobs and the log's operations
// only. A record that does not decode is dropped (it would be skipped by
// any load), counted in SaveStats.Skipped and logged. The groups' tick
// phase, the switch and the snapshot time are left as they are.
//
// SaveDelta says when a compaction is due (SaveStats.Compact); a full
// delta compacts too.
func (db *DB) Compact(ctx context.Context) (SaveStats, error) {
	var st SaveStats
	err := db.update(ctx, "compact", func(tx *bbolt.Tx) error {
		var rep LoadReport
		ld := loader{db: db, ctx: ctx, rep: &rep}
		base, err := ld.blobs(tx, bucketBase)
		if err != nil {
			return err
		}
		logs, err := ld.blobs(tx, bucketLog)
		if err != nil {
			return err
		}
		ld.rankNames(base, logs)
		blobs, written, err := ld.merge(base, logs)
		if errors.Is(err, errUnsorted) {
			// Not written by limiterd: the slow way, through values.
			var entries []limiter.EntrySnapshot
			if entries, err = ld.entries(base, logs); err != nil {
				return err
			}
			var enc encoded
			if enc, err = encodeDelta(ctx, entries, nil); err != nil {
				return err
			}
			blobs, written = enc.blobs, enc.written
		} else if err != nil {
			return err
		}
		// Everything read is copied into blobs: the old buckets can go.
		if err := replaceBase(ctx, tx, blobs); err != nil {
			return err
		}
		st = SaveStats{Written: written, Skipped: rep.Skipped}
		if err := measure(tx, &st); err != nil {
			return err
		}
		return ctx.Err()
	})
	if err != nil {
		return SaveStats{}, fmt.Errorf("compact: %w", err)
	}
	st.Bytes = db.Size()
	return st, nil
}

// errUnsorted: the base is not in key order.
var errUnsorted = errors.New("the base is not in key order")

// rawRecord is a record's parts, the value still encoded.
type rawRecord struct {
	group int
	del   bool
	peer  peer.Key
	value []byte // aliases the blob
}

// parseRecord splits rec into its parts and checks that its value decodes
// (what a load would skip, a compaction drops).
func parseRecord(rec []byte, scratch *limiter.EntrySnapshot) (rawRecord, error) {
	var r rawRecord
	g, del, err := decodeRecord(rec, scratch)
	if err != nil {
		return r, err
	}
	r.group, r.del, r.peer = g, del, scratch.Peer
	if !del {
		// decodeRecord took the value from the record's end.
		r.value = rec[len(rec)-encodedLen(rec):]
	}
	return r, nil
}

// encodedLen returns the length of the value at the end of a record that
// decodeRecord accepted: what follows the group index and the peer key.
func encodedLen(rec []byte) int {
	_, k := binary.Uvarint(rec)
	n := int(rec[k])
	return len(rec) - (k + 2 + n)
}

// merge streams the base's records, in key order, merged with the log's
// last operation per key, into new base blobs, and returns them with the
// number of entries they hold. It returns errUnsorted, having written
// nothing, when the base is not in key order.
func (ld *loader) merge(base, logs []storedBlob) ([][]byte, int, error) {
	var scratch limiter.EntrySnapshot
	// The log's operations, their values copied (the old blobs go before
	// the transaction ends), sorted by key, the last of each kept.
	var ops []entryOrder
	var vals [][]byte
	err := ld.eachRecord(logs, func(b *storedBlob, j int, rec []byte) error {
		r, err := parseRecord(rec, &scratch)
		if err == nil {
			err = b.checkRecord(r.group, r.del, true)
		}
		if err != nil {
			ld.skip(b, j, 1, err)
			return nil
		}
		o := orderOf(b.groups[r.group].rank, &r.peer, uint32(len(vals)))
		if r.del {
			o.i = delMark
		} else {
			vals = append(vals, append([]byte(nil), r.value...))
		}
		ops = append(ops, o)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	sortOrders(ops)
	ops = lastOfEach(ops)

	w := blobWriter{names: ld.names}
	written := 0
	emit := func(o *entryOrder) {
		if o.i != delMark {
			p := o.peer()
			w.add(o.rank(), &p, false, vals[o.i])
			written++
		}
	}
	var prev entryOrder
	first := true
	j := 0
	err = ld.eachRecord(base, func(b *storedBlob, k int, rec []byte) error {
		r, err := parseRecord(rec, &scratch)
		if err == nil {
			err = b.checkRecord(r.group, r.del, false)
		}
		if err != nil {
			ld.skip(b, k, 1, err)
			return nil
		}
		o := orderOf(b.groups[r.group].rank, &r.peer, 0)
		if !first && !prev.less(&o) {
			return errUnsorted
		}
		first, prev = false, o
		for ; j < len(ops) && ops[j].less(&o); j++ {
			emit(&ops[j])
		}
		if j < len(ops) && ops[j].sameKey(&o) {
			emit(&ops[j]) // the log's last word on this key
			j++
			return nil
		}
		w.add(o.rank(), &r.peer, false, r.value)
		written++
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	for ; j < len(ops); j++ {
		emit(&ops[j])
	}
	w.flush()
	return w.blobs, written, nil
}

// eachRecord calls fn with every record of blobs in order (its blob and
// its place there), checking the context now and then; fn's error ends
// the walk.
func (ld *loader) eachRecord(blobs []storedBlob, fn func(b *storedBlob, j int, rec []byte) error) error {
	for i := range blobs {
		b := &blobs[i]
		rest := b.records
		for j := 0; len(rest) > 0; j++ {
			if err := ld.tick(); err != nil {
				return err
			}
			var rec []byte
			rec, rest = nextRecord(rest)
			if err := fn(b, j, rec); err != nil {
				return err
			}
		}
	}
	return nil
}
