package store

import (
	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
)

// Hooks for the tests of package store_test.

// Bolt returns the bbolt handle, to damage or inspect records.
func (db *DB) Bolt() *bbolt.DB { return db.bolt }

// AppendEntryKey and AppendEntry are the entry codec, for fixtures.
func AppendEntryKey(dst []byte, group string, peer limiter.PeerKey) []byte {
	return appendEntryKey(dst, group, peer)
}

// AppendEntry is appendEntry.
func AppendEntry(dst []byte, e *limiter.EntrySnapshot) []byte { return appendEntry(dst, e) }
