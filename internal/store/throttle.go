package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// keyThrottle holds the outbound throttle's state in the snapshot bucket,
// as JSON: a few timestamps per (peer, type), rewritten whole with each
// snapshot (the throttle's state is small: at most capacity timestamps per
// key, idle keys freed).
var keyThrottle = []byte("throttle")

// SaveThrottle stores the outbound throttle's state, the JSON it wrote
// (throttle.MarshalSnapshot), replacing what was there.
func (db *DB) SaveThrottle(ctx context.Context, v []byte) error {
	if !json.Valid(v) {
		return fmt.Errorf("save throttle: not JSON")
	}
	return db.update(ctx, "save throttle", func(tx *bbolt.Tx) error {
		sb, err := bucket(tx, bucketSnapshot)
		if err != nil {
			return err
		}
		return sb.Put(keyThrottle, v)
	})
}

// LoadThrottle returns the stored throttle state, as the throttle wrote
// it; ok is false when none was saved. (The throttle decodes it, and the
// daemon logs one that does not and starts the throttle empty.)
func (db *DB) LoadThrottle(ctx context.Context) (s []byte, ok bool, err error) {
	err = db.view(ctx, "load throttle", func(tx *bbolt.Tx) error {
		sb, err := bucket(tx, bucketSnapshot)
		if err != nil {
			return err
		}
		v := sb.Get(keyThrottle)
		if v == nil {
			return nil
		}
		ok = true
		s = bytes.Clone(v)
		return nil
	})
	return s, ok, err
}
