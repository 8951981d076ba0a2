package persist

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The snapshotter saves incrementally until the store says its log has
// grown; it then has the store fold the log into its base (no full save:
// the limiter is not scanned for it), and the store holds what the limiter
// holds.
func TestSnapshotterCompacts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	lim, err := limiter.New(memory.New(), now, limiter.Config{Groups: limiter.ArweaveGroups(), IPv6Prefix: 64, MaxTracked: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(now, arweaveThrottle())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := New(lim, db, Options{Throttle: th, Now: clock})
	ctx := context.Background()
	if err := s.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	peers := make([]peer.Peer, 3000)
	for i := range peers {
		if peers[i], err = lim.ParsePeer(fmt.Sprintf("10.%d.%d.1", i>>8, i&0xff)); err != nil {
			t.Fatal(err)
		}
	}
	decide := func(n, from int) {
		for i := range n {
			d := lim.Decide(now, peers[(from+i*7)%len(peers)], g)
			d.Release()
		}
	}
	decide(len(peers), 0)
	if err := s.Save(ctx); err != nil { // the first save after restore is full
		t.Fatal(err)
	}
	compacted := 0
	for round := 1; round <= 200 && compacted == 0; round++ {
		now = now.Add(10 * time.Millisecond)
		decide(700, round*700)
		if err := s.Save(ctx); err != nil {
			t.Fatal(err)
		}
		if s.compactions.Load() > 0 {
			compacted = round
			if s.needFull {
				t.Error("a full save asked for after a compaction")
			}
			if got := s.lastWritten.Load(); got >= int64(lim.Tracked()) {
				t.Errorf("the save before the compaction wrote %d entries: a full save, not an incremental one", got)
			}
		}
	}
	if compacted == 0 {
		t.Fatal("the store never asked for a compaction")
	}
	t.Logf("compacted at round %d", compacted)
	if st, err := db.Compact(ctx); err != nil || st.Written != lim.Tracked() {
		t.Errorf("the store holds %d entries after a compaction (%v), the limiter %d", st.Written, err, lim.Tracked())
	}
	snap, rep, err := db.LoadSnapshot(ctx)
	if err != nil || rep.Skipped != 0 {
		t.Fatal(rep, err)
	}
	if want := lim.Snapshot(now); len(snap.Entries) != len(want.Entries) {
		t.Errorf("the store holds %d entries, the limiter %d", len(snap.Entries), len(want.Entries))
	}
}

// TestRestoreKeepsGroupsTheConfigLacks: a start with a config that lacks a
// group (a typo, the embedded defaults from the wrong directory) leaves
// that group's peers in the store; the next start with the group has them
// back. Entries cut by max_tracked leave the store.
func TestRestoreKeepsGroupsTheConfigLacks(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	db, err := store.Open(filepath.Join(t.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	withFoo := limiter.Config{Groups: limiter.ArweaveGroups(), IPv6Prefix: 64}
	withFoo.Groups["foo"] = withFoo.Groups["general"]
	start := func(cfg limiter.Config) *limiter.Limiter {
		t.Helper()
		lim, err := limiter.New(memory.New(), now, cfg)
		if err != nil {
			t.Fatal(err)
		}
		th, err := throttle.New(now, arweaveThrottle())
		if err != nil {
			t.Fatal(err)
		}
		s := New(lim, db, Options{Throttle: th, Now: clock})
		if err := s.Restore(ctx); err != nil {
			t.Fatal(err)
		}
		return lim
	}
	save := func(lim *limiter.Limiter) {
		t.Helper()
		th, _ := throttle.New(now, arweaveThrottle())
		s := New(lim, db, Options{Throttle: th, Now: clock})
		if err := s.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tokens := func(lim *limiter.Limiter, peer, group string) int64 {
		p, _ := lim.ParsePeer(peer)
		for _, v := range lim.Peer(now, p.Key) {
			if v.Group == group {
				return v.Tokens
			}
		}
		return -1
	}

	lim := start(withFoo)
	foo, _ := lim.GroupID("foo")
	general, _ := lim.GroupID("general")
	for i, peer := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		p, _ := lim.ParsePeer(peer)
		for range 3 {
			d := lim.Decide(now.Add(time.Duration(i)*time.Second), p, []limiter.GroupID{foo, general, general}[i])
			d.Release()
		}
	}
	save(lim)

	// Without foo, and a cap of one entry: .3 (seen last) stays, .2 goes.
	now = now.Add(time.Second)
	without := limiter.Config{Groups: limiter.ArweaveGroups(), IPv6Prefix: 64, MaxTracked: 1}
	lim = start(without)
	if got := tokens(lim, "192.0.2.3", "general"); got != 3 || lim.Tracked() != 1 {
		t.Fatalf("without foo: .3 has %d tokens, %d tracked; want 3 and 1", got, lim.Tracked())
	}
	save(lim) // the daemon's next save

	now = now.Add(time.Second)
	lim = start(withFoo)
	if got := tokens(lim, "192.0.2.1", "foo"); got != 3 {
		t.Errorf("foo's peer after a start without foo: %d tokens, want 3", got)
	}
	if got := tokens(lim, "192.0.2.2", "general"); got != -1 {
		t.Errorf("the entry cut by max_tracked came back with %d tokens", got)
	}
	if got := tokens(lim, "192.0.2.3", "general"); got != 3 {
		t.Errorf(".3: %d tokens, want 3", got)
	}
}

// arweaveThrottle is the shipped outbound throttle table, its patterns
// compiled by the core (throttle.Config.Compile).
func arweaveThrottle() throttle.Config {
	c := throttle.ArweaveConfig()
	c.Compile = limiter.ThrottleMatcher
	return c
}

// TestSnapshotRecordsTheWallClock: with Options.Wall the saved snapshot
// carries the wall clock's reading beside the limiter's time, and a
// restart finds it in the store.
func TestSnapshotRecordsTheWallClock(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	wall := now.Add(time.Hour) // stepped forward an hour since the start
	lim, err := limiter.New(memory.New(), now, limiter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := New(lim, db, Options{Now: func() time.Time { return now }, Wall: func() time.Time { return wall }})
	ctx := context.Background()
	if err := s.Save(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _, err := db.LoadSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.TakenAt != now.UnixMilli() || snap.WallAt != wall.UnixMilli() {
		t.Fatalf("taken at %d, wall at %d; want %d and %d", snap.TakenAt, snap.WallAt, now.UnixMilli(), wall.UnixMilli())
	}
}

// TestStatus: the last save that succeeded, and the last that failed
// with why, for the dashboard's health.
func TestStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	lim, err := limiter.New(memory.New(), now, limiter.Config{Groups: limiter.ArweaveGroups(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(lim, db, Options{Now: clock, Interval: 5 * time.Second})
	if st := s.Status(); !st.OK.IsZero() || !st.Failed.IsZero() || st.Every != 5*time.Second {
		t.Fatalf("before a save: %+v", st)
	}
	ctx := context.Background()
	if err := s.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); !st.OK.Equal(now) || !st.Failed.IsZero() {
		t.Fatalf("after a save: %+v", st)
	}
	now = now.Add(time.Minute)
	db.Close()
	if err := s.Save(ctx); err == nil {
		t.Fatal("a save to a closed database succeeded")
	}
	if st := s.Status(); !st.OK.Equal(now.Add(-time.Minute)) || !st.Failed.Equal(now) || st.Err == "" {
		t.Fatalf("after a failure: %+v", st)
	}
}
