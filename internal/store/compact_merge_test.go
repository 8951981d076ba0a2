package store_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
)

// mustCompactKeeps compacts db and checks that a load gives what it gave
// before, now without skipped records, and that the log is empty.
func mustCompactKeeps(t *testing.T, db *store.DB, what string) store.SaveStats {
	t.Helper()
	before, repBefore := mustLoad(t, db)
	st, err := db.Compact(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	after, rep := mustLoad(t, db)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: the load changed:\n got %+v\nwant %+v", what, after, before)
	}
	if rep.Skipped != 0 || rep.Entries != repBefore.Entries {
		t.Fatalf("%s: load report %+v after, %+v before", what, rep, repBefore)
	}
	if st.Written != len(before.Entries) || st.Skipped != repBefore.Skipped || st.LogBytes != 0 || st.LogRecords != 0 || st.Compact {
		t.Fatalf("%s: stats %+v (%d entries, %d skipped before)", what, st, len(before.Entries), repBefore.Skipped)
	}
	return st
}

// TestCompact: folding the log into the base changes nothing a load sees,
// with changes, deletions (of stored keys and others), entries deleted and
// created again and windows, across reopens; saves go on after it.
func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	c := newChurn(11, 4000)
	if _, err := db.SaveDelta(ctx, c.full(3000)); err != nil {
		t.Fatal(err)
	}
	mustCompactKeeps(t, db, "no log")
	var last limiter.Delta
	for round := range 3 {
		for range 8 {
			d, _, _ := c.delta(300)
			if _, err := db.SaveDelta(ctx, d); err != nil {
				t.Fatal(err)
			}
			last = d
		}
		mustCompactKeeps(t, db, "round")
		mustMatch(t, db, c.m, last, "after the compaction")
		if round == 1 {
			db.Close()
			db = MustOpenDBAt(t, path, store.Options{})
			mustMatch(t, db, c.m, last, "reopened")
		}
	}
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCompactDropsUndecodable: records a load skips are dropped, counted;
// the others kept.
func TestCompactDropsUndecodable(t *testing.T) {
	db := MustOpenDB(t)
	good := []limiter.EntrySnapshot{tokenEntry(peerAt("10.0.0.1"), "general", 1), tokenEntry(peerAt("10.0.0.2"), "general", 2), tokenEntry(peerAt("10.0.0.3"), "general", 3)}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: good}); err != nil {
		t.Fatal(err)
	}
	e7 := tokenEntry(peerAt("10.0.0.7"), "general", 7)
	val := func(e limiter.EntrySnapshot) []byte { return store.AppendEntry(nil, &e) }
	bad := store.RawBlob([]string{"general", "bad\x00name"},
		store.RawRecord(0, false, peerAt("10.0.0.7"), val(e7)),
		store.RawRecord(0, false, peerAt("10.0.0.8"), []byte{1, 0, 0x80}),
		store.RawRecord(5, false, peerAt("10.0.0.10"), val(e7)),
		store.RawRecord(1, false, peerAt("10.0.0.11"), val(e7)),
		store.RawRecord(0, true, peerAt("10.0.0.12"), nil),
	)
	broken := store.RawBlob([]string{"general"}, store.RawRecord(0, false, peerAt("10.0.0.13"), val(e7)))
	broken[1] = 2 // the header counts 2 records
	log1 := store.RawBlob([]string{"general"},
		store.RawRecord(0, true, peerAt("10.0.0.2"), nil),
		store.RawRecord(0, true, peerAt("10.0.0.5"), val(e7)), // a deletion with a value
	)
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("entry_base"))
		if err := b.Put(u64(2), bad); err != nil {
			return err
		}
		if err := b.Put(u64(3), broken); err != nil {
			return err
		}
		return tx.Bucket([]byte("entry_log")).Put(store.LogKey(1, 0), log1)
	})
	if err != nil {
		t.Fatal(err)
	}
	st := mustCompactKeeps(t, db, "bad records")
	if st.Skipped != 4+2+1 || st.Written != 3 {
		t.Fatalf("stats %+v, want 7 skipped, 3 written", st)
	}
}

// TestCompactUnsortedBase: a base out of key order (not written by
// limiterd) is compacted the slow way, to the same result.
func TestCompactUnsortedBase(t *testing.T) {
	db := MustOpenDB(t)
	a, b, c := tokenEntry(peerAt("10.0.0.1"), "general", 1), tokenEntry(peerAt("10.0.0.2"), "general", 2), windowEntry(peerAt("10.0.0.4"), "chunk")
	blob0 := store.RawBlob([]string{"general", "chunk"},
		store.RawRecord(0, false, b.Peer, store.AppendEntry(nil, &b)),
		store.RawRecord(1, false, c.Peer, store.AppendEntry(nil, &c)),
		store.RawRecord(0, false, a.Peer, store.AppendEntry(nil, &a)),
	)
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups()}); err != nil {
		t.Fatal(err)
	}
	err := db.Bolt().Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("entry_base")).Put(u64(1), blob0) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 2, Groups: groups(), Deleted: []limiter.EntryRef{{Peer: b.Peer, Group: "general"}}}); err != nil {
		t.Fatal(err)
	}
	mustCompactKeeps(t, db, "unsorted")
	mustCompactKeeps(t, db, "sorted now")
}

// TestCompactCancelled: a cancelled compaction changes nothing.
func TestCompactCancelled(t *testing.T) {
	db := MustOpenDB(t)
	c := newChurn(5, 500)
	if _, err := db.SaveDelta(ctx, c.full(400)); err != nil {
		t.Fatal(err)
	}
	d, _, _ := c.delta(100)
	if _, err := db.SaveDelta(ctx, d); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.Compact(cctx); err == nil {
		t.Fatal("a cancelled compaction succeeded")
	}
	mustMatch(t, db, c.m, d, "after a cancelled compaction")
	if st, err := db.Compact(ctx); err != nil || st.LogRecords != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	mustMatch(t, db, c.m, d, "after the compaction")
}
