package limiter_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// fakeBackend answers every Admit with out, records what it was asked, and
// implements none of the optional interfaces: what a Redis backend may be.
type fakeBackend struct {
	mu       sync.Mutex
	out      limiter.Outcome
	admits   int
	keys     []peer.Key
	groups   []string
	released []limiter.Handle
	next     uint64
	reduces  int
	forgets  int
}

func (f *fakeBackend) Admit(ms int64, k limiter.Key, g *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admits++
	f.keys = append(f.keys, k.Peer())
	f.groups = append(f.groups, g.Name)
	var h limiter.Handle
	if f.out.Allowed() {
		f.next++
		h = limiter.Handle{A: f.next, B: ^f.next}
	}
	return f.out, limiter.Usage{Tokens: 7, ResetAt: ms + 1000}, h
}

func (f *fakeBackend) Release(h limiter.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, h)
}

func (f *fakeBackend) Reduce(ms int64, k limiter.Key, g *limiter.Group) limiter.ReduceResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reduces++
	return limiter.Reduced
}

func (f *fakeBackend) Forget(k limiter.Key, g *limiter.Group) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgets++
	return true
}

func newFake(t *testing.T, cfg limiter.Config, out limiter.Outcome) (*limiter.Limiter, *fakeBackend) {
	t.Helper()
	f := &fakeBackend{out: out}
	l, err := limiter.New(f, t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, f
}

// TestBackendUnavailable: a backend that cannot decide answers
// ReasonUnavailable; Decide passes it through as a rejection without
// RateLimit fields, in enforce and in dry_run alike (dry_run lets through
// what the limits reject, and no limit was evaluated), and counts it.
func TestBackendUnavailable(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings())
	dry := limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()
	dry.Mode = limiter.ModeDryRun
	cfg.Groups["dry"] = dry
	l, f := newFake(t, cfg, limiter.Outcome{Reason: limiter.ReasonUnavailable, RetryAfter: 2})
	for _, group := range []string{"test", "dry"} {
		g, _ := l.GroupID(group)
		d := l.Decide(at(0), limitertest.Peer(A), g)
		if d.Allowed || d.WouldReject || d.Reason != limiter.ReasonUnavailable || d.Limited || d.Group != g || d.RetryAfter != 2 {
			t.Fatalf("%s: %+v", group, d)
		}
		if q := d.Quota(); q != (limiter.Quota{}) {
			t.Fatalf("%s: an unavailable decision has a quota: %+v", group, q)
		}
		d.Release()
		d.Release()
	}
	if f.admits != 2 || len(f.released) != 0 {
		t.Fatalf("admits %d, released %v", f.admits, f.released)
	}
	if got := limiter.ReasonUnavailable.String(); got != "unavailable" {
		t.Fatalf("label %q", got)
	}
	stats := l.Stats()
	for _, group := range []string{"test", "dry"} {
		if s := stats[group]; s.Requests != 1 || s.Unavailable != 1 || s.WouldReject != 0 || s.RejectedRateLimit != 0 {
			t.Fatalf("%s: %+v", group, s)
		}
	}
}

// TestBackendFailOpen: a backend told to fail open answers ViaUnlimited
// and the zero Handle; Decide admits without limits (no RateLimit fields)
// and hands the Handle back on Release.
func TestBackendFailOpen(t *testing.T) {
	l, f := newFake(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()), limiter.Outcome{Via: limiter.ViaUnlimited})
	g, _ := l.GroupID("test")
	d := l.Decide(at(0), limitertest.Peer(A), g)
	if !d.Allowed || d.Via != limiter.ViaUnlimited || d.Limited || d.WouldReject || d.Reason != limiter.ReasonNone {
		t.Fatalf("%+v", d)
	}
	d.Release()
	if len(f.released) != 1 {
		t.Fatalf("released %v", f.released)
	}
}

