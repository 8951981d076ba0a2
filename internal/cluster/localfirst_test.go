package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// bucketOnly is a group of one leaky bucket of limit l that never leaks
// during a test, and no concurrency cap to speak of.
func bucketOnly(l int64) limiter.Config {
	return limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		"general": group(0, 1000, l, 3_600_000, l, 1_000_000, 120000, 120000),
	}}
}

// lfInstance is one local_first instance on a shared fake clock.
type lfInstance struct {
	b   *cluster.Backend
	lim *limiter.Limiter
}

func newLF(t *testing.T, addr string, c *clock, cfg limiter.Config, maxUnsynced int) lfInstance {
	t.Helper()
	b, err := cluster.OpenWithClock(cluster.Options{
		Addrs: []string{addr}, Mode: cluster.LocalFirst, OnFailure: cluster.FailClosed,
		Timeout: 2 * time.Second, Lease: time.Hour, SyncInterval: 100 * time.Millisecond, MaxUnsynced: maxUnsynced,
	}, c.ms)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lim, err := limiter.New(b, c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lfInstance{b, lim}
}

func (in lfInstance) decide(c *clock, peer string) bool {
	g, _ := in.lim.GroupID("general")
	d := in.lim.Decide(c.Now(), peerOf(peer), g)
	d.Release()
	return d.Allowed
}

// TestLocalFirstBound measures the over-admission of local_first
// (docs/cluster.md, "The over-admission bound"): two instances, one peer, each
// at a known rate (a = 1 request per ms), pushing every F = 100 ms with their
// phases φ apart, round trips instant on the test's clock (R = 0). Admitted
// beyond the limit L = 100 must stay within the worst case Σ_{j≠i} aⱼ·(2F + R)
// = 200, and within the typical Σᵢ aᵢ·(F + R) = 200 (the same for N = 2). With
// max_unsynced b, an instance makes at most b admissions on one read of the
// shared state: the excess stays within N·b.
func TestLocalFirstBound(t *testing.T) {
	srv := redistest.Start(t)
	const L, F, a = 100, 100, 1
	for n, tc := range []struct {
		phase, maxUnsynced int
		bound              int
	}{
		{0, 0, a * (2*F + 0)}, {10, 0, a * (2*F + 0)}, {50, 0, a * (2*F + 0)}, {90, 0, a * (2*F + 0)},
		{0, 10, 2 * 10}, {50, 10, 2 * 10}, {50, 3, 2 * 3},
	} {
		var c clock
		c.Set(t0)
		cfg := bucketOnly(L)
		x, y := newLF(t, srv.Addr(), &c, cfg, tc.maxUnsynced), newLF(t, srv.Addr(), &c, cfg, tc.maxUnsynced)
		peer := fmt.Sprintf("198.51.100.%d", n+1)
		admitted := 0
		for ms := range 1000 {
			c.Set(t0.Add(time.Duration(ms) * time.Millisecond))
			if ms%F == 0 {
				x.b.SyncAll(c.ms())
			}
			if ms%F == tc.phase {
				y.b.SyncAll(c.ms())
			}
			for _, in := range []lfInstance{x, y} {
				for range a {
					if in.decide(&c, peer) {
						admitted++
					}
				}
			}
		}
		over := admitted - L
		t.Logf("phase %d ms, max_unsynced %d: %d admitted, %d over the limit (bound %d)", tc.phase, tc.maxUnsynced, admitted, over, tc.bound)
		if over < 0 || over > tc.bound {
			t.Errorf("phase %d, max_unsynced %d: %d over the limit of %d, bound %d", tc.phase, tc.maxUnsynced, over, L, tc.bound)
		}
	}
}

// TestLocalFirstLimitedUntil: a peer Redis reported limited is answered
// locally, without a round trip, and is not refreshed at the pushes,
// until its limitedUntil; then it is admitted again.
func TestLocalFirstLimitedUntil(t *testing.T) {
	srv := redistest.Start(t)
	var c clock
	c.Set(t0)
	cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		"general": group(0, 1000, 5, 10_000, 5, 1000, 120000, 120000),
	}}
	x := newLF(t, srv.Addr(), &c, cfg, 0)
	for i := range 5 {
		if !x.decide(&c, "192.0.2.1") {
			t.Fatalf("request %d rejected", i)
		}
	}
	x.b.SyncAll(c.ms()) // pushes the 5: Redis answers limited until the next tick
	trips := x.b.Stats().RoundTrips
	for range 100 {
		if x.decide(&c, "192.0.2.1") {
			t.Fatal("admitted over the limit")
		}
		c.Add(10 * time.Millisecond)
		x.b.SyncAll(c.ms())
	}
	if got := x.b.Stats().RoundTrips; got != trips {
		t.Fatalf("%d round trips for a peer known limited", got-trips)
	}
	c.Set(t0.Add(10 * time.Second)) // the tick
	if !x.decide(&c, "192.0.2.1") {
		t.Fatal("still limited after the tick")
	}
}

// TestLocalFirstMaxUnsynced: with max_unsynced b, an instance that made b
// admissions on one read pushes them and reads again before the next
// decision (one round trip), so it sees the other instances' pushes.
func TestLocalFirstMaxUnsynced(t *testing.T) {
	srv := redistest.Start(t)
	var c clock
	c.Set(t0)
	cfg := bucketOnly(10)
	x, y := newLF(t, srv.Addr(), &c, cfg, 4), newLF(t, srv.Addr(), &c, cfg, 4)
	// y spends 8 of the 10, pushing as it goes.
	for range 8 {
		if !y.decide(&c, "192.0.2.2") {
			t.Fatal("y rejected")
		}
	}
	y.b.SyncAll(c.ms())
	// x read the peer before y's admissions: its first read is at its
	// first decision, which sees them.
	var admitted int
	for range 10 {
		if x.decide(&c, "192.0.2.2") {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("x admitted %d, want the 2 left", admitted)
	}
	trips := x.b.Stats().RoundTrips
	x.decide(&c, "192.0.2.2")
	if got := x.b.Stats().RoundTrips - trips; got != 0 {
		t.Fatalf("%d round trips deciding with nothing unsynced", got)
	}
}
