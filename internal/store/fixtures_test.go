package store_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/migrations"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Fixtures are databases as an older limiterd wrote them, checked in under
// testdata/schema-v<N>.db, one per schema version before the current one.
// Regenerate (a released version's fixture should never need it) with
//
//	LIMITERD_WRITE_FIXTURES=1 go test ./store -run TestWriteFixtures
//
// (LIMITERD_WRITE_FIXTURE=<N> as well writes version N's only.)

// fixture is what every fixture holds, in its own version's layout.
type fixture struct {
	live     live.LiveState
	audit    []live.AuditEntry // oldest first, IDs from 1
	snapshot limiter.Snapshot  // entries in key order
}

func fixtureData() fixture {
	f := fixture{
		live: live.LiveState{
			Overrides: map[string]live.Override{
				"chunk":   {"leaky_limit": int64(9000), "mode": "dry_run"},
				"metrics": {"concurrency_limit": int64(1), "is_manual_reduction_disabled": true},
			},
			Exemptions: []live.Exemption{
				{Kind: live.ExemptPeer, Value: "10.0.0.0/8", Note: "office"},
				{Kind: live.DenyPeer, Value: "203.0.113.7"},
				{Kind: live.ExemptPath, Value: "/health/**"},
			},
			Disabled: true,
		},
		snapshot: limiter.Snapshot{
			TakenAt: t0.UnixMilli(), Enabled: false,
			Groups: groups(),
			Entries: sortEntries([]limiter.EntrySnapshot{
				tokenEntry(peerAt("198.51.100.1"), "general", 17),
				tokenEntry(peerAt("2001:db8:5::1"), "general", 450),
				windowEntry(peerAt("198.51.100.1"), "chunk"),
				tokenEntry(peer.OpaqueKey("pipe"), "general", 1),
			}),
		},
	}
	for i, act := range []string{"group.patch", "group.patch", "exemption.add", "exemption.add", "exemption.add", "limiter.switch", "peer.forget"} {
		a := audit(act, fmt.Sprint("target-", i), map[string]any{"n": json.Number(strconv.Itoa(i))}, "new")
		a.ID = uint64(i) + 1
		f.audit = append(f.audit, a)
	}
	return f
}

// writeV2 writes the fixture in the layout of version 2: one key per
// override and exemption.
func writeV2(tx *bbolt.Tx, f fixture) error {
	// Version 2: one key per override and exemption.
	ob := tx.Bucket([]byte("overrides"))
	for g, o := range f.live.Overrides {
		v, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if err := ob.Put([]byte(g), v); err != nil {
			return err
		}
	}
	eb := tx.Bucket([]byte("exemptions"))
	for _, e := range f.live.Exemptions {
		seq, _ := eb.NextSequence()
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := eb.Put(binary.BigEndian.AppendUint64(nil, seq), v); err != nil {
			return err
		}
	}
	v, _ := json.Marshal(f.live.Disabled)
	if err := tx.Bucket([]byte("live")).Put([]byte("disabled"), v); err != nil {
		return err
	}
	return writeCommon(tx, f)
}

// fixtureWriters write the fixture of each old version with that version's
// layout, frozen: never change one once its version is released.
var fixtureWriters = map[int]func(tx *bbolt.Tx, f fixture) error{
	1: func(tx *bbolt.Tx, f fixture) error {
		// Version 1: the live state was one JSON document, live/state.
		v, err := json.Marshal(f.live)
		if err != nil {
			return err
		}
		if err := tx.Bucket([]byte("live")).Put([]byte("state"), v); err != nil {
			return err
		}
		return writeCommon(tx, f)
	},
	2: writeV2,
	3: writeV3,
	// Version 4 added the sessions bucket (empty here): the rest is
	// version 3's.
	4: writeV3,
	// Version 5 added the (empty) offenders bucket: the data is still
	// version 3's, entry values of encoding 1 (version 6 made them
	// encoding 2).
	5: writeV3,
	// Version 6 made the entry values encoding 2, by its own step (frozen);
	// version 7 added the (empty) live_records bucket.
	6: func(tx *bbolt.Tx, f fixture) error {
		if err := writeV3(tx, f); err != nil {
			return err
		}
		return migrations.All[5].Up(tx)
	},
}

