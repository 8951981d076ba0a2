package store

import (
	"context"
	"encoding/binary"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Hooks for the tests of package store_test.

// Bolt returns the bbolt handle, to damage or inspect records.
func (db *DB) Bolt() *bbolt.DB { return db.bolt }

// AppendEntry is appendEntry, the entry value codec, for fixtures.
func AppendEntry(dst []byte, e *limiter.EntrySnapshot) []byte { return appendEntry(dst, e) }

// RawRecord returns a blob record, unframed: group index g, a deletion
// when del, then value as it is.
func RawRecord(g int, del bool, p peer.Key, value []byte) []byte {
	n := 16
	for n > 0 && p[n-1] == 0 {
		n--
	}
	gv := uint64(g) << 1
	if del {
		gv |= 1
	}
	b := binary.AppendUvarint(nil, gv)
	b = append(b, byte(n))
	b = append(b, p[:n]...)
	b = append(b, p[16])
	return append(b, value...)
}

// RawBlob returns a blob (format 1) of names and records, each framed.
func RawBlob(names []string, records ...[]byte) []byte {
	b := []byte{blobV1}
	b = binary.AppendUvarint(b, uint64(len(records)))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	for _, r := range records {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return b
}

// LogKey is the key of part part of log record seq.
func LogKey(seq uint64, part int) []byte { return logKey(seq, part) }

// BlobTarget is the size blobs are filled to.
const BlobTarget = blobTarget

// RecordMany appends n audit entries in one transaction (Record commits
// each), for tests of a large log.
func (db *DB) RecordMany(ctx context.Context, n int) error {
	return db.update(ctx, "record audit entries", func(tx *bbolt.Tx) error {
		for range n {
			if err := db.appendAudit(tx, live.AuditEntry{Actor: "test", Action: "peer.forget", Target: "10.0.0.1"}); err != nil {
				return err
			}
		}
		return nil
	})
}
