package store_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/store"
)

func groups() []limiter.GroupSnapshot {
	return []limiter.GroupSnapshot{
		{Name: "chunk", Leaky: sched(30000), Cleanup: sched(120000)},
		{Name: "general", Leaky: sched(30000), Cleanup: sched(120000)},
	}
}

// sortEntries orders entries as the store returns them: by group, then
// peer key bytes.
func sortEntries(es []limiter.EntrySnapshot) []limiter.EntrySnapshot {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b limiter.EntrySnapshot) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return bytes.Compare(a.Peer[:], b.Peer[:])
	})
	return es
}

func mustLoad(t *testing.T, db *store.DB) (limiter.Snapshot, store.LoadReport) {
	t.Helper()
	snap, rep, err := db.LoadSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap, rep
}

func TestLoadSnapshotEmpty(t *testing.T) {
	db := MustOpenDB(t)
	snap, rep := mustLoad(t, db)
	if snap.TakenAt != 0 || len(snap.Entries) != 0 || len(snap.Groups) != 0 || rep != (store.LoadReport{}) {
		t.Errorf("LoadSnapshot of a new database = %+v, %+v", snap, rep)
	}
}

func TestSaveDelta(t *testing.T) {
	db := MustOpenDB(t)
	a, b, c, d := peer("10.0.0.1"), peer("2001:db8:1::7"), limiter.OpaqueKey("unix:@"), peer("192.0.2.9")
	ea, eb, ec := tokenEntry(a, "general", 5), windowEntry(b, "chunk"), tokenEntry(c, "general", 450)
	eaChunk := windowEntry(a, "chunk")

	// Full, keys out of order.
	st, err := db.SaveDelta(ctx, limiter.Delta{
		Full: true, TakenAt: 1000, Enabled: true, Groups: groups(),
		Changed: []limiter.EntrySnapshot{ec, eb, ea, eaChunk},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != 4 || st.Deleted != 0 || st.Bytes != db.Size() || st.Bytes == 0 {
		t.Errorf("SaveStats = %+v (size %d)", st, db.Size())
	}
	snap, rep := mustLoad(t, db)
	want := limiter.Snapshot{TakenAt: 1000, Enabled: true, Groups: groups(), Entries: sortEntries([]limiter.EntrySnapshot{ea, eb, ec, eaChunk})}
	if !reflect.DeepEqual(snap, want) || rep != (store.LoadReport{Entries: 4}) {
		t.Errorf("after full:\n got %+v %+v\nwant %+v", snap, rep, want)
	}

	// Incremental: a changed, c deleted, d new, a deleted-then-recreated in
	// chunk (in Deleted and in Changed: it ends up stored), one deletion of
	// an entry never stored; one group left the config.
	ea.Tokens, ea.Requests = 6, 99
	eaChunk2 := tokenEntry(a, "chunk", 1)
	ed := tokenEntry(d, "general", 2)
	st, err = db.SaveDelta(ctx, limiter.Delta{
		TakenAt: 2000, Enabled: false, Groups: groups()[1:],
		Changed: []limiter.EntrySnapshot{ed, eaChunk2, ea},
		Deleted: []limiter.EntryRef{{Peer: c, Group: "general"}, {Peer: a, Group: "chunk"}, {Peer: d, Group: "chunk"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != 3 || st.Deleted != 2 {
		t.Errorf("SaveStats = %+v, want 3 written, 2 deleted", st)
	}
	snap, rep = mustLoad(t, db)
	want = limiter.Snapshot{TakenAt: 2000, Enabled: false, Groups: groups()[1:], Entries: sortEntries([]limiter.EntrySnapshot{ea, eb, ed, eaChunk2})}
	if !reflect.DeepEqual(snap, want) || rep.Entries != 4 {
		t.Errorf("after incremental:\n got %+v\nwant %+v", snap, want)
	}

	// Two changes of one entry in one delta: the later wins.
	ea2 := ea
	ea2.Tokens = 100
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 2500, Groups: groups(), Changed: []limiter.EntrySnapshot{ea, ea2}}); err != nil {
		t.Fatal(err)
	}
	snap, _ = mustLoad(t, db)
	if i := slices.IndexFunc(snap.Entries, func(e limiter.EntrySnapshot) bool { return e.Peer == a && e.Group == "general" }); i < 0 || snap.Entries[i].Tokens != 100 {
		t.Errorf("two changes of one entry: %+v", snap.Entries)
	}

	// Full again replaces everything.
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 3000, Enabled: true, Groups: groups(), Changed: []limiter.EntrySnapshot{ec}}); err != nil {
		t.Fatal(err)
	}
	snap, _ = mustLoad(t, db)
	want = limiter.Snapshot{TakenAt: 3000, Enabled: true, Groups: groups(), Entries: []limiter.EntrySnapshot{ec}}
	if !reflect.DeepEqual(snap, want) {
		t.Errorf("after second full:\n got %+v\nwant %+v", snap, want)
	}

	// A full delta with nothing empties the entries.
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 4000, Groups: groups()}); err != nil {
		t.Fatal(err)
	}
	if snap, _ = mustLoad(t, db); len(snap.Entries) != 0 || snap.TakenAt != 4000 {
		t.Errorf("after an empty full: %+v", snap)
	}
}

