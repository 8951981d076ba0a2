package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/limiterd/limiterd/internal/migrations"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

func TestOpenCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "sub")
	path := filepath.Join(dir, "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	if db.Size() != fi.Size() || db.Size() == 0 {
		t.Errorf("Size() = %d, file is %d bytes", db.Size(), fi.Size())
	}
	if err := db.Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}
	// The schema version is current, every bucket exists.
	err = db.Bolt().View(func(tx *bbolt.Tx) error {
		v := tx.Bucket([]byte("meta")).Get([]byte("schema_version"))
		if got := binary.BigEndian.Uint64(v); got != uint64(len(migrations.All)) {
			t.Errorf("schema version %d, want %d", got, len(migrations.All))
		}
		for _, b := range []string{"meta", "live", "overrides", "exemptions", "audit", "entry_base", "entry_log", "groups", "snapshot"} {
			if tx.Bucket([]byte(b)) == nil {
				t.Errorf("bucket %s missing", b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckClosedAndCanceled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.Check(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Check(canceled) = %v", err)
	}
	if err := db.Record(cctx, audit("x", "y", nil, nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("Record(canceled) = %v", err)
	}
	if _, _, err := db.LoadSnapshot(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadSnapshot(canceled) = %v", err)
	}
	db.Close()
	if err := db.Check(ctx); err == nil {
		t.Error("Check on a closed database: no error")
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetDisabled(ctx, true, audit("limiter.switch", "global", "on", "off")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: 5, Changed: []limiter.EntrySnapshot{tokenEntry(peerAt("10.0.0.1"), "general", 3)}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = MustOpenDBAt(t, path, store.Options{})
	st, err := db.LoadLive(ctx)
	if err != nil || !st.Disabled {
		t.Errorf("LoadLive after reopen = %+v, %v", st, err)
	}
	snap, _, err := db.LoadSnapshot(ctx)
	if err != nil || len(snap.Entries) != 1 || snap.TakenAt != 5 {
		t.Errorf("LoadSnapshot after reopen = %+v, %v", snap, err)
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	MustOpenDBAt(t, path, store.Options{})
	for _, ro := range []bool{false, true} {
		start := time.Now()
		db, err := store.Open(path, store.Options{Timeout: 100 * time.Millisecond, ReadOnly: ro})
		if err == nil {
			db.Close()
			t.Fatalf("second Open (read-only %v) succeeded", ro)
		}
		if !errors.Is(err, store.ErrLocked) || !errors.Is(err, berrors.ErrTimeout) {
			t.Errorf("second Open: %v, want ErrLocked wrapping bbolt's ErrTimeout", err)
		}
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Errorf("second Open took %v with a 100ms timeout", d)
		}
		for _, s := range []string{path, "a running limiterd?", "100ms"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
	}
}

func TestOpenTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, uint64(len(migrations.All)+1)))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := readFile(t, path)
	for _, ro := range []bool{false, true} {
		db, err = store.Open(path, store.Options{ReadOnly: ro})
		if err == nil {
			db.Close()
			t.Fatal("Open of a newer schema succeeded")
		}
		if !errors.Is(err, store.ErrTooNew) {
			t.Errorf("Open: %v, want ErrTooNew", err)
		}
		want := fmt.Sprintf("open %s: its schema version is %d, newer than this limiterd's (%d): a newer limiterd wrote it; the file was left as it is: run that limiterd, or this one on the backup taken before the upgrade (docs/operations.md, \"Upgrades\")", path, len(migrations.All)+1, len(migrations.All))
		if err.Error() != want {
			t.Errorf("error %q\nwant  %q", err, want)
		}
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Error("the file changed")
	}
}

// mustFailCorrupt opens path, wants ErrCorrupt naming the file, and the
// file unchanged.
func mustFailCorrupt(t *testing.T, path string) {
	t.Helper()
	before := readFile(t, path)
	for _, ro := range []bool{false, true} {
		db, err := store.Open(path, store.Options{ReadOnly: ro})
		if err == nil {
			db.Close()
			t.Fatalf("Open (read-only %v) succeeded", ro)
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Open (read-only %v): %v, want ErrCorrupt", ro, err)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the file", err)
		}
		t.Logf("read-only %v: %v", ro, err)
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Error("the file changed")
	}
}

func TestOpenGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 100, 4096, 5000, 10000, 65536} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			path := filepath.Join(t.TempDir(), "limiterd.db")
			writeFile(t, path, data)
			mustFailCorrupt(t, path)
		})
	}
	t.Run("text", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "limiterd.db")
		writeFile(t, path, []byte("[server]\nlisten = \"0.0.0.0:1985\"\n"))
		mustFailCorrupt(t, path)
	})
}