// writeV3 writes the fixture in the layout of version 3: the entries
// packed into entry_base. Written as version 2 wrote them, then packed by
// the version 3 step itself (frozen, as every released step).
func writeV3(tx *bbolt.Tx, f fixture) error {
	for _, name := range []string{"entry_base", "entry_log"} {
		if err := tx.DeleteBucket([]byte(name)); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucket([]byte("entries")); err != nil {
		return err
	}
	if err := writeV2(tx, f); err != nil {
		return err
	}
	return migrations.All[2].Up(tx)
}

// appendEntryV1 is the entry value encoding 1, which schema versions 1 to 5
// stored (migration 6 made it encoding 2), frozen here for the fixtures:
//
//	byte version (1), byte flags (tokens 1, token fields 2, window 4,
//	rejected by concurrency 8, by rate limit 16), varint LastSeen,
//	uvarint Requests, then as the flags say: uvarint RejectedConcurrency,
//	uvarint RejectedRateLimit, varint Tokens and LeakyTick, uvarint n,
//	varint CleanupTick and n varint timestamps (the first minus
//	LastSeen·1000, then each minus the one before).
func appendEntryV1(dst []byte, e *limiter.EntrySnapshot) []byte {
	var flags byte
	if e.InTokens {
		flags |= 1
	}
	if e.InTokens || e.Tokens != 0 || e.LeakyTick != 0 {
		flags |= 2
	}
	if len(e.Window) > 0 || e.CleanupTick != 0 {
		flags |= 4
	}
	if e.RejectedConcurrency != 0 {
		flags |= 8
	}
	if e.RejectedRateLimit != 0 {
		flags |= 16
	}
	dst = append(dst, 1, flags)
	dst = binary.AppendVarint(dst, e.LastSeen)
	dst = binary.AppendUvarint(dst, e.Requests)
	if flags&8 != 0 {
		dst = binary.AppendUvarint(dst, e.RejectedConcurrency)
	}
	if flags&16 != 0 {
		dst = binary.AppendUvarint(dst, e.RejectedRateLimit)
	}
	if flags&2 != 0 {
		dst = binary.AppendVarint(dst, e.Tokens)
		dst = binary.AppendVarint(dst, e.LeakyTick)
	}
	if flags&4 != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Window)))
		dst = binary.AppendVarint(dst, e.CleanupTick)
		prev := e.LastSeen * 1000
		for _, t := range e.Window {
			dst = binary.AppendVarint(dst, t-prev)
			prev = t
		}
	}
	return dst
}

// v2EntryKey is the key of an entry in versions 1 and 2: group, 0x00, the
// 17 bytes of the peer key.
func v2EntryKey(group string, peer peer.Key) []byte {
	k := append([]byte(group), 0)
	return append(k, peer[:]...)
}

// writeCommon writes the audit and snapshot buckets, unchanged from
// version 1 to 5 (the entry values of encoding 1: appendEntryV1; the
// group records without an algorithm).
func writeCommon(tx *bbolt.Tx, f fixture) error {
	ab := tx.Bucket([]byte("audit"))
	for _, a := range f.audit {
		id, _ := ab.NextSequence()
		a.ID = id
		v, _ := json.Marshal(a)
		if err := ab.Put(binary.BigEndian.AppendUint64(nil, id), v); err != nil {
			return err
		}
	}
	eb := tx.Bucket([]byte("entries"))
	for i := range f.snapshot.Entries {
		e := &f.snapshot.Entries[i]
		if err := eb.Put(v2EntryKey(e.Group, e.Peer), appendEntryV1(nil, e)); err != nil {
			return err
		}
	}
	gb := tx.Bucket([]byte("groups"))
	for _, g := range f.snapshot.Groups {
		// The group record as versions 1 to 5 wrote it (frozen: the
		// algorithm and its limits came with version 6).
		v, _ := json.Marshal(struct {
			Name    string           `json:"name"`
			Leaky   limiter.Schedule `json:"leaky"`
			Cleanup limiter.Schedule `json:"cleanup"`
		}{g.Name, g.Leaky, g.Cleanup})
		if err := gb.Put([]byte(g.Name), v); err != nil {
			return err
		}
	}
	h, _ := json.Marshal(map[string]any{"taken_at_ms": f.snapshot.TakenAt, "enabled": f.snapshot.Enabled})
	return tx.Bucket([]byte("snapshot")).Put([]byte("header"), h)
}