func TestSaveDeltaRefusesBadNames(t *testing.T) {
	db := MustOpenDB(t)
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 1, Changed: []limiter.EntrySnapshot{tokenEntry(peer("10.0.0.1"), "gen\x00eral", 1)}}); err == nil {
		t.Error("a group name with a NUL: no error")
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 1, Changed: []limiter.EntrySnapshot{tokenEntry(peer("10.0.0.1"), "", 1)}}); err == nil {
		t.Error("an empty group name: no error")
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 1, Groups: []limiter.GroupSnapshot{{}}}); err == nil {
		t.Error("an unnamed group: no error")
	}
	if snap, _ := mustLoad(t, db); snap.TakenAt != 0 {
		t.Error("a refused delta was partly stored")
	}
}

// The snapshot goes through the limiter and back: what the store returns
// restores the same state.
func TestSaveDeltaFromLimiter(t *testing.T) {
	groupsCfg := limiter.ArweaveGroups()
	gen := groupsCfg["general"]
	gen.SlidingWindowLimit = 2
	groupsCfg["general"] = gen
	lim, err := limiter.New(t0, limiter.Config{Groups: groupsCfg, IPv6Prefix: 64, MaxTracked: 1000})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	for i := range 50 {
		p, err := lim.ParsePeer(fmt.Sprintf("10.1.0.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range i%5 + 1 {
			dec := lim.Decide(t0.Add(time.Duration(j)*time.Millisecond), p, g)
			dec.Release()
		}
	}
	db := MustOpenDB(t)
	if _, err := db.SaveDelta(ctx, lim.SnapshotDelta(t0, true)); err != nil {
		t.Fatal(err)
	}
	snap, rep := mustLoad(t, db)
	want := lim.Snapshot(t0)
	want.Entries = sortEntries(want.Entries)
	if rep.Entries != 50 || !reflect.DeepEqual(snap, want) {
		t.Errorf("stored snapshot differs from the limiter's:\n got %+v\nwant %+v", snap, want)
	}
}

func TestLoadSnapshotSkipsUndecodable(t *testing.T) {
	var logs bytes.Buffer
	path := t.TempDir() + "/limiterd.db"
	db := MustOpenDBAt(t, path, store.Options{Logger: logTo(&logs)})
	good := []limiter.EntrySnapshot{tokenEntry(peer("10.0.0.1"), "general", 1), tokenEntry(peer("10.0.0.2"), "general", 2), tokenEntry(peer("10.0.0.3"), "general", 3)}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: good}); err != nil {
		t.Fatal(err)
	}
	badValue := store.AppendEntryKey(nil, "general", peer("10.0.0.9"))
	badKey := []byte("no-separator")
	newVersion := store.AppendEntryKey(nil, "general", peer("10.0.0.8"))
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("entries"))
		if err := b.Put(badValue, []byte{1, 0, 0x80}); err != nil { // truncated varint
			return err
		}
		if err := b.Put(badKey, store.AppendEntry(nil, &good[0])); err != nil {
			return err
		}
		if err := b.Put(newVersion, []byte{9, 0, 0, 0}); err != nil { // a future encoding
			return err
		}
		return tx.Bucket([]byte("groups")).Put([]byte("chunk"), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, rep := mustLoad(t, db)
	if rep != (store.LoadReport{Entries: 3, Skipped: 3}) {
		t.Errorf("report %+v, want 3 entries, 3 skipped", rep)
	}
	if !reflect.DeepEqual(snap.Entries, good) {
		t.Errorf("entries %+v, want %+v", snap.Entries, good)
	}
	if !reflect.DeepEqual(snap.Groups, groups()[1:]) {
		t.Errorf("groups %+v: the undecodable one should be skipped", snap.Groups)
	}
	for _, k := range [][]byte{badValue, badKey, newVersion, []byte("chunk")} {
		if !strings.Contains(logs.String(), hex.EncodeToString(k)) {
			t.Errorf("log does not name key %x:\n%s", k, logs.String())
		}
	}
}

