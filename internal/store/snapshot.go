package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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
	hdr, err := encodeHeader(header{TakenAt: d.TakenAt, WallAt: d.WallAt, Enabled: d.Enabled})
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
