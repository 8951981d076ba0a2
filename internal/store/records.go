package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/limiterd/limiterd/internal/live"
)

// Cluster mode's records of the live state (decision 221): one per field
// that has one, keyed by the field's name, with the clock's high-water
// mark beside the switch.
var (
	bucketRecords  = []byte("live_records")
	keyRecordClock = []byte("record_clock")
)

// recorderBox holds the Recorder of SetRecorder.
type recorderBox struct{ r live.Recorder }

// SetRecorder makes r stamp every live edit stored from now on (cluster
// mode): the record of the field an edit changes is kept in the edit's own
// transaction (decision 36), and r hears of it once committed. nil: none.
// Edits stored through any of SetOverride, AddExemption, RemoveExemption
// and SetDisabled are stamped, those another instance made included: r
// returns the record it already holds for those.
func (db *DB) SetRecorder(r live.Recorder) {
	if r == nil {
		db.recorder.Store(nil)
		return
	}
	db.recorder.Store(&recorderBox{r})
}

// keepRecord asks the Recorder for the record of the edit of field and
// keeps it in tx, and tells the Recorder once tx commits. Without a
// Recorder (limiterd without cluster mode) the field's record, if any, is
// removed: the edit's age is unknown, so the field is one without a record
// when cluster mode next starts (the lowest stamp), rather than one whose
// older record would undo the edit.
func (db *DB) keepRecord(tx *bbolt.Tx, field, value string, removed bool) error {
	box := db.recorder.Load()
	if box == nil {
		b, err := bucket(tx, bucketRecords)
		if err != nil {
			return err
		}
		if len(field) == 0 || len(field) > bbolt.MaxKeySize {
			return nil
		}
		return b.Delete([]byte(field))
	}
	rec, clock := box.r.Stamp(field, value, removed)
	kept, err := putRecords(tx, map[string]live.Record{field: rec}, clock)
	if err != nil {
		return fmt.Errorf("record of %q: %w", field, err)
	}
	if kept > 0 {
		tx.OnCommit(func() { box.r.Stamped(field, rec) })
	}
	return nil
}

// LoadRecords returns every record kept, by field, and the clock's
// high-water mark (cluster mode's records, decision 221). A record that
// does not decode is logged naming its field and left out: the field is
// one without a record (the lowest stamp); the others load.
func (db *DB) LoadRecords(ctx context.Context) (map[string]live.Record, string, error) {
	var recs map[string]live.Record
	var clock string
	err := db.view(ctx, "load the live records", func(tx *bbolt.Tx) error {
		recs, clock = map[string]live.Record{}, ""
		b, err := bucket(tx, bucketRecords)
		if err != nil {
			return err
		}
		err = b.ForEach(func(k, v []byte) error {
			rec, err := decodeLiveRecord(v)
			if err != nil {
				db.log.Warn("a live record does not decode: left out (the field is one without a record)", "path", db.path, "field", string(k), "err", err)
				return nil
			}
			recs[string(k)] = rec
			return nil
		})
		if err != nil {
			return err
		}
		lb, err := bucket(tx, bucketLive)
		if err != nil {
			return err
		}
		if v := lb.Get(keyRecordClock); v != nil {
			if err := checkStamp(v); err != nil {
				db.log.Warn("the live records' clock does not decode: left out (the records' own stamps bound it)", "path", db.path, "key", "live/record_clock", "err", err)
			} else {
				clock = string(v)
			}
		}
		return nil
	})
	return recs, clock, err
}

// SaveRecords keeps each of recs that is newer than the record kept for
// its field, and clock if it is greater than the one kept, in one
// transaction. A field too long to be a key (no field limiterd writes is)
// is left out.
func (db *DB) SaveRecords(ctx context.Context, recs map[string]live.Record, clock string) error {
	return db.update(ctx, "save the live records", func(tx *bbolt.Tx) error {
		_, err := putRecords(tx, recs, clock)
		return err
	})
}

// putRecords writes each of recs newer than the record kept for its field
// (or whose kept record does not decode), and clock if greater, and
// returns how many records it wrote.
func putRecords(tx *bbolt.Tx, recs map[string]live.Record, clock string) (int, error) {
	b, err := bucket(tx, bucketRecords)
	if err != nil {
		return 0, err
	}
	n := 0
	for f, rec := range recs {
		if f == "" || len(f) > bbolt.MaxKeySize {
			continue
		}
		if old, err := decodeLiveRecord(b.Get([]byte(f))); err == nil && !rec.Newer(old) {
			continue
		}
		v, err := encodeLiveRecord(rec)
		if err != nil {
			return n, fmt.Errorf("record of %q: %w", f, err)
		}
		if err := b.Put([]byte(f), v); err != nil {
			return n, fmt.Errorf("record of %q: %w", f, err)
		}
		n++
	}
	if clock == "" {
		return n, nil
	}
	if err := checkStamp([]byte(clock)); err != nil {
		return n, fmt.Errorf("records' clock: %w", err)
	}
	lb, err := bucket(tx, bucketLive)
	if err != nil {
		return n, err
	}
	if old := lb.Get(keyRecordClock); old == nil || checkStamp(old) != nil || clock > string(old) {
		if err := lb.Put(keyRecordClock, []byte(clock)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// clearRecords removes every record (an import replaces the live state:
// its fields are of unknown age). The clock stays: stamps never go back.
func clearRecords(tx *bbolt.Tx) error {
	if err := tx.DeleteBucket(bucketRecords); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	_, err := tx.CreateBucket(bucketRecords)
	return err
}

// ---- live records ----

// maxStamp bounds a stamp's length (a stamp is 13 digits, a dot, 6
// digits, a dot and an instance name of at most 255 bytes).
const maxStamp = 512

// checkStamp refuses what cannot be a stamp: empty, too long, or holding
// a space or a control character (the shared hash ends a stamp at its
// first space).
func checkStamp(s []byte) error {
	if len(s) == 0 || len(s) > maxStamp {
		return fmt.Errorf("a stamp of %d bytes", len(s))
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("a stamp holding byte %#x", c)
		}
	}
	return nil
}

func encodeLiveRecord(r live.Record) ([]byte, error) {
	if err := checkStamp([]byte(r.Stamp)); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

func decodeLiveRecord(v []byte) (live.Record, error) {
	if v == nil {
		return live.Record{}, errors.New("absent")
	}
	var r live.Record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, err
	}
	if err := checkStamp([]byte(r.Stamp)); err != nil {
		return r, err
	}
	if r.Removed && r.Value != "" {
		return r, errors.New("a removal with a value")
	}
	return r, nil
}
