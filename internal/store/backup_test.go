package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
)

// backupTo writes db's backup to a file in dir and returns its path.
func backupTo(t *testing.T, db *store.DB, dir string, during func()) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("backup-%d.db", len(must(os.ReadDir(dir)))))
	f := must(os.Create(path))
	defer f.Close()
	var size int64
	n, err := db.Backup(ctx, func(s int64) (io.Writer, error) {
		size = s
		if during != nil {
			during()
		}
		return f, nil
	})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if n != size || n != must(f.Stat()).Size() {
		t.Fatalf("Backup wrote %d bytes, announced %d, file has %d", n, size, must(f.Stat()).Size())
	}
	return path
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBackupWhileSnapshotRuns: a snapshot written while a backup is under
// way (its read transaction open) does not reach the copy, and the copy is
// a valid database holding exactly the state before it, live settings and
// audit included.
func TestBackupWhileSnapshotRuns(t *testing.T) {
	db := MustOpenDB(t)
	a, b := peerAt("10.0.0.1"), peerAt("2001:db8:1::7")
	before := []limiter.EntrySnapshot{tokenEntry(a, "general", 5), windowEntry(b, "chunk")}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1000, Enabled: true, Groups: groups(), Changed: before}); err != nil {
		t.Fatal(err)
	}
	deny := live.Exemption{Kind: live.DenyPeer, Value: "203.0.113.66", Note: "scraper"}
	if err := db.AddExemption(ctx, deny, audit("exemption.add", "deny_peer", nil, deny.Value)); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	path := backupTo(t, db, dir, func() {
		// The backup's transaction is open: a snapshot and a live edit
		// commit meanwhile (bbolt lets one writer run beside readers).
		changed := tokenEntry(a, "general", 99)
		if _, err := db.SaveDelta(ctx, limiter.Delta{TakenAt: 2000, Enabled: true, Groups: groups(), Changed: []limiter.EntrySnapshot{changed, tokenEntry(peerAt("192.0.2.9"), "general", 1)}}); err != nil {
			t.Errorf("snapshot during the backup: %v", err)
		}
		if err := db.SetDisabled(ctx, true, audit("limiter.switch", "global", "on", "off")); err != nil {
			t.Errorf("switch during the backup: %v", err)
		}
	})

	MustCheckFile(t, path)
	copyDB := MustOpenDBAt(t, path, store.Options{ReadOnly: true})
	snap, rep := mustLoad(t, copyDB)
	want := limiter.Snapshot{TakenAt: 1000, Enabled: true, Groups: groups(), Entries: sortEntries(before)}
	if !reflect.DeepEqual(snap, want) || rep.Entries != 2 {
		t.Errorf("the copy holds\n %+v\nwant the state before the backup\n %+v", snap, want)
	}
	st := must(copyDB.LoadLive(ctx))
	if st.Disabled || len(st.Exemptions) != 1 || st.Exemptions[0] != deny {
		t.Errorf("the copy's live state: %+v", st)
	}
	if entries := must(copyDB.Audit(ctx, 10, 0)); len(entries) != 1 {
		t.Errorf("the copy's audit: %+v", entries)
	}

	// The next backup has what was written since.
	later := MustOpenDBAt(t, backupTo(t, db, dir, nil), store.Options{ReadOnly: true})
	if snap, _ := mustLoad(t, later); snap.TakenAt != 2000 || len(snap.Entries) != 3 {
		t.Errorf("a later backup: %+v", snap)
	}
	if st := must(later.LoadLive(ctx)); !st.Disabled {
		t.Error("a later backup misses the switch")
	}
}

