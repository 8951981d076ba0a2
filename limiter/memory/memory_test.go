package memory_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

var t0 = limitertest.T0

func at(ms int64) time.Time { return limitertest.At(ms) }

const A, B = "192.0.2.1", "192.0.2.2"

// testConfig is general and a group "test" of 10 tokens per 30 s.
func testConfig() limiter.Config {
	test := limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()
	return limiter.Config{Groups: map[string]limiter.GroupSettings{limiter.GroupGeneral: test, "test": test}}
}

// TestEntryWithoutPointers: the slab of entries (64 MB at a million) is
// never scanned by the garbage collector only while entries hold no
// pointer.
func TestEntryWithoutPointers(t *testing.T) {
	if memory.EntryHoldsPointers() {
		t.Fatal("entry holds a pointer: every GC cycle would scan every tracked entry")
	}
}

func TestEntrySize(t *testing.T) {
	if memory.EntrySize != 64 {
		t.Fatalf("entry is %d bytes; it must be one 64-byte cache line (and the memory budget, ≤ 96 per tracked entry with the index, needs ≤ 72)", memory.EntrySize)
	}
}

// TestSnapshotDeltaDeletedDuringScan: an entry the scan copied and that is
// deleted before the delta is complete must not be in Changed, or a store
// would bring it back (a forgotten peer after a restart).
func TestSnapshotDeltaDeletedDuringScan(t *testing.T) {
	b := memory.New()
	l, err := limiter.New(b, t0, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	g, _ := l.GroupID("test")
	for _, p := range []string{A, B} {
		d := l.Decide(at(0), limitertest.Peer(p), g)
		d.Release()
	}
	l.SnapshotDelta(at(10), true) // both persisted now
	has := func(d limiter.Delta, p string) (changed, deleted bool) {
		for _, e := range d.Changed {
			changed = changed || e.Peer == limitertest.Peer(p).Key
		}
		for _, e := range d.Deleted {
			deleted = deleted || e.Peer == limitertest.Peer(p).Key
		}
		return
	}

	// Incremental: A changes, is copied, then forgotten.
	d := l.Decide(at(20), limitertest.Peer(A), g)
	d.Release()
	memory.SetAfterScan(b, func() { l.Forget(limitertest.Peer(A).Key) })
	delta := l.SnapshotDelta(at(30), false)
	if c, del := has(delta, A); c || !del {
		t.Fatalf("forgotten during the scan: changed %v deleted %v, want false true", c, del)
	}

	// Forgotten and seen again during the scan: both, the newer state wins
	// in a store (deletions first), and the new entry is saved next time.
	d = l.Decide(at(40), limitertest.Peer(B), g)
	d.Release()
	memory.SetAfterScan(b, func() {
		l.Forget(limitertest.Peer(B).Key)
		d := l.Decide(at(45), limitertest.Peer(B), g)
		d.Release()
	})
	delta = l.SnapshotDelta(at(50), false)
	if c, del := has(delta, B); !c || !del {
		t.Fatalf("forgotten and back: changed %v deleted %v, want true true", c, del)
	}
	memory.SetAfterScan(b, nil)
	if c, _ := has(l.SnapshotDelta(at(60), false), B); !c {
		t.Fatal("the new entry of B was not saved by the next delta")
	}

	// The same, but the new entry goes before the next delta: the copy in
	// the store is the old entry's, so the deletion must be reported.
	d = l.Decide(at(62), limitertest.Peer(B), g)
	d.Release()
	memory.SetAfterScan(b, func() {
		l.Forget(limitertest.Peer(B).Key)
		d := l.Decide(at(64), limitertest.Peer(B), g)
		d.Release()
	})
	l.SnapshotDelta(at(66), false)
	memory.SetAfterScan(b, nil)
	l.Forget(limitertest.Peer(B).Key)
	if _, del := has(l.SnapshotDelta(at(68), false), B); !del {
		t.Fatal("an entry created during the scan and forgotten before the next delta: deletion not reported")
	}
	d = l.Decide(at(69), limitertest.Peer(B), g)
	d.Release()
	l.SnapshotDelta(at(69), false)

	// Full: the copy of an entry forgotten during the scan is left out.
	memory.SetAfterScan(b, func() { l.Forget(limitertest.Peer(B).Key) })
	delta = l.SnapshotDelta(at(70), true)
	if c, _ := has(delta, B); c {
		t.Fatal("a full delta kept an entry forgotten during its scan")
	}
}

// TestRestoreUnsortedWindow: a snapshot's window in any order (newest
// first, shuffled) is restored sorted, as a window in order is, so that
// the oldest timestamp still counted is the one the decisions see.
func TestRestoreUnsortedWindow(t *testing.T) {
	const n = 5000
	g := limitertest.Hybrid{Window: n, WindowMS: 3_600_000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
	g.CleanupExpiry = 7_200_000 // the cleanup ticks keep the hour's window
	cfg := limiter.Config{Groups: map[string]limiter.GroupSettings{limiter.GroupGeneral: g}}
	for _, order := range []string{"ascending", "descending", "shuffled"} {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = t0.UnixMilli() + int64(i)
		}
		switch order {
		case "descending":
			slices.Reverse(ts)
		case "shuffled":
			rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
		}
		l, err := limiter.New(memory.New(), at(n), cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := limitertest.Peer(A)
		snap := l.Snapshot(at(n))
		snap.Entries = []limiter.EntrySnapshot{{Peer: p.Key, Group: limiter.GroupGeneral, Window: ts, LastSeen: at(n).Unix()}}
		if _, err := l.Restore(at(n), snap); err != nil {
			t.Fatal(err)
		}
		gid, _ := l.GroupID(limiter.GroupGeneral)
		if d := l.Decide(at(n), p, gid); d.Allowed {
			t.Fatalf("%s: a full window admitted another request", order)
		}
		// An hour after the oldest, it alone has expired: one admission.
		if d := l.Decide(at(3_600_000), p, gid); !d.Allowed || d.Via != limiter.ViaSliding {
			t.Fatalf("%s: after the oldest expired: %+v", order, d)
		} else {
			d.Release()
		}
		if d := l.Decide(at(3_600_000), p, gid); d.Allowed {
			t.Fatalf("%s: the second-oldest expired too early", order)
		}
	}
}
