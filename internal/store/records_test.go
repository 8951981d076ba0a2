package store_test

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
)

// stamper is a live.Recorder numbering its stamps, which remembers what
// was committed.
type stamper struct {
	mu        sync.Mutex
	n         int
	committed map[string]live.Record
}

func (s *stamper) Stamp(field, value string, removed bool) (live.Record, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	st := stampN(s.n)
	return live.Record{Stamp: st, Value: value, Removed: removed}, st
}

func (s *stamper) Stamped(field string, rec live.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed == nil {
		s.committed = map[string]live.Record{}
	}
	s.committed[field] = rec
}

// stampN is the stamp of the n-th millisecond, as the Replicator writes
// stamps.
func stampN(n int) string { return fmt.Sprintf("%013d.%06d.a", n, 0) }

// Every live edit keeps its field's record in its own transaction, as
// live.EncodeFields names and writes the field; the Recorder hears of it
// once committed; the records and the clock come back from the file.
func TestRecordsKeptWithEdits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	st := &stamper{}
	db.SetRecorder(st)
	e := live.Exemption{Kind: live.DenyPeer, Value: "192.0.2.7", Note: "n"}
	steps := []func() error{
		func() error {
			return db.SetOverride(ctx, "general", live.Override{"leaky_limit": 10}, audit("group.patch", "general", nil, nil))
		},
		func() error { return db.AddExemption(ctx, e, audit("exemption.add", "deny_peer", nil, e.Value)) },
		func() error { return db.SetDisabled(ctx, true, audit("limiter.switch", "global", "on", "off")) },
		func() error {
			return db.RemoveExemption(ctx, e, audit("exemption.remove", "deny_peer", e.Value, nil))
		},
		func() error {
			return db.SetOverride(ctx, "api", live.Override{"leaky_limit": 3}, audit("group.patch", "api", nil, nil))
		},
		func() error { return db.SetOverride(ctx, "api", nil, audit("group.reset", "api", nil, nil)) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
	exField, exValue := live.ExemptionField(e)
	want := map[string]live.Record{
		"group:general": {Stamp: stampN(1), Value: `{"leaky_limit":10}`},
		exField:         {Stamp: stampN(4), Removed: true},
		"switch":        {Stamp: stampN(3), Value: "off"},
		"group:api":     {Stamp: stampN(6), Removed: true},
	}
	if exValue == "" {
		t.Fatal("no exemption value")
	}
	recs, clock, err := db.LoadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(recs, want) {
		t.Errorf("records:\n got %v\nwant %v", recs, want)
	}
	if !maps.Equal(st.committed, want) {
		t.Errorf("committed:\n got %v\nwant %v", st.committed, want)
	}
	if clock != stampN(6) {
		t.Errorf("clock %q, want %q", clock, stampN(6))
	}

	// Without a Recorder (limiterd without cluster mode) an edit drops
	// its field's record: the field's age is then unknown.
	db.SetRecorder(nil)
	if err := db.SetDisabled(ctx, false, audit("limiter.switch", "global", "off", "on")); err != nil {
		t.Fatal(err)
	}
	recs, _, _ = db.LoadRecords(ctx)
	if _, ok := recs["switch"]; ok || len(recs) != 3 {
		t.Errorf("after an edit without a Recorder: %v", recs)
	}
}

// SaveRecords keeps a record only over an older one, and the clock only
// forward; a failed edit keeps no record and the Recorder hears nothing.
func TestSaveRecordsNewerOnly(t *testing.T) {
	db := MustOpenDB(t)
	rec := func(n int, v string) live.Record { return live.Record{Stamp: stampN(n), Value: v} }
	if err := db.SaveRecords(ctx, map[string]live.Record{"group:a": rec(5, "{}"), "group:b": rec(2, "{}")}, stampN(5)); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveRecords(ctx, map[string]live.Record{"group:a": rec(3, `{"x":1}`), "group:b": rec(7, `{"y":1}`)}, stampN(3)); err != nil {
		t.Fatal(err)
	}
	recs, clock, err := db.LoadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]live.Record{"group:a": rec(5, "{}"), "group:b": rec(7, `{"y":1}`)}
	if !maps.Equal(recs, want) || clock != stampN(5) {
		t.Errorf("got %v %q, want %v %q", recs, clock, want, stampN(5))
	}
	if err := db.SaveRecords(ctx, map[string]live.Record{"group:c": {Stamp: "not a\nstamp"}}, ""); err == nil {
		t.Error("a record with a bad stamp was saved")
	}

	st := &stamper{}
	db.SetRecorder(st)
	if err := db.SetOverride(ctx, "", live.Override{"leaky_limit": 1}, audit("group.patch", "", nil, nil)); err == nil {
		t.Fatal("empty group accepted")
	}
	if len(st.committed) != 0 {
		t.Errorf("a failed edit was committed: %v", st.committed)
	}
}

