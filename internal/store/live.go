package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
)

// bucket returns a bucket of the current schema; a missing one means the
// file was changed behind limiterd's back.
func bucket(tx *bbolt.Tx, name []byte) (*bbolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("bucket %s is missing", name)
	}
	return b, nil
}

// update runs fn in one write transaction, committed (fsync) on return.
func (db *DB) update(ctx context.Context, what string, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err := db.bolt.Update(fn)
	db.writes.record(err)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (db *DB) view(ctx context.Context, what string, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := db.bolt.View(fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// appendAudit stores a with the next audit id, and removes up to
// auditPruneStep of the oldest entries beyond the bound (SetAuditMax).
func (db *DB) appendAudit(tx *bbolt.Tx, a live.AuditEntry) error {
	b, err := bucket(tx, bucketAudit)
	if err != nil {
		return err
	}
	id, err := b.NextSequence()
	if err != nil {
		return err
	}
	a.ID = id
	v, err := encodeAudit(a)
	if err != nil {
		return fmt.Errorf("audit entry: %w", err)
	}
	if err := b.Put(u64key(id), v); err != nil {
		return err
	}
	if err := indexAudit(tx, id, auditFields{Action: a.Action, Actor: a.Actor}); err != nil {
		return err
	}
	_, err = db.pruneAudit(tx, b, id, auditPruneStep)
	return err
}

// auditPruneStep bounds the entries one append removes: a bound lowered
// by far is reached by PruneAudit, not by the next edit's transaction.
const auditPruneStep = 64

// auditPruneBatch is how many entries one of PruneAudit's transactions
// removes.
const auditPruneBatch = 10_000

// pruneAudit removes from b, oldest first, up to step entries whose id is
// at most last − the bound (the newest ids are kept; ids are the bucket's
// sequence, so at most the bound's count remain); a bound of 0 removes
// nothing. It returns how many it removed; AuditPruned counts them once
// tx commits.
func (db *DB) pruneAudit(tx *bbolt.Tx, b *bbolt.Bucket, last uint64, step int) (int, error) {
	if !db.auditBeyond(b, last) {
		return 0, nil
	}
	cut := last - db.auditMax.Load()
	// The keys first, then the deletes: a cursor that deletes as it goes
	// can skip the key after each one it deletes.
	var old, vals [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(old) < step; k, v = c.Next() {
		if len(k) == 8 && binary.BigEndian.Uint64(k) > cut {
			break
		}
		old = append(old, slices.Clone(k)) // k is bbolt's until the commit
		vals = append(vals, slices.Clone(v))
	}
	for i, k := range old {
		if len(k) == 8 {
			if err := unindexAudit(tx, binary.BigEndian.Uint64(k), vals[i]); err != nil {
				return 0, err
			}
		}
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	n := len(old)
	if n > 0 {
		tx.OnCommit(func() { db.pruned.Add(uint64(n)) })
	}
	return n, nil
}

// auditBeyond reports whether b's oldest entry is beyond the bound, its
// newest id being last.
func (db *DB) auditBeyond(b *bbolt.Bucket, last uint64) bool {
	keep := db.auditMax.Load()
	if keep == 0 || last <= keep {
		return false
	}
	k, _ := b.Cursor().First()
	return k != nil && (len(k) != 8 || binary.BigEndian.Uint64(k) <= last-keep)
}

// SetAuditMax bounds the audit log (admin.audit_max_entries): each new
// entry then removes some of the oldest beyond the newest n, and
// PruneAudit removes all of them; 0 keeps every entry. It is safe to call
// while the database is in use.
func (db *DB) SetAuditMax(n int) { db.auditMax.Store(uint64(max(n, 0))) }

// AuditPruned returns how many audit entries the bound has removed since
// the database was opened.
func (db *DB) AuditPruned() uint64 { return db.pruned.Load() }

// PruneAudit removes every audit entry beyond the bound (SetAuditMax),
// oldest first, in transactions of auditPruneBatch entries so that edits
// are not held up for long. It returns how many it removed.
func (db *DB) PruneAudit(ctx context.Context) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		// A read first: a start or a reload with nothing beyond the bound
		// (the common case) writes nothing.
		var beyond bool
		if err := db.view(ctx, "read the audit log", func(tx *bbolt.Tx) error {
			b, err := bucket(tx, bucketAudit)
			if err == nil {
				beyond = db.auditBeyond(b, b.Sequence())
			}
			return err
		}); err != nil || !beyond {
			return total, err
		}
		n := 0
		err := db.update(ctx, "prune the audit log", func(tx *bbolt.Tx) error {
			b, err := bucket(tx, bucketAudit)
			if err != nil {
				return err
			}
			n, err = db.pruneAudit(tx, b, b.Sequence(), auditPruneBatch)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < auditPruneBatch {
			return total, nil
		}
	}
}

// LoadLive returns the operators' live state: the overrides by group, the
// exemptions in the order they were added, the switch.
func (db *DB) LoadLive(ctx context.Context) (live.LiveState, error) {
	st := live.LiveState{Overrides: map[string]live.Override{}}
	err := db.view(ctx, "load the live settings", func(tx *bbolt.Tx) error {
		st = live.LiveState{Overrides: map[string]live.Override{}}
		return readLive(tx, &st)
	})
	return st, err
}

// readLive reads the live state. A value that does not decode is an
// error: a live setting silently dropped could lift a limit or a block.
func readLive(tx *bbolt.Tx, st *live.LiveState) error {
	ob, err := bucket(tx, bucketOverrides)
	if err != nil {
		return err
	}
	err = ob.ForEach(func(k, v []byte) error {
		o, err := decodeOverride(v)
		if err != nil {
			return fmt.Errorf("override of group %q: %w", k, err)
		}
		st.Overrides[string(k)] = o
		return nil
	})
	if err != nil {
		return err
	}
	eb, err := bucket(tx, bucketExemptions)
	if err != nil {
		return err
	}
	err = eb.ForEach(func(k, v []byte) error {
		e, err := decodeExemption(v)
		if err != nil {
			return fmt.Errorf("exemption %s: %w", hex.EncodeToString(k), err)
		}
		st.Exemptions = append(st.Exemptions, e)
		return nil
	})
	if err != nil {
		return err
	}
	lb, err := bucket(tx, bucketLive)
	if err != nil {
		return err
	}
	if v := lb.Get(keyDisabled); v != nil {
		if st.Disabled, err = decodeDisabled(v); err != nil {
			return fmt.Errorf("live/disabled: %w", err)
		}
	}
	return nil
}

// SetOverride stores o as group's override (a nil o deletes it) and a, in
// one transaction, with the edit's record if a Recorder is set
// (SetRecorder; so do the other edits below).
func (db *DB) SetOverride(ctx context.Context, group string, o live.Override, a live.AuditEntry) error {
	if group == "" {
		return fmt.Errorf("set override: empty group name")
	}
	var v []byte
	if o != nil {
		var err error
		if v, err = encodeOverride(maps.Clone(o)); err != nil {
			return fmt.Errorf("set override of %s: %w", group, err)
		}
	}
	return db.update(ctx, "set override of "+group, func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketOverrides)
		if err != nil {
			return err
		}
		if o == nil {
			err = b.Delete([]byte(group))
		} else {
			err = b.Put([]byte(group), v)
		}
		if err != nil {
			return err
		}
		f, fv, del := live.OverrideField(group, o)
		if err := db.keepRecord(tx, f, fv, del); err != nil {
			return err
		}
		return db.appendAudit(tx, a)
	})
}

// findExemption returns the key of the exemption of e's kind and value, or
// nil.
func findExemption(b *bbolt.Bucket, e live.Exemption) ([]byte, error) {
	// Only a value holding e.Value as encodeExemption writes it can be
	// e: the others are passed over undecoded (decoding each made an add
	// beside 14 000 exemptions cost tens of milliseconds).
	want, err := json.Marshal(e.Value)
	if err != nil {
		return nil, err
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if !bytes.Contains(v, want) {
			continue
		}
		x, err := decodeExemption(v)
		if err != nil {
			return nil, fmt.Errorf("exemption %s: %w", hex.EncodeToString(k), err)
		}
		if x.Kind == e.Kind && x.Value == e.Value {
			return append([]byte(nil), k...), nil
		}
	}
	return nil, nil
}

// AddExemption stores e and a in one transaction. An exemption of the same
// kind and value is replaced in place (its note updated), never doubled.
func (db *DB) AddExemption(ctx context.Context, e live.Exemption, a live.AuditEntry) error {
	v, err := encodeExemption(e)
	if err != nil {
		return fmt.Errorf("add exemption: %w", err)
	}
	return db.update(ctx, fmt.Sprintf("add %s %q", e.Kind, e.Value), func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketExemptions)
		if err != nil {
			return err
		}
		k, err := findExemption(b, e)
		if err != nil {
			return err
		}
		if k == nil {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			k = u64key(seq)
		}
		if err := b.Put(k, v); err != nil {
			return err
		}
		f, fv := live.ExemptionField(e)
		if err := db.keepRecord(tx, f, fv, false); err != nil {
			return err
		}
		return db.appendAudit(tx, a)
	})
}

// RemoveExemption removes the exemption of e's kind and value (absent: a
// no-op) and stores a, in one transaction.
func (db *DB) RemoveExemption(ctx context.Context, e live.Exemption, a live.AuditEntry) error {
	return db.update(ctx, fmt.Sprintf("remove %s %q", e.Kind, e.Value), func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketExemptions)
		if err != nil {
			return err
		}
		k, err := findExemption(b, e)
		if err != nil {
			return err
		}
		if k != nil {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		f, _ := live.ExemptionField(e)
		if err := db.keepRecord(tx, f, "", true); err != nil {
			return err
		}
		return db.appendAudit(tx, a)
	})
}

