package store_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
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
	a, b, c, d := peerAt("10.0.0.1"), peerAt("2001:db8:1::7"), peer.OpaqueKey("unix:@"), peerAt("192.0.2.9")
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
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 1, Changed: []limiter.EntrySnapshot{tokenEntry(peerAt("10.0.0.1"), "gen\x00eral", 1)}}); err == nil {
		t.Error("a group name with a NUL: no error")
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 1, Changed: []limiter.EntrySnapshot{tokenEntry(peerAt("10.0.0.1"), "", 1)}}); err == nil {
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
	lim, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groupsCfg, IPv6Prefix: 64, MaxTracked: 1000})
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

// Records that do not decode are skipped, counted and logged, in the base
// and in the log; a blob that does not parse is skipped whole; the others
// load, and loading changes nothing in the file.
func TestLoadSnapshotSkipsUndecodable(t *testing.T) {
	var logs bytes.Buffer
	path := t.TempDir() + "/limiterd.db"
	db := MustOpenDBAt(t, path, store.Options{Logger: logTo(&logs)})
	good := []limiter.EntrySnapshot{tokenEntry(peerAt("10.0.0.1"), "general", 1), tokenEntry(peerAt("10.0.0.2"), "general", 2), tokenEntry(peerAt("10.0.0.3"), "general", 3)}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: good}); err != nil {
		t.Fatal(err)
	}
	e7 := tokenEntry(peerAt("10.0.0.7"), "general", 7)
	e1 := good[0]
	e1.Tokens = 100
	rec := func(g int, del bool, p string, value []byte) []byte {
		return store.RawRecord(g, del, peerAt(p), value)
	}
	val := func(e limiter.EntrySnapshot) []byte { return store.AppendEntry(nil, &e) }
	// Base blob 2: one good record among five bad ones.
	blob2 := store.RawBlob([]string{"general", "bad\x00name"},
		rec(0, false, "10.0.0.7", val(e7)),
		rec(0, false, "10.0.0.8", []byte{1, 0, 0x80}), // truncated varint
		rec(0, false, "10.0.0.9", []byte{9, 0, 0, 0}), // a future encoding
		rec(5, false, "10.0.0.10", val(e7)),           // no such group index
		rec(1, false, "10.0.0.11", val(e7)),           // an invalid group name
		rec(0, true, "10.0.0.12", nil),                // a deletion in the base
	)
	// Base blob 3: its header counts 3 records, it holds 2.
	blob3 := store.RawBlob([]string{"general"}, rec(0, false, "10.0.0.13", val(e7)), rec(0, false, "10.0.0.14", val(e7)))
	blob3[1] = 3
	// Base blob 4: a format to come.
	blob4 := append([]byte{7}, blob2[1:]...)
	// Log record 1: deletes 10.0.0.2, changes 10.0.0.1, one bad record.
	log1 := store.RawBlob([]string{"general"},
		rec(0, false, "10.0.0.1", val(e1)),
		rec(0, true, "10.0.0.2", nil),
		rec(0, true, "10.0.0.5", val(e7)), // a deletion with a value
	)
	keys := map[string][]byte{"base 2": u64(2), "base 3": u64(3), "base 4": u64(4), "log 1": store.LogKey(1, 0)}
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("entry_base"))
		for k, v := range map[string][]byte{"base 2": blob2, "base 3": blob3, "base 4": blob4} {
			if err := b.Put(keys[k], v); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("entry_log")).Put(keys["log 1"], log1); err != nil {
			return err
		}
		return tx.Bucket([]byte("groups")).Put([]byte("chunk"), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	snap, rep := mustLoad(t, db)
	if rep != (store.LoadReport{Entries: 3, Skipped: 5 + 3 + 1 + 1}) {
		t.Errorf("report %+v, want 3 entries, 10 skipped", rep)
	}
	if want := []limiter.EntrySnapshot{e1, good[2], e7}; !reflect.DeepEqual(snap.Entries, want) {
		t.Errorf("entries %+v, want %+v", snap.Entries, want)
	}
	if !reflect.DeepEqual(snap.Groups, groups()[1:]) {
		t.Errorf("groups %+v: the undecodable one should be skipped", snap.Groups)
	}
	for what, k := range keys {
		if !strings.Contains(logs.String(), hex.EncodeToString(k)) {
			t.Errorf("log does not name %s, key %x:\n%s", what, k, logs.String())
		}
	}
	if !strings.Contains(logs.String(), hex.EncodeToString([]byte("chunk"))) {
		t.Errorf("log does not name group chunk:\n%s", logs.String())
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Error("loading changed the file")
	}
	// Export leaves them out too.
	var out bytes.Buffer
	if err := db.Export(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "10.0.0.8") || !strings.Contains(out.String(), "10.0.0.7") {
		t.Errorf("export:\n%s", out.String())
	}
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// A full delta leaves the database holding exactly its entries, as a new
// base with an empty log.
func TestSaveDeltaFullReplaces(t *testing.T) {
	db := MustOpenDB(t)
	var es []limiter.EntrySnapshot
	for i := range 9000 {
		es = append(es, tokenEntry(peer.KeyFromAddr(ipv4(uint32(i*7919)), 64), []string{"general", "chunk"}[i%2], int64(i%400+1)))
	}
	save := func(entries []limiter.EntrySnapshot) store.SaveStats {
		t.Helper()
		st, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: entries})
		if err != nil {
			t.Fatal(err)
		}
		if st.LogBytes != 0 || st.LogRecords != 0 || st.Compact || (len(entries) > 0) != (st.BaseBytes > 0) {
			t.Errorf("after a full save: %+v", st)
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
		if !slices.IsSortedFunc(snap.Entries, compareEntries) {
			t.Error("entries not in key order")
		}
		return st
	}
	st := save(es)
	if st.Written != 9000 || st.Deleted != 0 {
		t.Errorf("first full: %+v", st)
	}
	if per := float64(st.BaseBytes) / 9000; per > 22 {
		t.Errorf("base of %d bytes: %.1f per entry", st.BaseBytes, per)
	}
	// An incremental save, then a full one over it.
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 2, Groups: groups(), Changed: es[:10], Deleted: []limiter.EntryRef{{Peer: es[20].Peer, Group: es[20].Group}}}); err != nil {
		t.Fatal(err)
	}
	next := slices.Clone(es)
	for i := range 10 {
		next[i*100].Tokens++
	}
	next = next[5:]
	for i := range 5 {
		next = append(next, tokenEntry(peerAt(fmt.Sprintf("2001:db8:%x::1", i)), "general", 9))
	}
	twice := next[500]
	twice.Tokens = 1234
	next = append(next, twice)
	if st := save(next); st.Written != 9000 {
		t.Errorf("changed full: %+v, want 9000 written", st)
	}
	if st := save(next[:10]); st.Written != 10 {
		t.Errorf("most gone: %+v, want 10 written", st)
	}
	save(nil)
	// One bucket key per blob, the log empty.
	save(es)
	db.Bolt().View(func(tx *bbolt.Tx) error {
		nb, nl := tx.Bucket([]byte("entry_base")).Stats().KeyN, tx.Bucket([]byte("entry_log")).Stats().KeyN
		if want := st.BaseBytes/store.BlobTarget + 1; nb != int(want) || nl != 0 {
			t.Errorf("%d base blobs (want %d), %d log keys", nb, want, nl)
		}
		return nil
	})
}

