package store

import (
	"context"

	"go.etcd.io/bbolt"
)

// Dashboard sessions: the store keeps them so that a restart logs nobody
// out. Keys are what the dashboard chooses (the SHA-256 of a session id,
// never the id) and values are opaque here; the dashboard drops expired
// ones.

// PutSession stores (or replaces) the session under key, durably.
func (db *DB) PutSession(ctx context.Context, key, value []byte) error {
	return db.update(ctx, "put session", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		return b.Put(key, value)
	})
}

// DeleteSession deletes the session under key (none there is no error).
func (db *DB) DeleteSession(ctx context.Context, key []byte) error {
	return db.update(ctx, "delete session", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		return b.Delete(key)
	})
}

// Sessions returns every stored session, by key.
func (db *DB) Sessions(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := db.view(ctx, "sessions", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = append([]byte(nil), v...) // bbolt's memory is valid only in the transaction
			return nil
		})
	})
	return out, err
}
