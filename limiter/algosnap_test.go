package limiter_test

import (
	"encoding/json"
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// roundTrip returns snap through JSON, as a store keeps it.
func roundTrip(t *testing.T, snap limiter.Snapshot) limiter.Snapshot {
	t.Helper()
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back limiter.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

// TestAlgorithmRestoreAcrossGap: every algorithm's state survives a
// restart: what was used is still used, and the gap counts as time passed
// (or not at all, for a clock gone backwards).
func TestAlgorithmRestoreAcrossGap(t *testing.T) {
	for _, tc := range []struct {
		k algo.Kind
		// left is the admissions left right after the restore at gap ms
		// past the snapshot (3 of 4 used at 0, snapshot at 100).
		gap, left int64
	}{
		{algo.TokenBucket, 400, 3}, // 1 left, and 0.5 s at 4/s gave 2 back
		{algo.GCRA, 400, 3},
		{algo.FixedWindow, 400, 1}, // the same window [0, 1000)
		{algo.FixedWindow, 900, 4}, // a new one
		{algo.SlidingLog, 400, 1},
		{algo.SlidingLog, 900, 4},     // the three timestamps (0) expired at 1000
		{algo.SlidingWindow, 400, 1},  // the same window: 4 − 3
		{algo.SlidingWindow, 900, 1},  // the next window's start: 4 − 3·(1000 − 0)/1000
		{algo.SlidingWindow, 1400, 2}, // half into it: 4 − 3·0.5 = 2.5 → 2
	} {
		cfg := testConfig(algoSettings(tc.k, 4, 1000, 0, 100))
		l := limitertest.New(t, cfg)
		g, _ := l.GroupID("test")
		for range 3 {
			decideRelease(l, at(0), limitertest.Peer(A), g)
		}
		back := roundTrip(t, l.Snapshot(at(100)))
		l2 := limitertest.New(t, cfg)
		rep, err := l2.Restore(at(100+tc.gap), back)
		if err != nil || rep.Loaded+rep.Expired != 1 {
			t.Fatalf("%v: %+v %v", tc.k, rep, err)
		}
		g2, _ := l2.GroupID("test")
		v, ok := l2.Entry(at(100+tc.gap), limitertest.Peer(A).Key, g2)
		left := int64(4)
		if ok {
			left = v.Algo.Remaining
		}
		if left != tc.left {
			t.Errorf("%v gap %d: %d left after the restore (%+v), want %d", tc.k, tc.gap, left, v.Algo, tc.left)
		}
	}
}

// TestAlgorithmRestoreChanges: restored under other limits the states are
// converted; under another algorithm they are dropped (and deleted from
// the store by the next delta).
func TestAlgorithmRestoreChanges(t *testing.T) {
	cfg := testConfig(algoSettings(algo.TokenBucket, 4, 1000, 0, 100))
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for range 3 {
		decideRelease(l, at(0), limitertest.Peer(A), g)
	}
	back := roundTrip(t, l.Snapshot(at(0)))

	// The period doubled while down: the token left is still one token.
	cfg.Groups["test"] = algoSettings(algo.TokenBucket, 4, 2000, 0, 100)
	l2 := limitertest.New(t, cfg)
	if rep, err := l2.Restore(at(0), back); err != nil || rep.Loaded != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	g2, _ := l2.GroupID("test")
	if v, _ := l2.Entry(at(0), limitertest.Peer(A).Key, g2); v.Algo.Tokens != 1 {
		t.Fatalf("tokens %v after a period change, want 1", v.Algo.Tokens)
	}

	// Now a fixed window: the token bucket's state is dropped.
	cfg.Groups["test"] = algoSettings(algo.FixedWindow, 4, 1000, 0, 100)
	l3 := limitertest.New(t, cfg)
	rep, err := l3.Restore(at(0), back)
	if err != nil || rep.Dropped != 1 || rep.Loaded != 0 || l3.Tracked() != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	d := l3.SnapshotDelta(at(0), false)
	if len(d.Deleted) != 1 || d.Deleted[0].Group != "test" {
		t.Fatalf("delta after a drop: %+v", d.Deleted)
	}
}

// TestAlgorithmSnapshotDelta: the changed entries of every algorithm are
// saved, the deleted ones reported.
func TestAlgorithmSnapshotDelta(t *testing.T) {
	cfg := testConfig(algoSettings(algo.SlidingLog, 4, 1000, 0, 100))
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	decideRelease(l, at(0), limitertest.Peer(A), g)
	decideRelease(l, at(5), limitertest.Peer(A), g)
	d := l.SnapshotDelta(at(10), true)
	if len(d.Changed) != 1 || d.Changed[0].Algorithm != algo.SlidingLog || len(d.Changed[0].Window) != 2 || d.Changed[0].CleanupTick != 0 {
		t.Fatalf("full delta %+v", d.Changed)
	}
	if gs := d.Groups; len(gs) == 0 {
		t.Fatal("no groups")
	}
	for _, gs := range d.Groups {
		if gs.Name == "test" && (gs.Algorithm != algo.SlidingLog || gs.Params != algo.Resolve(4, 1000, 0)) {
			t.Fatalf("group snapshot %+v", gs)
		}
	}
	if d := l.SnapshotDelta(at(10), false); len(d.Changed) != 0 {
		t.Fatalf("nothing changed: %+v", d.Changed)
	}
	l.Tick(at(2000))
	if d := l.SnapshotDelta(at(2000), false); len(d.Deleted) != 1 {
		t.Fatalf("expired entry not reported deleted: %+v", d)
	}
}
