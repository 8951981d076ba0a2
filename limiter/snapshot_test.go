package limiter_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
)

func TestRestoreAcrossGap(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 4, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for i := 0; i < 12; i++ { // 2 by the window, 10 tokens
		l.Decide(at(1000), limitertest.Peer(A), g)
	}
	l.Decide(at(1000), limitertest.Peer(B), g) // window only
	l.SetEnabled(false)
	snap := l.Snapshot(at(10_000))
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back limiter.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}

	t.Run("forward gap applies the ticks that fell in it", func(t *testing.T) {
		l2 := limitertest.New(t, cfg) // a new process: its own epoch, replaced by the snapshot's
		// Down from 10 s to 65 s: ticks at 30 s and 60 s took 8 tokens.
		rep, err := l2.Restore(at(65_000), back)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Loaded != 2 || rep.Gap != 55*time.Second {
			t.Fatalf("%+v", rep)
		}
		if l2.Enabled() {
			t.Fatal("the global switch was not restored")
		}
		v := l2.Peer(at(65_000), limitertest.Peer(A).Key)
		if len(v) != 1 || v[0].Tokens != 2 || v[0].Inflight != 0 {
			t.Fatalf("%+v", v)
		}
		// The phase survived: the next tick is at 90 s, not 65 s + 30 s.
		check := l2.Peer(at(89_999), limitertest.Peer(A).Key)
		if check[0].Tokens != 2 {
			t.Fatalf("tick came early: %+v", check)
		}
		if v := l2.Peer(at(90_000), limitertest.Peer(A).Key); v[0].Tokens != 0 {
			t.Fatalf("tick at 90 s missing: %+v", v)
		}
	})
	t.Run("fully expired entries are not loaded", func(t *testing.T) {
		l2 := limitertest.New(t, cfg)
		// At 200 s: A drained by 4 ticks... (10 tokens, 4 per tick: 30, 60, 90 drain, 120 deletes);
		// B's window timestamp (1 s) is dropped by the cleanup at 120 s (expiry 120 s? 1000 < 0 no):
		// cleanup ticks at 120 s and 240 s; at 240 s 1000 < 240000-120000.
		rep, err := l2.Restore(at(250_000), back)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Loaded != 0 || rep.Expired != 2 || l2.Tracked() != 0 {
			t.Fatalf("%+v tracked %d", rep, l2.Tracked())
		}
	})
	t.Run("a clock gone backwards counts as no gap", func(t *testing.T) {
		l2 := limitertest.New(t, cfg)
		rep, err := l2.Restore(at(-5_000), back) // 15 s before the snapshot
		if err != nil {
			t.Fatal(err)
		}
		if rep.Gap != 0 || rep.Loaded != 2 {
			t.Fatalf("%+v", rep)
		}
		// Nothing elapsed: 10 tokens, the window full for 1000-(10000-1000)... the
		// window timestamps moved back by 15 s with everything else.
		v := l2.Peer(at(-5_000), limitertest.Peer(A).Key)
		if len(v) != 1 || v[0].Tokens != 10 || v[0].Window != 2 {
			t.Fatalf("%+v", v)
		}
		// The next tick is 20 s after the snapshot's time (30 s - 10 s).
		if v := l2.Peer(at(-5_000+19_999), limitertest.Peer(A).Key); v[0].Tokens != 10 {
			t.Fatalf("%+v", v)
		}
		if v := l2.Peer(at(-5_000+20_000), limitertest.Peer(A).Key); v[0].Tokens != 6 {
			t.Fatalf("%+v", v)
		}
	})
}