// TestMemoryBackend: the memory Backend offers every optional interface
// of the seam, and two Limiters, each on its own, decide alike.
func TestMemoryBackend(t *testing.T) {
	var b limiter.Backend = memory.New()
	for _, iface := range []bool{
		func() bool { _, ok := b.(limiter.Sweeper); return ok }(),
		func() bool { _, ok := b.(limiter.Snapshotter); return ok }(),
		func() bool { _, ok := b.(limiter.Viewer); return ok }(),
		func() bool { _, ok := b.(limiter.StatsReporter); return ok }(),
		func() bool { _, ok := b.(limiter.Reconfigurer); return ok }(),
	} {
		if !iface {
			t.Fatal("the memory backend lacks an optional interface")
		}
	}
	cfg := testConfig(limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings())
	own, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sep, err := limiter.New(b, t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := own.GroupID("test")
	for i := range 4 {
		a, c := own.Decide(at(int64(i)), limitertest.Peer(A), g), sep.Decide(at(int64(i)), limitertest.Peer(A), g)
		if a.Allowed != c.Allowed || a.Via != c.Via || a.Reason != c.Reason || a.Quota() != c.Quota() {
			t.Fatalf("decision %d: own %+v, separate %+v", i, a, c)
		}
		a.Release()
		c.Release()
	}
}

// TestBackendSeam: the policy runs before the backend, an admission's
// handle goes back to the backend that made it exactly once, and a dry_run
// group lets the backend's rejections through.
func TestBackendSeam(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings())
	cfg.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	off := limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()
	off.Mode = limiter.ModeOff
	cfg.Groups["off"] = off
	l, f := newFake(t, cfg, limiter.Outcome{Via: limiter.ViaLeaky})
	g, _ := l.GroupID("test")
	gOff, _ := l.GroupID("off")

	// Denied, exempt, mode off, switch off: the backend is never asked.
	if d := l.Decide(at(0), limitertest.Peer("203.0.113.9"), g); d.Allowed || d.Reason != limiter.ReasonDenied {
		t.Fatalf("denied: %+v", d)
	}
	if d := l.Decide(at(0), limitertest.Peer("10.1.2.3"), g); !d.Allowed || d.Via != limiter.ViaUnlimited || d.Group != limiter.LocalPeers {
		t.Fatalf("exempt: %+v", d)
	}
	if d := l.Decide(at(0), limitertest.Peer(A), gOff); !d.Allowed || d.Via != limiter.ViaUnlimited {
		t.Fatalf("off: %+v", d)
	}
	l.SetEnabled(false)
	if d := l.Decide(at(0), limitertest.Peer(A), g); !d.Allowed || d.Via != limiter.ViaUnlimited {
		t.Fatalf("switch off: %+v", d)
	}
	l.SetEnabled(true)
	if f.admits != 0 {
		t.Fatalf("the backend was asked %d times before any limited decision", f.admits)
	}

	d := l.Decide(at(5), limitertest.Peer(A), g)
	if !d.Allowed || d.Via != limiter.ViaLeaky || !d.Limited || f.admits != 1 {
		t.Fatalf("%+v, admits %d", d, f.admits)
	}
	if f.keys[0] != limitertest.Peer(A).Key || f.groups[0] != "test" {
		t.Fatalf("asked for %v in %q", f.keys[0], f.groups[0])
	}
	if q := d.Quota(); q.BucketRemaining != 3 || q.BucketReset != 1000 || q.BucketLimit != 10 {
		t.Fatalf("quota from the backend's usage: %+v", q)
	}
	d.Release()
	d.Release()
	if len(f.released) != 1 || f.released[0] != (limiter.Handle{A: 1, B: ^uint64(1)}) {
		t.Fatalf("released %v", f.released)
	}

	// Reduce: the policy answers for local_peers and a disabled group.
	if r := l.Reduce(at(6), limitertest.Peer(A).Key, g); r != limiter.Reduced || f.reduces != 1 {
		t.Fatalf("reduce %v, backend asked %d times", r, f.reduces)
	}
	if r := l.Reduce(at(6), limitertest.Peer(A).Key, limiter.LocalPeers); r != limiter.ReduceNoop || f.reduces != 1 {
		t.Fatalf("reduce local_peers %v", r)
	}
	// Forget asks once per limited group.
	groups := len(l.Groups()) - 1
	if n := l.Forget(limitertest.Peer(A).Key); n != groups || f.forgets != groups {
		t.Fatalf("forget %d, backend asked %d times, %d groups", n, f.forgets, groups)
	}

	// dry_run: the backend's rejection is let through, holding no slot.
	f.out = limiter.Outcome{Reason: limiter.ReasonConcurrency, RetryAfter: 1}
	dry := limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()
	dry.Mode = limiter.ModeDryRun
	cfg.Groups["test"] = dry
	if _, err := l.Apply(at(7), cfg); err != nil {
		t.Fatal(err)
	}
	d = l.Decide(at(8), limitertest.Peer(A), g)
	if !d.Allowed || !d.WouldReject || d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("dry_run: %+v", d)
	}
	d.Release()
	if len(f.released) != 1 {
		t.Fatalf("a would-be rejection released a slot: %v", f.released)
	}
	s := l.Stats()["test"]
	// The fake keeps no counters: the policy's are all there is.
	if s.Denied != 1 || s.WouldReject != 1 || s.RejectedConcurrency != 0 || s.ReduceRequests != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestBackendWithoutOptionalInterfaces: with a backend that offers no
