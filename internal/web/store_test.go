package web

import (
	"path/filepath"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
)

// OpenTestStore opens a bbolt store in tb.TempDir() for the live settings
// and the sessions of a test Server, and closes it at cleanup: the tests
// run on the daemon's real store, not an imitation of it.
func OpenTestStore(tb testing.TB) *store.DB {
	tb.Helper()
	db, err := store.Open(filepath.Join(tb.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		tb.Fatalf("open the test store: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close the test store: %v", err)
		}
	})
	return db
}

// MustNewServer is NewServer for a test: it fails tb on an error.
func MustNewServer(tb testing.TB, lim *limiter.Limiter, lv *live.Live, opts Options) *Server {
	tb.Helper()
	s, err := NewServer(lim, lv, opts)
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	return s
}

// ArweaveThrottle is the shipped outbound throttle table, its patterns
// compiled by the core (throttle.Config.Compile).
func ArweaveThrottle() throttle.Config {
	c := throttle.ArweaveConfig()
	c.Compile = limiter.ThrottleMatcher
	return c
}
