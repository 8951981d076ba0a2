package store_test

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The other algorithms (docs/limiting.md) through the store: the entries'
// algorithm and state, the groups' algorithm and limits, saved and loaded back,
// and restored into a limiter.
func TestSaveAlgorithmState(t *testing.T) {
	db := MustOpenDB(t)
	groups := limiter.ArweaveGroups()
	for name, k := range map[string]algo.Kind{"tb": algo.TokenBucket, "gcra": algo.GCRA, "fw": algo.FixedWindow, "log": algo.SlidingLog, "sw": algo.SlidingWindow} {
		g := groups[limiter.GroupGeneral]
		g.Algorithm, g.Limit, g.Period = k, 5, 60_000
		groups[name] = g
	}
	cfg := limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	l, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.0.0.1")
	p := peer.Peer{Addr: addr, Key: peer.KeyFromAddr(addr, 64)}
	for _, name := range []string{"tb", "gcra", "fw", "log", "sw"} {
		g, _ := l.GroupID(name)
		for i := range 3 {
			d := l.Decide(t0.Add(time.Duration(i)*time.Second), p, g)
			d.Release()
		}
	}
	at := t0.Add(5 * time.Second)
	d := l.SnapshotDelta(at, true)
	if len(d.Changed) != 5 {
		t.Fatalf("%d entries", len(d.Changed))
	}
	if _, err := db.SaveDelta(ctx, d); err != nil {
		t.Fatal(err)
	}
	snap, rep := mustLoad(t, db)
	if rep.Entries != 5 || rep.Skipped != 0 {
		t.Fatalf("load %+v", rep)
	}
	if want := l.Snapshot(at); !reflect.DeepEqual(snap.Entries, sortEntries(want.Entries)) || !reflect.DeepEqual(snap.Groups, want.Groups) {
		t.Fatalf("loaded\n%+v\n%+v\nwant\n%+v\n%+v", snap.Entries, snap.Groups, sortEntries(want.Entries), want.Groups)
	}
	// A new process restores them: the same admissions left.
	l2, err := limiter.New(memory.New(), at, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := l2.Restore(at, snap); err != nil || rep.Loaded != 5 {
		t.Fatalf("restore %+v %v", rep, err)
	}
	for _, name := range []string{"tb", "gcra", "fw", "log", "sw"} {
		g, _ := l.GroupID(name)
		a, _ := l.Entry(at, p.Key, g)
		b, _ := l2.Entry(at, p.Key, g)
		if a.Algo != b.Algo || a.Algo.Remaining < 2 {
			t.Errorf("%s: %+v before, %+v after", name, a.Algo, b.Algo)
		}
	}
}
