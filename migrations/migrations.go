// Package migrations is the history of limiterd's bbolt schema: an ordered
// list of steps, each a function over one write transaction. The length of
// All is the schema version a database has once every step ran; the store
// runs the missing steps in order, one transaction per step together with
// the version bump, and refuses a database whose version is newer.
//
// A step, once released, never changes: it describes how databases written
// by an older limiterd are brought forward. Each step therefore names its
// buckets and keys itself (as they were at that version) and decodes old
// values with its own frozen types, never with the store's current codecs.
package migrations

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// Migration is one step of the schema. Up runs inside the write
// transaction that also records the new version; an error rolls both back.
type Migration struct {
	// Name says what the step does, for logs.
	Name string
	Up   func(tx *bbolt.Tx) error
}

// All is every step, oldest first: its length is the current schema
// version. Append only.
var All = []Migration{
	{Name: "create buckets", Up: v1CreateBuckets},
	{Name: "split the live state into one key per override and exemption", Up: v2SplitLive},
}

// The buckets of version 1.
var v1Buckets = []string{"meta", "live", "audit", "entries", "groups", "snapshot"}

// v1CreateBuckets creates the buckets of version 1. In version 1 the
// operators' live state was one JSON document, LiveState, under the key
// "state" of the "live" bucket, rewritten whole on every edit.
func v1CreateBuckets(tx *bbolt.Tx) error {
	for _, name := range v1Buckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// v1LiveState is the JSON document of version 1 (limiter.LiveState as it
// was then), kept raw where version 2 stores it unchanged.
type v1LiveState struct {
	Overrides  map[string]json.RawMessage `json:"overrides"`
	Exemptions []json.RawMessage          `json:"exemptions"`
	Disabled   bool                       `json:"disabled"`
}

// v2SplitLive moves the live state of version 1 to one key per item, so an
// edit writes only what it changes:
//
//	overrides/<group>          JSON object of the group's overridden keys
//	exemptions/<uint64 BE>     JSON Exemption; keys from NextSequence, so
//	                           iteration order is the order of addition
//	live/"disabled"            JSON boolean
//
// and deletes live/"state".
func v2SplitLive(tx *bbolt.Tx) error {
	overrides, err := tx.CreateBucketIfNotExists([]byte("overrides"))
	if err != nil {
		return fmt.Errorf("bucket overrides: %w", err)
	}
	exemptions, err := tx.CreateBucketIfNotExists([]byte("exemptions"))
	if err != nil {
		return fmt.Errorf("bucket exemptions: %w", err)
	}
	live := tx.Bucket([]byte("live"))
	if live == nil {
		return fmt.Errorf("bucket live is missing")
	}
	disabled := false
	if raw := live.Get([]byte("state")); raw != nil {
		var st v1LiveState
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("live/state does not decode: %w", err)
		}
		for group, o := range st.Overrides {
			if group == "" {
				return fmt.Errorf("live/state: an override has an empty group name")
			}
			if string(o) == "null" {
				continue
			}
			if err := overrides.Put([]byte(group), o); err != nil {
				return fmt.Errorf("overrides/%s: %w", group, err)
			}
		}
		for _, e := range st.Exemptions {
			seq, err := exemptions.NextSequence()
			if err != nil {
				return err
			}
			if err := exemptions.Put(binary.BigEndian.AppendUint64(nil, seq), e); err != nil {
				return fmt.Errorf("exemptions: %w", err)
			}
		}
		disabled = st.Disabled
		if err := live.Delete([]byte("state")); err != nil {
			return err
		}
	}
	v, _ := json.Marshal(disabled)
	return live.Put([]byte("disabled"), v)
}