// TestBackupUnderWrites copies a database of many entries while snapshots
// are written as fast as they can: every copy is a valid database that
// opens and loads.
func TestBackupUnderWrites(t *testing.T) {
	db := MustOpenDB(t)
	var entries []limiter.EntrySnapshot
	for i := range 20000 {
		entries = append(entries, tokenEntry(peerAt(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)), "general", int64(i%450+1)))
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 1, Groups: groups(), Changed: entries}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(2); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ch := entries[int(i)%len(entries) : int(i)%len(entries)+1]
			ch[0].Tokens = i % 450
			if _, err := db.SaveDelta(ctx, limiter.Delta{Full: i%7 == 0, TakenAt: i, Groups: groups(), Changed: func() []limiter.EntrySnapshot {
				if i%7 == 0 {
					return entries
				}
				return ch
			}()}); err != nil {
				t.Errorf("save %d: %v", i, err)
				return
			}
		}
	})
	dir := t.TempDir()
	for range 5 {
		path := backupTo(t, db, dir, nil)
		MustCheckFile(t, path)
		c := MustOpenDBAt(t, path, store.Options{ReadOnly: true})
		if snap, rep := mustLoad(t, c); len(snap.Entries) != len(entries) || rep.Skipped != 0 {
			t.Errorf("copy %s: %d entries, %d skipped", path, len(snap.Entries), rep.Skipped)
		}
	}
	close(stop)
	wg.Wait()
}

func TestBackupStopsWithItsContext(t *testing.T) {
	db := MustOpenDB(t)
	c, cancel := context.WithCancel(ctx)
	_, err := db.Backup(c, func(int64) (io.Writer, error) {
		cancel()
		return io.Discard, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Backup after its context ended: %v", err)
	}
}

func TestWritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := must(store.Open(path, store.Options{}))
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("a new database: %v", err)
	}
	db.Close()

	// Read-only: readable, not writable.
	ro := must(store.Open(path, store.Options{ReadOnly: true}))
	if err := ro.Check(ctx); err != nil {
		t.Errorf("read-only Check: %v", err)
	}
	if err := ro.Ready(ctx); err == nil || !strings.Contains(err.Error(), "cannot be written") {
		t.Errorf("read-only Ready: %v", err)
	}
	ro.Close()

	// A write that fails is what Writable answers next, without a probe.
	db = must(store.Open(path, store.Options{}))
	if err := db.Writable(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.Record(ctx, audit("peer.forget", "x", nil, nil)); err == nil {
		t.Fatal("a write to a closed database succeeded")
	}
	if err := db.Writable(ctx); err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "database not open") {
		t.Errorf("Writable after a failed write: %v", err)
	}
}

// TestBackupSlowClientHoldsNothing: a backup whose client does not read
// (its writer blocks) holds no read transaction meanwhile, so writes go
// on reusing pages and the file does not grow with them; a third backup
// while two are under way is refused at once.
func TestBackupSlowClientHoldsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	var entries []limiter.EntrySnapshot
	for i := range 20000 {
		entries = append(entries, tokenEntry(peerAt(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)), "general", int64(i%450+1)))
	}
	save := func(at int64) {
		if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: at, Groups: groups(), Changed: entries}); err != nil {
			t.Fatal(err)
		}
	}
	save(1)
	save(2)
	fi, _ := os.Stat(path)
	before := fi.Size()

	release := make(chan struct{})
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_, err := db.Backup(ctx, func(int64) (io.Writer, error) {
				started <- struct{}{}
				<-release // a client that reads nothing until told
				return io.Discard, nil
			})
			if err != nil {
				t.Errorf("backup: %v", err)
			}
		})
	}
	<-started
	<-started
	if _, err := db.Backup(ctx, func(int64) (io.Writer, error) { return io.Discard, nil }); !errors.Is(err, store.ErrBackupBusy) {
		t.Errorf("a third backup at once: %v, want ErrBackupBusy", err)
	}
	for i := range 20 {
		save(int64(3 + i)) // every page rewritten, twenty times
	}
	fi, _ = os.Stat(path)
	close(release)
	wg.Wait()
	if grew := fi.Size() - before; grew > before/2 {
		t.Fatalf("the file grew by %d bytes (from %d) while two slow backups were under way", grew, before)
	}
}
