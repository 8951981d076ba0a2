package store

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
)

// keyThrottle holds the outbound throttle's state in the snapshot bucket,
// as JSON: a few timestamps per (peer, type), rewritten whole with each
// snapshot (the throttle's state is small: at most capacity timestamps per
// key, idle keys freed).
var keyThrottle = []byte("throttle")

// SaveThrottle stores the outbound throttle's state, replacing what was
// there.
func (db *DB) SaveThrottle(ctx context.Context, s limiter.ThrottleSnapshot) error {
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("save throttle: %w", err)
	}
	return db.update(ctx, "save throttle", func(tx *bbolt.Tx) error {
		sb, err := bucket(tx, bucketSnapshot)
		if err != nil {
			return err
		}
		return sb.Put(keyThrottle, v)
	})
}

// LoadThrottle returns the stored throttle state; ok is false when none was
// saved. A record that does not decode is reported as an error naming it
// (the daemon logs it and starts the throttle empty).
func (db *DB) LoadThrottle(ctx context.Context) (s limiter.ThrottleSnapshot, ok bool, err error) {
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
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("snapshot/throttle does not decode: %w", err)
		}
		return nil
	})
	return s, ok, err
}