func compareEntries(a, b limiter.EntrySnapshot) int {
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	return bytes.Compare(a.Peer[:], b.Peer[:])
}

// A base not in key order (not written by limiterd: out-of-order blobs, a
// key twice) still loads in key order, the later record of a key winning,
// the log applied after it.
func TestLoadSnapshotUnsortedBase(t *testing.T) {
	db := MustOpenDB(t)
	a, b, c, d := tokenEntry(peerAt("10.0.0.1"), "general", 1), tokenEntry(peerAt("10.0.0.2"), "general", 2), tokenEntry(peerAt("10.0.0.3"), "general", 3), windowEntry(peerAt("10.0.0.4"), "chunk")
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: []limiter.EntrySnapshot{b, c}}); err != nil {
		t.Fatal(err)
	}
	b2, c2 := b, c
	b2.Tokens, c2.Tokens = 200, 300
	// Blob 0 comes before blob 1 (the full save's): c and d, then b, out
	// of order; blob 1's b wins over blob 0's, and the log changes c.
	blob0 := store.RawBlob([]string{"general", "chunk"},
		store.RawRecord(0, false, c.Peer, store.AppendEntry(nil, &c)),
		store.RawRecord(1, false, d.Peer, store.AppendEntry(nil, &d)),
		store.RawRecord(0, false, a.Peer, store.AppendEntry(nil, &a)),
		store.RawRecord(0, false, b2.Peer, store.AppendEntry(nil, &b2)),
	)
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("entry_base")).Put(u64(0), blob0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 2, Groups: groups(), Changed: []limiter.EntrySnapshot{c2}, Deleted: []limiter.EntryRef{{Peer: a.Peer, Group: "general"}}}); err != nil {
		t.Fatal(err)
	}
	snap, rep := mustLoad(t, db)
	if want := []limiter.EntrySnapshot{d, b, c2}; !reflect.DeepEqual(snap.Entries, want) || rep != (store.LoadReport{Entries: 3}) {
		t.Errorf("entries (%+v):\n got %+v\nwant %+v", rep, snap.Entries, want)
	}
}
