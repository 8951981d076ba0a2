package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/store"
)

// The snapshotter saves incrementally until the store says its log has
// grown; it then has the store fold the log into its base (no full save:
// the limiter is not scanned for it), and the store holds what the limiter
// holds.
func TestSnapshotterCompacts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	lim, err := limiter.New(now, limiter.Config{Groups: limiter.ArweaveGroups(), IPv6Prefix: 64, MaxTracked: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	th, err := limiter.NewThrottle(limiter.ArweaveThrottleConfig(), now)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &snapshotter{lim: lim, th: th, db: db, log: slog.New(slog.DiscardHandler), now: clock}
	ctx := context.Background()
	if err := s.restore(ctx); err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	peers := make([]limiter.Peer, 3000)
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
	if err := s.save(ctx); err != nil { // the first save after restore is full
		t.Fatal(err)
	}
	compacted := 0
	for round := 1; round <= 200 && compacted == 0; round++ {
		now = now.Add(10 * time.Millisecond)
		decide(700, round*700)
		if err := s.save(ctx); err != nil {
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
