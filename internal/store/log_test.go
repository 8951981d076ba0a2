package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/migrations"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// model is what the database should hold: the entries by (group, peer).
type model map[limiter.EntryRef]limiter.EntrySnapshot

func (m model) entries() []limiter.EntrySnapshot {
	var out []limiter.EntrySnapshot
	for _, e := range m {
		out = append(out, e)
	}
	return sortEntries(out)
}

// churn makes the database's deltas: changes of stored entries, new ones,
// deletions (some of entries never stored), entries deleted and created
// again, entries changed twice in one delta.
type churn struct {
	rng   *rand.Rand
	peers []peer.Key
	m     model
	seq   int64
}

func newChurn(seed uint64, npeers int) *churn {
	c := &churn{rng: rand.New(rand.NewPCG(seed, seed)), m: model{}}
	for i := range npeers {
		switch i % 5 {
		case 0:
			c.peers = append(c.peers, peerAt(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)))
		case 1:
			c.peers = append(c.peers, peer.OpaqueKey(fmt.Sprint("pipe-", i)))
		default:
			c.peers = append(c.peers, peer.KeyFromAddr(ipv4(uint32(i)*2654435761), 64))
		}
	}
	return c
}

var churnGroups = []string{"general", "chunk", "get_vdf"}

func (c *churn) entry() limiter.EntrySnapshot {
	c.seq++
	p := c.peers[c.rng.IntN(len(c.peers))]
	g := churnGroups[c.rng.IntN(len(churnGroups))]
	if c.rng.IntN(4) == 0 {
		e := windowEntry(p, g)
		e.Requests = uint64(c.seq)
		return e
	}
	return tokenEntry(p, g, 1+c.seq%450)
}

// full returns a full delta of n entries, and makes it the model.
func (c *churn) full(n int) limiter.Delta {
	c.m = model{}
	d := limiter.Delta{Full: true, TakenAt: t0.UnixMilli() + c.seq, Enabled: c.seq%2 == 0, Groups: groups()}
	for range n {
		e := c.entry()
		d.Changed = append(d.Changed, e)
		c.m[limiter.EntryRef{Peer: e.Peer, Group: e.Group}] = e
	}
	return d
}

// delta returns an incremental delta of about n changes and n/5
// deletions, applied to the model.
func (c *churn) delta(n int) (limiter.Delta, int, int) {
	d := limiter.Delta{TakenAt: t0.UnixMilli() + c.seq, Enabled: c.seq%3 == 0, Groups: groups()}
	stored := make([]limiter.EntryRef, 0, len(c.m))
	for r := range c.m {
		stored = append(stored, r)
	}
	final := map[limiter.EntryRef]bool{} // true: changed, false: deleted
	for i := 0; i < n/5 && len(stored) > 0; i++ {
		r := stored[c.rng.IntN(len(stored))]
		if i%7 == 0 {
			r = limiter.EntryRef{Peer: c.peers[c.rng.IntN(len(c.peers))], Group: "get_vdf"} // maybe never stored
		}
		d.Deleted = append(d.Deleted, r)
		delete(c.m, r)
		final[r] = false
	}
	for i := range n {
		var e limiter.EntrySnapshot
		switch {
		case i%3 == 0 && len(stored) > 0: // a stored entry changes (or is created again)
			r := stored[c.rng.IntN(len(stored))]
			e = tokenEntry(r.Peer, r.Group, 1+c.seq%450)
			e.Requests = uint64(c.seq)
			c.seq++
		case i%11 == 0 && len(d.Deleted) > 0: // deleted above, created again
			r := d.Deleted[c.rng.IntN(len(d.Deleted))]
			e = windowEntry(r.Peer, r.Group)
			e.RejectedRateLimit = uint64(c.seq)
			c.seq++
		default:
			e = c.entry()
		}
		d.Changed = append(d.Changed, e)
		r := limiter.EntryRef{Peer: e.Peer, Group: e.Group}
		c.m[r] = e
		final[r] = true
	}
	written, deleted := 0, 0
	for _, changed := range final {
		if changed {
			written++
		} else {
			deleted++
		}
	}
	return d, written, deleted
}

func mustMatch(t *testing.T, db *store.DB, m model, d limiter.Delta, what string) {
	t.Helper()
	snap, rep := mustLoad(t, db)
	want := m.entries()
	if rep.Skipped != 0 || rep.Entries != len(want) {
		t.Fatalf("%s: report %+v, want %d entries", what, rep, len(want))
	}
	if !reflect.DeepEqual(snap.Entries, want) {
		for i := range min(len(want), len(snap.Entries)) {
			if !reflect.DeepEqual(snap.Entries[i], want[i]) {
				t.Fatalf("%s: entry %d:\n got %+v\nwant %+v", what, i, snap.Entries[i], want[i])
			}
		}
		t.Fatalf("%s: %d entries, want %d", what, len(snap.Entries), len(want))
	}
	if snap.TakenAt != d.TakenAt || snap.Enabled != d.Enabled || !reflect.DeepEqual(snap.Groups, d.Groups) {
		t.Fatalf("%s: snapshot %d %v %+v, want %d %v %+v", what, snap.TakenAt, snap.Enabled, snap.Groups, d.TakenAt, d.Enabled, d.Groups)
	}
}

