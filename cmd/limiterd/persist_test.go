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
// grown; its next save is then full, and the store holds what the limiter
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
	full := 0
	for round := 1; round <= 200 && full == 0; round++ {
		now = now.Add(10 * time.Millisecond)
		decide(700, round*700)
		wasFull := s.needFull
		if err := s.save(ctx); err != nil {
			t.Fatal(err)
		}
		if wasFull {
			full = round
			if got, want := s.lastWritten.Load(), int64(lim.Tracked()); got != want {
				t.Errorf("the full save wrote %d entries, want all %d", got, want)
			}
			if s.needFull {
				t.Error("still asking for a full save after one")
			}
		}
	}
	if full == 0 {
		t.Fatal("the store never asked for a full save")
	}
	t.Logf("full save at round %d", full)
	snap, rep, err := db.LoadSnapshot(ctx)
	if err != nil || rep.Skipped != 0 {
		t.Fatal(rep, err)
	}
	if want := lim.Snapshot(now); len(snap.Entries) != len(want.Entries) {
		t.Errorf("the store holds %d entries, the limiter %d", len(snap.Entries), len(want.Entries))
	}
}