// writeFixture writes testdata/schema-v<version>.db.
func writeFixture(path string, version int) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	for i := range version {
		err := b.Update(func(tx *bbolt.Tx) error {
			if err := migrations.All[i].Up(tx); err != nil {
				return err
			}
			return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, uint64(i+1)))
		})
		if err != nil {
			return err
		}
	}
	return b.Update(func(tx *bbolt.Tx) error { return fixtureWriters[version](tx, fixtureData()) })
}

func TestWriteFixtures(t *testing.T) {
	if os.Getenv("LIMITERD_WRITE_FIXTURES") != "1" {
		t.Skip("set LIMITERD_WRITE_FIXTURES=1 to rewrite testdata/schema-v*.db")
	}
	for v := range fixtureWriters {
		if only := os.Getenv("LIMITERD_WRITE_FIXTURE"); only != "" && only != strconv.Itoa(v) {
			continue
		}
		path := filepath.Join("testdata", fmt.Sprintf("schema-v%d.db", v))
		if err := writeFixture(path, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Logf("wrote %s", path)
	}
}

// Every older schema has its fixture, and each opens, migrates to the
// current version and still holds all its data.
func TestMigrateFixtures(t *testing.T) {
	paths, _ := filepath.Glob("testdata/schema-v*.db")
	have := map[int]string{}
	for _, p := range paths {
		m := regexp.MustCompile(`schema-v(\d+)\.db$`).FindStringSubmatch(p)
		v, _ := strconv.Atoi(m[1])
		have[v] = p
	}
	for v := 1; v < len(migrations.All); v++ {
		if have[v] == "" {
			t.Errorf("no fixture for schema version %d: write its writer and run TestWriteFixtures", v)
		}
	}
	want := fixtureData()
	for v, src := range have {
		t.Run(filepath.Base(src), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limiterd.db")
			writeFile(t, path, readFile(t, src))
			var logs bytes.Buffer
			db := MustOpenDBAt(t, path, store.Options{Logger: logTo(&logs)})
			if err := db.Check(ctx); err != nil {
				t.Fatalf("Check after migrating from %d: %v", v, err)
			}
			if n := bytes.Count(logs.Bytes(), []byte("database migrated")); n != len(migrations.All)-v {
				t.Errorf("%d migrations logged, want %d:\n%s", n, len(migrations.All)-v, logs.String())
			}
			live, err := db.LoadLive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(live, want.live) {
				t.Errorf("live state:\n got %#v\nwant %#v", live, want.live)
			}
			audit, err := db.Audit(ctx, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			slices.Reverse(audit)
			mustEqualJSON(t, "audit", audit, want.audit)
			snap, rep, err := db.LoadSnapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Skipped != 0 || !reflect.DeepEqual(snap, want.snapshot) {
				t.Errorf("snapshot (%+v):\n got %+v\nwant %+v", rep, snap, want.snapshot)
			}
			// The migrated database takes writes, ids following on.
			if err := db.RemoveExemption(ctx, want.live.Exemptions[0], audit[0]); err != nil {
				t.Fatal(err)
			}
			if err := db.AddExemption(ctx, want.live.Exemptions[0], audit[0]); err != nil {
				t.Fatal(err)
			}
			live, _ = db.LoadLive(ctx)
			if got := live.Exemptions; len(got) != 3 || got[2] != want.live.Exemptions[0] {
				t.Errorf("exemptions after remove and add: %+v", got)
			}
			if last, _ := db.Audit(ctx, 1, 0); last[0].ID != uint64(len(want.audit)+2) {
				t.Errorf("next audit id %d, want %d", last[0].ID, len(want.audit)+2)
			}
		})
	}
}