// A record or a clock that does not decode is logged naming its key and
// left out; the other records load, and the start goes on.
func TestLoadRecordsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	var logs bytes.Buffer
	db := MustOpenDBAt(t, path, store.Options{Logger: logTo(&logs)})
	good := live.Record{Stamp: stampN(1), Value: "off"}
	if err := db.SaveRecords(ctx, map[string]live.Record{"switch": good, "group:a": {Stamp: stampN(2), Removed: true}}, stampN(2)); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"group:a":               "{not json",
		"group:b":               `{"stamp":""}`,
		"exemption:deny_peer:x": `{"stamp":"0000000000001.000000.a","value":"v","removed":true}`,
		"group:c":               `{"stamp":"0000000000001.000000.a"} trailing`,
	}
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("live_records"))
		for k, v := range bad {
			if err := b.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("live")).Put([]byte("record_clock"), []byte("\x00\x01"))
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, clock, err := db.LoadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(recs, map[string]live.Record{"switch": good}) || clock != "" {
		t.Errorf("got %v %q", recs, clock)
	}
	for k := range bad {
		if !strings.Contains(logs.String(), "field="+k+" ") {
			t.Errorf("the log does not name %q:\n%s", k, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "live/record_clock") {
		t.Errorf("the log does not name the clock:\n%s", logs.String())
	}
	// A save over a record that does not decode replaces it.
	if err := db.SaveRecords(ctx, map[string]live.Record{"group:a": {Stamp: stampN(1), Value: "{}"}}, ""); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ = db.LoadRecords(ctx); recs["group:a"].Value != "{}" {
		t.Errorf("the undecodable record stayed: %v", recs)
	}
}

// An import replaces the live state: its fields are of unknown age, so the
// records go; the clock stays.
func TestImportClearsRecords(t *testing.T) {
	db := MustOpenDB(t)
	if err := db.SaveRecords(ctx, map[string]live.Record{"switch": {Stamp: stampN(4), Value: "off"}}, stampN(4)); err != nil {
		t.Fatal(err)
	}
	var doc bytes.Buffer
	if err := db.Export(ctx, &doc); err != nil {
		t.Fatal(err)
	}
	if err := db.Import(ctx, &doc); err != nil {
		t.Fatal(err)
	}
	recs, clock, err := db.LoadRecords(ctx)
	if err != nil || len(recs) != 0 || clock != stampN(4) {
		t.Errorf("after an import: %v %q %v", recs, clock, err)
	}
	// A database without its records bucket is refused, as any missing one.
	err = db.Bolt().Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("live_records")) })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.LoadRecords(ctx); err == nil || !strings.Contains(err.Error(), "live_records") {
		t.Errorf("LoadRecords without the bucket: %v", err)
	}
	db.Bolt().Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("live_records")); return err })
}

// BenchmarkLoadRecords100k: the start's read of 100 000 tombstones of
// IPv6 deny entries (the records a fleet whose automation denied and
// expired that many distinct /64s keeps), and what one costs on disk.
func BenchmarkLoadRecords100k(b *testing.B) {
	db := MustOpenDB(b)
	db.Bolt().NoSync = true
	before := db.Size()
	recs := map[string]live.Record{}
	for i := range 100_000 {
		f, _ := live.ExemptionField(live.Exemption{Kind: live.DenyPeer, Value: fmt.Sprintf("2001:db8:%x:%x::/64", i>>16, i&0xffff)})
		recs[f] = live.Record{Stamp: fmt.Sprintf("%013d.%06d.%032x", 1_700_000_000_000+i, 0, i), Removed: true}
	}
	if err := db.SaveRecords(ctx, recs, ""); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, _, err := db.LoadRecords(ctx)
		if err != nil || len(got) != len(recs) {
			b.Fatal(len(got), err)
		}
	}
	b.ReportMetric(float64(db.Size()-before)/1e5, "file-B/record")
}