// A full delta leaves the database holding exactly its entries, writing
// only what differs when little does.
func TestSaveDeltaFullDiff(t *testing.T) {
	db := MustOpenDB(t)
	var es []limiter.EntrySnapshot
	for i := range 3000 {
		es = append(es, tokenEntry(limiter.KeyFromAddr(ipv4(uint32(i*7919)), 64), []string{"general", "chunk"}[i%2], int64(i%400+1)))
	}
	save := func(entries []limiter.EntrySnapshot) store.SaveStats {
		t.Helper()
		st, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: entries})
		if err != nil {
			t.Fatal(err)
		}
		snap, _ := mustLoad(t, db)
		// The last change of a key wins.
		want := map[string]limiter.EntrySnapshot{}
		for _, e := range entries {
			want[e.Group+e.Peer.String()] = e
		}
		if len(snap.Entries) != len(want) {
			t.Fatalf("%d entries stored, want %d", len(snap.Entries), len(want))
		}
		for _, e := range snap.Entries {
			if !reflect.DeepEqual(e, want[e.Group+e.Peer.String()]) {
				t.Fatalf("stored %+v, want %+v", e, want[e.Group+e.Peer.String()])
			}
		}
		return st
	}
	if st := save(es); st.Written != 3000 || st.Deleted != 0 {
		t.Errorf("first full: %+v", st)
	}
	if st := save(es); st.Written != 0 || st.Deleted != 0 {
		t.Errorf("the same full again: %+v, want nothing written", st)
	}
	// A few changed, a few gone, a few new, one changed twice.
	next := slices.Clone(es)
	for i := range 10 {
		next[i*100].Tokens++
	}
	next = next[5:]
	for i := range 5 {
		next = append(next, tokenEntry(peer(fmt.Sprintf("2001:db8:%x::1", i)), "general", 9))
	}
	twice := next[500]
	twice.Tokens = 1234
	next = append(next, twice)
	if st := save(next); st.Written != 10-1+5+1 || st.Deleted != 5 {
		t.Errorf("small change: %+v, want 15 written, 5 deleted", st)
	}
	// Everything changed: rewritten whole.
	for i := range next {
		next[i].LeakyTick++
	}
	if st := save(next); st.Written != 3000 || st.Deleted != 0 {
		t.Errorf("all changed: %+v, want 3000 written", st)
	}
	// Most entries gone: the bucket is rebuilt, its entries all written.
	if st := save(next[:10]); st.Written != 10 || st.Deleted != 2990 {
		t.Errorf("most gone: %+v, want 10 written, 2990 deleted", st)
	}
}