// realDB writes a database with n entries and returns its path.
func realDB(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Enabled: true}
	for i := range n {
		d.Changed = append(d.Changed, tokenEntry(peer.KeyFromAddr(ipv4(uint32(i)), 64), "general", int64(i%400+1)))
	}
	if _, err := db.SaveDelta(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenTruncated(t *testing.T) {
	path := realDB(t, 5000)
	src := readFile(t, path)
	// The high-water mark: the file may have room past it (bbolt grows
	// files ahead), which can be cut without loss.
	var hwm int
	b, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error { hwm = int(tx.Size()); return nil })
	b.Close()
	t.Logf("file %d bytes, high-water mark %d", len(src), hwm)
	for _, n := range []int{hwm / 2, 3000, 5000, hwm - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limiterd.db")
			writeFile(t, path, src[:n])
			mustFailCorrupt(t, path)
		})
	}
}

func ipv4(i uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(i>>24) | 1, byte(i >> 16), byte(i >> 8), byte(i)})
}

func TestOpenBadMeta(t *testing.T) {
	src := readFile(t, realDB(t, 100))
	// Both meta pages (0 and 1, 4096 bytes each here) with a byte flipped
	// in the checksummed part.
	path := filepath.Join(t.TempDir(), "limiterd.db")
	bad := bytes.Clone(src)
	bad[16+20] ^= 0xff
	bad[4096+16+20] ^= 0xff
	writeFile(t, path, bad)
	mustFailCorrupt(t, path)
}

func TestOpenDamagedPage(t *testing.T) {
	path := realDB(t, 5000)
	var root uint64
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		root = uint64(tx.Bucket([]byte("entry_base")).Root())
		return nil
	})
	pageSize := b.Info().PageSize
	b.Close()
	data := readFile(t, path)
	off := int(root) * pageSize
	for i := off; i < off+pageSize; i++ {
		data[i] = byte(i * 7)
	}
	writeFile(t, path, data)
	mustFailCorrupt(t, path)
}

func TestOpenForeignBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bbolt.Tx) error {
		bk, _ := tx.CreateBucket([]byte("widgets"))
		return bk.Put([]byte("a"), []byte("b"))
	})
	b.Close()
	mustFailCorrupt(t, path)
}

// A 0-byte file holds no data: it is initialised as a new database.
func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	writeFile(t, path, nil)
	if _, err := store.Open(path, store.Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("read-only Open of an empty file: %v", err)
	}
	db := MustOpenDBAt(t, path, store.Options{})
	if err := db.Check(ctx); err != nil {
		t.Error(err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	path := realDB(t, 10)
	before := readFile(t, path)
	db := MustOpenDBAt(t, path, store.Options{ReadOnly: true})
	// Read-only openers share the lock.
	db2 := MustOpenDBAt(t, path, store.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	for _, d := range []*store.DB{db, db2} {
		snap, _, err := d.LoadSnapshot(ctx)
		if err != nil || len(snap.Entries) != 10 {
			t.Errorf("LoadSnapshot: %d entries, %v", len(snap.Entries), err)
		}
	}
	if err := db.Record(ctx, audit("a", "b", nil, nil)); !errors.Is(err, berrors.ErrDatabaseReadOnly) {
		t.Errorf("Record on a read-only database: %v", err)
	}
	if err := db.Export(ctx, &bytes.Buffer{}); err != nil {
		t.Error(err)
	}
	db.Close()
	db2.Close()
	if !bytes.Equal(readFile(t, path), before) {
		t.Error("a read-only open changed the file")
	}
	if _, err := store.Open(filepath.Join(t.TempDir(), "none.db"), store.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only Open of a missing file: %v", err)
	}
}

func TestOpenReadOnlyOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	writeFile(t, path, readFile(t, "testdata/schema-v1.db"))
	_, err := store.Open(path, store.Options{ReadOnly: true})
	if !errors.Is(err, store.ErrNeedsMigration) {
		t.Errorf("read-only Open of schema 1: %v, want ErrNeedsMigration", err)
	}
}