// A full save then incremental ones, with a reopen between saves and a
// second full save in the middle: each load gives the model, in key order.
func TestSaveDeltaLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		db.Close()
		MustCheckFile(t, path)
	}()
	c := newChurn(1, 6000)
	d := c.full(5000)
	st, err := db.SaveDelta(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	mustMatch(t, db, c.m, d, "full")
	records, logBytes := 0, int64(0)
	for step := 1; step <= 24; step++ {
		n := 40 + step*10
		if step == 7 {
			n = 0 // nothing changed: no log record
		}
		d, written, deleted := c.delta(n)
		if step == 12 {
			d = c.full(4000)
			written, deleted = len(c.m), 0
		}
		st, err = db.SaveDelta(ctx, d)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		what := fmt.Sprintf("step %d", step)
		mustMatch(t, db, c.m, d, what)
		switch {
		case d.Full:
			records, logBytes = 0, 0
		case n > 0:
			records++
		}
		if st.Written != written || st.Deleted != deleted {
			t.Errorf("%s: %d written, %d deleted; want %d, %d", what, st.Written, st.Deleted, written, deleted)
		}
		if st.LogRecords != records || (n > 0 && !d.Full) != (st.LogBytes > logBytes) || st.BaseBytes == 0 || st.Compact {
			t.Errorf("%s: %+v (%d records, %d log bytes before)", what, st, records, logBytes)
		}
		logBytes = st.LogBytes
		if step%5 == 0 {
			// Reopen: the state is the file's.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			MustCheckFile(t, path)
			if db, err = store.Open(path, store.Options{}); err != nil {
				t.Fatal(err)
			}
			mustMatch(t, db, c.m, d, what+", reopened")
		}
	}
	// Export reads the log too; an import writes it all as a base, and the
	// export of that is the same document.
	out := mustExport(t, db)
	b := MustOpenDB(t)
	if err := b.Import(ctx, bytes.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if again := mustExport(t, b); !bytes.Equal(again, out) {
		t.Error("export after import differs")
	}
	snap, _ := mustLoad(t, b)
	if !reflect.DeepEqual(snap.Entries, c.m.entries()) {
		t.Error("imported entries differ")
	}
	b.Bolt().View(func(tx *bbolt.Tx) error {
		if n := tx.Bucket([]byte("entry_log")).Stats().KeyN; n != 0 {
			t.Errorf("%d log keys after an import", n)
		}
		return nil
	})
}

// A delta larger than a blob is one log record of several blobs.
func TestSaveDeltaLogManyBlobs(t *testing.T) {
	db := MustOpenDB(t)
	c := newChurn(2, 40000)
	d := c.full(20000)
	if _, err := db.SaveDelta(ctx, d); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d, _, _ := c.delta(8000)
		st, err := db.SaveDelta(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if st.LogRecords != i+1 {
			t.Errorf("%d log records, want %d", st.LogRecords, i+1)
		}
		mustMatch(t, db, c.m, d, fmt.Sprint("delta ", i))
	}
	db.Bolt().View(func(tx *bbolt.Tx) error {
		seqs := map[uint64]int{}
		tx.Bucket([]byte("entry_log")).ForEach(func(k, v []byte) error {
			seqs[binary.BigEndian.Uint64(k)]++
			return nil
		})
		if len(seqs) != 3 || seqs[1] < 2 {
			t.Errorf("log records and their blobs: %v", seqs)
		}
		return nil
	})
}

// The log grows until SaveStats.Compact says to save in full; the full
// save empties it.
func TestSaveDeltaCompact(t *testing.T) {
	db := MustOpenDB(t)
	c := newChurn(3, 60000)
	d := c.full(30000)
	st, err := db.SaveDelta(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	base := st.BaseBytes
	if st.Compact || base < 512<<10 {
		t.Fatalf("after a full save of 30000: %+v", st)
	}
	for i := 0; ; i++ {
		d, _, _ = c.delta(3000)
		st, err = db.SaveDelta(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if st.BaseBytes != base {
			t.Fatalf("the base changed: %d, was %d", st.BaseBytes, base)
		}
		if want := st.LogBytes > max(256<<10, base/3); st.Compact != want {
			t.Fatalf("save %d: %+v: compact %v, want %v", i, st, st.Compact, want)
		}
		if st.Compact {
			break
		}
		if i > 100 {
			t.Fatal("no compaction asked for")
		}
	}
	mustMatch(t, db, c.m, d, "before compaction")
	d = limiter.Delta{Full: true, TakenAt: d.TakenAt + 1, Groups: groups(), Changed: c.m.entries()}
	st, err = db.SaveDelta(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if st.Compact || st.LogBytes != 0 || st.LogRecords != 0 || st.Written != len(c.m) {
		t.Errorf("after compaction: %+v", st)
	}
	mustMatch(t, db, c.m, d, "after compaction")
}

// cancelAfter is a context whose Err reports it cancelled from its
// (after+1)-th call on.
type cancelAfter struct {
	context.Context
	calls *atomic.Int64
	after int64
}

func (c cancelAfter) Err() error {
	if c.calls.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

// A save cancelled at any point (before, during, at the end of its
// transaction) leaves the previous state whole, loadable, and the file
// consistent; so does a save that fails.
func TestSaveDeltaCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	// More than 1<<16 operations: the encoding checks the context as it
	// goes, twice.
	c := newChurn(4, 150000)
	prev := c.full(70000)
	if _, err := db.SaveDelta(ctx, prev); err != nil {
		t.Fatal(err)
	}
	d1, _, _ := c.delta(500)
	if _, err := db.SaveDelta(ctx, d1); err != nil {
		t.Fatal(err)
	}
	prev, stored := d1, c.m
	for _, next := range []string{"incremental", "full"} {
		c.m = model{}
		for r, e := range stored {
			c.m[r] = e
		}
		var d limiter.Delta
		if next == "full" {
			d = c.full(70000)
		} else {
			d, _, _ = c.delta(5000)
		}
		failed := 0
		for after := int64(0); ; after++ {
			_, err := db.SaveDelta(cancelAfter{ctx, new(atomic.Int64), after}, d)
			if err == nil {
				break
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s save cancelled after %d checks: %v", next, after, err)
			}
			failed++
			mustMatch(t, db, stored, prev, fmt.Sprintf("%s save cancelled after %d checks", next, after))
		}
		// The context is checked before the transaction and at its end,
		// and the full save's encoding checks it as it goes.
		if failed < 2 || (next == "full" && failed < 4) {
			t.Errorf("%s save: %d points of cancellation", next, failed)
		}
		t.Logf("%s save: cancelled at %d points, then saved", next, failed)
		mustMatch(t, db, c.m, d, next+" save")
		prev, stored = d, c.m
	}
	// A save that fails (a bad delta) changes nothing either.
	c.m = model{}
	for r, e := range stored {
		c.m[r] = e
	}
	bad, _, _ := c.delta(100)
	bad.Changed = append(bad.Changed, tokenEntry(peerAt("10.9.9.9"), "", 1))
	if _, err := db.SaveDelta(ctx, bad); err == nil {
		t.Fatal("a delta with an unnamed group saved")
	}
	mustMatch(t, db, stored, prev, "after a failed save")
}

// A database of schema version 2 with bad records: after the migration,
// the undecodable value is skipped by a load (and logged), the malformed
// key is gone, the rest is there, in order.
func TestMigrateV2BadEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	c := newChurn(5, 20000)
	d := c.full(12000)
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		err := b.Update(func(tx *bbolt.Tx) error {
			if err := migrations.All[i].Up(tx); err != nil {
				return err
			}
			return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, uint64(i+1)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	bad := v2EntryKey("general", peerAt("10.255.0.1"))
	err = b.Update(func(tx *bbolt.Tx) error {
		eb := tx.Bucket([]byte("entries"))
		for _, e := range c.m {
			if err := eb.Put(v2EntryKey(e.Group, e.Peer), appendEntryV1(nil, &e)); err != nil {
				return err
			}
		}
		if err := eb.Put(bad, []byte{1, 0, 0x80}); err != nil {
			return err
		}
		return eb.Put([]byte("no-separator"), []byte{1, 0, 0, 0})
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	db := MustOpenDBAt(t, path, store.Options{Logger: logTo(&logs)})
	snap, rep := mustLoad(t, db)
	if rep.Skipped != 1 || !reflect.DeepEqual(snap.Entries, c.m.entries()) {
		t.Errorf("after migrating: %+v; %d entries, want %d", rep, len(snap.Entries), len(c.m))
	}
	if !strings.Contains(logs.String(), "entry_base") || !strings.Contains(logs.String(), "does not decode") {
		t.Errorf("the skipped record is not logged:\n%s", logs.String())
	}
	// The migrated database takes saves.
	d2, _, _ := c.delta(300)
	if _, err := db.SaveDelta(ctx, d2); err != nil {
		t.Fatal(err)
	}
	snap, _ = mustLoad(t, db)
	if !reflect.DeepEqual(snap.Entries, c.m.entries()) {
		t.Error("entries after a save over the migrated base differ")
	}
	_ = d
}
