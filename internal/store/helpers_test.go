package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// MustOpenDB opens a new database in tb.TempDir(); at cleanup it closes it
// and runs bbolt's consistency check on the file, failing on any error.
func MustOpenDB(tb testing.TB) *store.DB {
	tb.Helper()
	return MustOpenDBAt(tb, filepath.Join(tb.TempDir(), "limiterd.db"), store.Options{CheckThrottle: throttle.CheckSnapshot})
}

// MustOpenDBAt opens the database at path with opts, and checks it at
// cleanup like MustOpenDB.
func MustOpenDBAt(tb testing.TB, path string, opts store.Options) *store.DB {
	tb.Helper()
	db, err := store.Open(path, opts)
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		MustCheckFile(tb, path)
	})
	return db
}

// MustCheckFile runs tx.Check on the bbolt file at path.
func MustCheckFile(tb testing.TB, path string) {
	tb.Helper()
	b, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Errorf("check %s: %v", path, err)
		return
	}
	defer b.Close()
	err = b.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			tb.Errorf("check %s: %v", path, err)
		}
		return nil
	})
	if err != nil {
		tb.Errorf("check %s: %v", path, err)
	}
}

// logTo returns a logger writing text to buf.
func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func writeFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

var ctx = context.Background()

func peerAt(s string) peer.Key {
	return peer.KeyFromAddr(netip.MustParseAddr(s), 64)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func audit(action, target string, old, new any) live.AuditEntry {
	return live.AuditEntry{Time: t0, Actor: "token", Action: action, Target: target, Old: old, New: new}
}

// sched returns a valid schedule.
func sched(interval int64) limiter.Schedule {
	return limiter.NewSchedule(t0.UnixMilli()-3_600_000, interval)
}

// tokenEntry is a token-only entry, like those of the general group.
func tokenEntry(p peer.Key, group string, tokens int64) limiter.EntrySnapshot {
	return limiter.EntrySnapshot{
		Peer: p, Group: group, InTokens: true, Tokens: tokens, LeakyTick: 120,
		Requests: uint64(tokens) * 3, LastSeen: t0.Unix() - tokens,
	}
}

// windowEntry has window timestamps and counters.
func windowEntry(p peer.Key, group string) limiter.EntrySnapshot {
	ms := t0.UnixMilli()
	return limiter.EntrySnapshot{
		Peer: p, Group: group, InTokens: true, Tokens: 7, LeakyTick: 120,
		Window: []int64{ms - 900, ms - 500, ms - 500, ms - 3}, CleanupTick: 30,
		Requests: 1 << 33, RejectedConcurrency: 4, RejectedRateLimit: 70000,
		LastSeen: t0.Unix(),
	}
}

// asJSON renders v for comparisons where Go types may differ but the data
// must not (numbers decoded from JSON, time locations).
func asJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func mustEqualJSON(tb testing.TB, what string, got, want any) {
	tb.Helper()
	if g, w := asJSON(tb, got), asJSON(tb, want); g != w {
		tb.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}