func TestSnapshotDelta(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 10, Concurrency: 10}.Settings()))
	g, _ := l.GroupID("test")
	for i := 0; i < 5; i++ {
		d := l.Decide(at(0), limitertest.Peer(fmt.Sprintf("192.0.2.%d", i)), g)
		d.Release()
	}
	full := l.SnapshotDelta(at(0), true)
	if !full.Full || len(full.Changed) != 5 || len(full.Deleted) != 0 {
		t.Fatalf("full: %d changed, %d deleted", len(full.Changed), len(full.Deleted))
	}
	if d := l.SnapshotDelta(at(0), false); len(d.Changed) != 0 || len(d.Deleted) != 0 {
		t.Fatalf("nothing changed, got %+v", d)
	}
	// One decision: one change. One forget: one deletion.
	d := l.Decide(at(100), limitertest.Peer("192.0.2.1"), g)
	d.Release()
	l.Forget(limitertest.Peer("192.0.2.2").Key)
	delta := l.SnapshotDelta(at(200), false)
	if len(delta.Changed) != 1 || delta.Changed[0].Peer != limitertest.Peer("192.0.2.1").Key || delta.Changed[0].Tokens != 2 {
		t.Fatalf("changed %+v", delta.Changed)
	}
	if len(delta.Deleted) != 1 || delta.Deleted[0] != (limiter.EntryRef{Peer: limitertest.Peer("192.0.2.2").Key, Group: "test"}) {
		t.Fatalf("deleted %+v", delta.Deleted)
	}
	// An entry never saved is not reported when it goes.
	d = l.Decide(at(300), limitertest.Peer("192.0.2.99"), g)
	d.Release()
	l.Forget(limitertest.Peer("192.0.2.99").Key)
	if delta := l.SnapshotDelta(at(300), false); len(delta.Deleted) != 0 || len(delta.Changed) != 0 {
		t.Fatalf("%+v", delta)
	}
	// Ticks that empty saved entries report them deleted.
	l.Tick(at(5000))
	if delta := l.SnapshotDelta(at(5000), false); len(delta.Deleted) != 4 {
		t.Fatalf("after the ticks: %+v", delta.Deleted)
	}
}

func TestReleaseAfterRestore(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()))
	g, _ := l.GroupID("test")
	d := l.Decide(at(0), limitertest.Peer(A), g)
	if _, err := l.Restore(at(1), limiter.Snapshot{TakenAt: at(1).UnixMilli(), Enabled: true}); err != nil {
		t.Fatal(err)
	}
	d2 := l.Decide(at(2), limitertest.Peer(A), g) // a new entry, likely in the same slot and generation
	d.Release()                                   // stale: must neither panic nor release d2's slot
	if v := l.Peer(at(2), limitertest.Peer(A).Key); len(v) != 1 || v[0].Inflight != 1 {
		t.Fatalf("%+v", v)
	}
	d2.Release()
}

// TestRestoreAfterAHugeGap: 2³¹ ticks and more (25 days of 1 ms ticks)
// do not wrap into a negative gap that leaves the bucket full.
func TestRestoreAfterAHugeGap(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1, Reduction: 1, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	admitN(l, 0, A, g, 10)
	snap := l.Snapshot(at(0))
	for _, gap := range []int64{1 << 31, 1<<31 + 1000, 1 << 33} {
		l2 := limitertest.New(t, cfg)
		if _, err := l2.Restore(at(gap), snap); err != nil {
			t.Fatal(err)
		}
		if v := l2.Peer(at(gap), limitertest.Peer(A).Key); len(v) != 0 && v[0].Tokens != 0 {
			t.Fatalf("gap %d ms: %+v, want the bucket empty", gap, v)
		}
		if d := l2.Decide(at(gap), limitertest.Peer(A), g); !d.Allowed {
			t.Fatalf("gap %d ms: %+v, want an admission", gap, d)
		}
	}
}

// TestRestoreCapCountsOnlyRestorable: entries that cannot be restored (a
// removed group, a bad key) take no place under max_tracked.
func TestRestoreCapCountsOnlyRestorable(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for _, p := range []string{A, B} {
		d := l.Decide(at(0), limitertest.Peer(p), g)
		d.Release()
	}
	snap := l.Snapshot(at(0))
	// Two newer entries of a group the restoring config lacks.
	for i := range 2 {
		e := snap.Entries[0]
		e.Group, e.LastSeen = "gone", e.LastSeen+int64(10+i)
		snap.Entries = append(snap.Entries, e)
	}
	cfg.MaxTracked = 2
	l2 := limitertest.New(t, cfg)
	rep, err := l2.Restore(at(0), snap)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Loaded != 2 || rep.Skipped != 2 || l2.Tracked() != 2 {
		t.Fatalf("%+v, tracked %d: want both valid entries loaded, the two others skipped", rep, l2.Tracked())
	}
}
