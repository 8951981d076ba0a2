package ui

import (
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestUsagesAlgorithms: a peer's state under each of the other algorithms
// (docs/limiting.md) as the peers pages show it: used of the limit (the bucket for the token
// bucket and GCRA), what is left and when more comes back, after 3
// requests and after 10 in the same millisecond.
func TestUsagesAlgorithms(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000) // a multiple of the period: the window ends 2 s later
	for _, c := range []struct {
		k            algo.Kind
		used3, limit int64
		left3        string
		used10       int64
		left10       string
	}{
		{algo.TokenBucket, 3, 8, "5 left, one back every 400 ms", 8, "none left, next in 400 ms"},
		{algo.GCRA, 3, 8, "5 left, one back every 400 ms", 8, "none left, next in 400 ms"},
		{algo.FixedWindow, 3, 5, "2 left, all back in 2 s", 5, "none left, all back in 2 s"},
		{algo.SlidingLog, 3, 5, "2 left, each back 2 s after it", 5, "none left, next in 2 s"},
		{algo.SlidingWindow, 3, 5, "2 left, more as the window slides", 5, "none left, next in 2 s"},
	} {
		t.Run(c.k.String(), func(t *testing.T) {
			groups := limiter.ArweaveGroups()
			s := groups[limiter.GroupGeneral]
			s.Algorithm, s.Limit, s.Period, s.ConcurrencyLimit = c.k, 5, 2000, 100
			if c.k.HasBurst() {
				s.Burst = 8
			}
			groups[limiter.GroupGeneral] = s
			l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
			if err != nil {
				t.Fatal(err)
			}
			g, _ := l.GroupID(limiter.GroupGeneral)
			a := netip.MustParseAddr("192.0.2.1")
			p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
			send := func(n int) {
				for range n {
					d := l.Decide(t0, p, g)
					d.Release()
				}
			}
			check := func(used int64, left string) {
				t.Helper()
				vs := l.Peer(t0, p.Key)
				if len(vs) != 1 {
					t.Fatalf("%d views", len(vs))
				}
				us := usages(&vs[0], &s)
				if len(us) != 1 || us[0].Name != c.k.String() || us[0].Used != used || us[0].Limit != c.limit || us[0].Left != left {
					t.Fatalf("usage %+v, want %s %d / %d %q", us, c.k, used, c.limit, left)
				}
			}
			send(3)
			check(c.used3, c.left3)
			send(7)
			check(c.used10, c.left10)
		})
	}
}