// SetDisabled stores the global switch and a, in one transaction.
func (db *DB) SetDisabled(ctx context.Context, disabled bool, a live.AuditEntry) error {
	return db.update(ctx, "set the global switch", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketLive)
		if err != nil {
			return err
		}
		if err := b.Put(keyDisabled, encodeDisabled(disabled)); err != nil {
			return err
		}
		f, fv, del := live.SwitchField(disabled)
		if err := db.keepRecord(tx, f, fv, del); err != nil {
			return err
		}
		return db.appendAudit(tx, a)
	})
}

// Record stores an audit entry for an action that changes no setting. Its
// ID is assigned by the store (a.ID is ignored).
func (db *DB) Record(ctx context.Context, a live.AuditEntry) error {
	return db.update(ctx, "record audit entry", func(tx *bbolt.Tx) error { return db.appendAudit(tx, a) })
}

// Audit returns up to limit audit entries with IDs below before (0: from
// the newest), newest first. An entry that does not decode is skipped and
// logged.
func (db *DB) Audit(ctx context.Context, limit int, before uint64) ([]live.AuditEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []live.AuditEntry
	err := db.view(ctx, "read the audit log", func(tx *bbolt.Tx) error {
		out = out[:0]
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		c := b.Cursor()
		var k, v []byte
		if before == 0 {
			k, v = c.Last()
		} else if k, _ = c.Seek(u64key(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && len(out) < limit; k, v = c.Prev() {
			a, err := decodeAudit(v)
			if err != nil || len(k) != 8 {
				db.log.Warn("audit entry does not decode: skipped", "path", db.path, "key", hex.EncodeToString(k), "err", err)
				continue
			}
			a.ID = binary.BigEndian.Uint64(k)
			out = append(out, a)
		}
		return nil
	})
	return out, err
}
