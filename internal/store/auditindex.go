package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
)

// The audit log's indexes, by action and by actor (decision 212): keys are
// the action (or actor), a 0 byte and the entry's id, values empty, so
// that a query filtered by them reads only the entries it matches, newest
// first, rather than the whole log. They are derived data, not part of
// the schema: Open makes them when they are missing, and makes them anew
// when the log's sequence is not the one they were last kept with (a
// limiterd that did not keep them wrote to the log meanwhile).
var (
	bucketAuditByAction = []byte("audit_by_action")
	bucketAuditByActor  = []byte("audit_by_actor")
	// keyAuditIndexed, in meta, is the audit bucket's sequence the indexes
	// were last kept with.
	keyAuditIndexed = []byte("audit_indexed")
)

// auditIndexKey is value, 0, id.
func auditIndexKey(value string, id uint64) []byte {
	k := make([]byte, 0, len(value)+9)
	k = append(k, value...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, id)
}

// auditFields are the indexed fields of an entry's stored value.
type auditFields struct {
	Action string `json:"action"`
	Actor  string `json:"actor"`
}

// indexAudit adds the entry id, of action and actor, to the indexes and
// records the sequence they are kept with.
func indexAudit(tx *bbolt.Tx, id uint64, f auditFields) error {
	if err := tx.Bucket(bucketAuditByAction).Put(auditIndexKey(f.Action, id), nil); err != nil {
		return err
	}
	if err := tx.Bucket(bucketAuditByActor).Put(auditIndexKey(f.Actor, id), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keyAuditIndexed, u64key(tx.Bucket(bucketAudit).Sequence()))
}

// unindexAudit removes the entry id whose stored value is v from the
// indexes.
func unindexAudit(tx *bbolt.Tx, id uint64, v []byte) error {
	var f auditFields
	if json.Unmarshal(v, &f) != nil {
		return nil // never indexed
	}
	if err := tx.Bucket(bucketAuditByAction).Delete(auditIndexKey(f.Action, id)); err != nil {
		return err
	}
	return tx.Bucket(bucketAuditByActor).Delete(auditIndexKey(f.Actor, id))
}

// keepAuditIndex makes the indexes when they are missing or stale (see
// above); a log of a million entries takes a few seconds, once.
func (db *DB) keepAuditIndex() error {
	return db.bolt.Update(func(tx *bbolt.Tx) error {
		audit := tx.Bucket(bucketAudit)
		meta := tx.Bucket(bucketMeta)
		fresh := tx.Bucket(bucketAuditByAction) != nil && tx.Bucket(bucketAuditByActor) != nil
		if v := meta.Get(keyAuditIndexed); fresh && len(v) == 8 && binary.BigEndian.Uint64(v) == audit.Sequence() {
			return nil
		}
		for _, name := range [][]byte{bucketAuditByAction, bucketAuditByActor} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return err
				}
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		n := 0
		err := audit.ForEach(func(k, v []byte) error {
			var f auditFields
			if len(k) != 8 || json.Unmarshal(v, &f) != nil {
				return nil
			}
			n++
			return indexAudit(tx, binary.BigEndian.Uint64(k), f)
		})
		if err != nil {
			return fmt.Errorf("index the audit log: %w", err)
		}
		if n > 0 {
			db.log.Info("audit log indexed", "path", db.path, "entries", n)
		}
		return meta.Put(keyAuditIndexed, u64key(audit.Sequence()))
	})
}

// auditStream reads one value's index entries, newest first.
type auditStream struct {
	c      *bbolt.Cursor
	prefix []byte
	id     uint64 // the current entry's; 0 when done
}

// next moves to the next older entry.
func (s *auditStream) next(k []byte) {
	if k == nil || !bytes.HasPrefix(k, s.prefix) || len(k) != len(s.prefix)+8 {
		s.id = 0
		return
	}
	s.id = binary.BigEndian.Uint64(k[len(s.prefix):])
}

// newAuditStream places a stream on value's newest entry below before (0:
// the newest).
func newAuditStream(b *bbolt.Bucket, value string, before uint64) *auditStream {
	s := &auditStream{c: b.Cursor(), prefix: append([]byte(value), 0)}
	if before == 0 {
		before = ^uint64(0)
	}
	k, _ := s.c.Seek(auditIndexKey(value, before))
	if k == nil {
		k, _ = s.c.Last()
	} else {
		k, _ = s.c.Prev()
	}
	s.next(k)
	return s
}

// AuditMatching returns up to limit audit entries with IDs below before
// (0: from the newest), newest first, of the action or its family
// ("exemption": exemption.add, exemption.remove…) when action is not "",
// and of the actor exactly when actor is not "". It reads the indexes, at
// most scan of their entries: next is then the before to go on from (0:
// it read all there was).
func (db *DB) AuditMatching(ctx context.Context, action, actor string, limit, scan int, before uint64) (out []live.AuditEntry, next uint64, err error) {
	err = db.view(ctx, "read the audit log", func(tx *bbolt.Tx) error {
		out, next = out[:0], 0
		audit, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		byActor, byAction := tx.Bucket(bucketAuditByActor), tx.Bucket(bucketAuditByAction)
		if byActor == nil || byAction == nil {
			return live.ErrNoAuditIndex // opened read-only before they were made
		}
		var streams []*auditStream
		if actor != "" {
			streams = append(streams, newAuditStream(byActor, actor, before))
		} else {
			b := byAction
			for _, name := range auditActions(b, action) {
				streams = append(streams, newAuditStream(b, name, before))
			}
		}
		read := 0
		for len(out) < limit {
			var top *auditStream
			for _, s := range streams {
				if s.id != 0 && (top == nil || s.id > top.id) {
					top = s
				}
			}
			if top == nil {
				return nil
			}
			id := top.id
			k, _ := top.c.Prev()
			top.next(k)
			read++
			if read%1024 == 0 && ctx.Err() != nil {
				next = id
				return nil
			}
			if v := audit.Get(u64key(id)); v != nil {
				a, err := decodeAudit(v)
				if err == nil && (actor == "" || a.Actor == actor) && (action == "" || a.Action == action || auditFamily(a.Action, action)) {
					a.ID = id
					out = append(out, a)
				}
			}
			if read >= scan && len(out) < limit {
				next = id
				return nil
			}
		}
		return nil
	})
	return out, next, err
}

// auditFamily reports whether action is of the family f ("exemption.add"
// of "exemption").
func auditFamily(action, f string) bool {
	return len(action) > len(f) && action[len(f)] == '.' && action[:len(f)] == f
}

// auditActions returns the actions of the index b that are action or of
// its family, each once.
func auditActions(b *bbolt.Bucket, action string) []string {
	names := []string{action}
	c := b.Cursor()
	p := []byte(action + ".")
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			break
		}
		names = append(names, string(k[:i]))
		k, _ = c.Seek(append(bytes.Clone(k[:i]), 1))
	}
	return names
}