// views, snapshots, sweeps or counters, the Limiter goes without them.
func TestBackendWithoutOptionalInterfaces(t *testing.T) {
	l, _ := newFake(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()), limiter.Outcome{Via: limiter.ViaLeaky})
	g, _ := l.GroupID("test")
	d := l.Decide(at(0), limitertest.Peer(A), g)
	defer d.Release()
	l.Tick(at(60000))
	if v := l.Peer(at(1), limitertest.Peer(A).Key); v != nil {
		t.Fatalf("views %+v", v)
	}
	l.Each(at(1), func(limiter.EntryView) bool { t.Fatal("an entry"); return false })
	if n, e := l.Tracked(), evictions(l); n != 0 || e != 0 {
		t.Fatalf("tracked %d, evictions %d", n, e)
	}
	snap := l.Snapshot(at(2))
	if len(snap.Entries) != 0 || len(snap.Groups) == 0 || !snap.Enabled {
		t.Fatalf("snapshot %+v", snap)
	}
	if delta := l.SnapshotDelta(at(2), true); len(delta.Changed) != 0 || len(delta.Groups) == 0 {
		t.Fatalf("delta %+v", delta)
	}
	if _, err := l.Restore(at(3), snap); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseDoesNotAllocate: Release goes through the Backend interface
// with a value handle, and Decide plus Release allocate nothing, on the
// local backend and on another.
func TestReleaseDoesNotAllocate(t *testing.T) {
	const runs = 200
	local := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1_000_000, TickMS: 30000, Reduction: 1, Concurrency: 1_000_000}.Settings()))
	fake, _ := newFake(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings()), limiter.Outcome{Via: limiter.ViaLeaky})
	for name, l := range map[string]*limiter.Limiter{"local": local, "fake": fake} {
		g, _ := l.GroupID("test")
		p := limitertest.Peer(A)
		held := make([]limiter.Decision, runs+1)
		for i := range held {
			if held[i] = l.Decide(at(1), p, g); !held[i].Allowed {
				t.Fatalf("%s: %+v", name, held[i])
			}
		}
		i := 0
		if n := testing.AllocsPerRun(runs, func() { held[i].Release(); i++ }); n != 0 {
			t.Errorf("%s: Release: %v allocations", name, n)
		}
		if n := testing.AllocsPerRun(runs, func() {
			d := l.Decide(at(2), p, g)
			d.Release()
		}); n != 0 {
			t.Errorf("%s: Decide+Release: %v allocations", name, n)
		}
	}
}
