package limiter_test

import (
	"fmt"
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// floodPeer is the i-th peer of a flood, outside 192.0.2.0/24.
func floodPeer(i int) peer.Peer {
	return limitertest.Peer(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
}

// TestEvictionExhaustFloodStillLimited is the flood scenario: a peer
// exhausts its limits, then, while it stays idle for 20 s, max_tracked ×
// 1.5 distinct peers arrive, one request each, and a polite peer makes one
// request every 5 s; the sweeper runs every second. The flood evicts its
// own light entries, not the abuser's (it is still rejected afterwards,
// its state intact) nor the polite peer's, and the eviction counters say
// how many went. For every algorithm; the hybrid at the size
// (max_tracked 100 000, 150 000 peers) but with -short.
func TestEvictionExhaustFloodStillLimited(t *testing.T) {
	big := 100_000
	if testing.Short() {
		big = 2000
	}
	for _, tc := range []struct {
		name     string
		s        limiter.GroupSettings
		capacity int
	}{
		// Window 5 a minute, then 10 tokens that leak in an hour.
		{"hybrid", limitertest.Hybrid{Window: 5, WindowMS: 60_000, Leaky: 10, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings(), big},
		{"token_bucket", algoSettings(algo.TokenBucket, 10, 3_600_000, 0, 10), 2000},
		{"gcra", algoSettings(algo.GCRA, 10, 3_600_000, 0, 10), 2000},
		{"fixed_window", algoSettings(algo.FixedWindow, 10, 3_600_000, 0, 10), 2000},
		{"sliding_window", algoSettings(algo.SlidingWindow, 10, 3_600_000, 0, 10), 2000},
		{"sliding_log", algoSettings(algo.SlidingLog, 10, 3_600_000, 0, 10), 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capacity := tc.capacity
			flood := capacity * 3 / 2
			cfg := testConfig(tc.s)
			cfg.MaxTracked = capacity
			l := limitertest.New(t, cfg)
			g, _ := l.GroupID("test")
			abuser, polite := limitertest.Peer("192.0.2.66"), limitertest.Peer("192.0.2.7")
			// The abuser exhausts its limits at second 0.
			admitted := 0
			for {
				d := l.Decide(at(0), abuser, g)
				d.Release()
				if !d.Allowed {
					if d.Reason != limiter.ReasonRateLimit {
						t.Fatalf("abuser: %+v", d)
					}
					break
				}
				admitted++
			}
			// Over the next 20 s, the flood; the polite peer makes one
			// request every 5 s; the sweeper ticks each second.
			politeRequests, lastTick := uint64(0), int64(-1)
			for i := range flood {
				ms := int64(i) * 20_000 / int64(flood)
				if ms/1000 != lastTick {
					lastTick = ms / 1000
					l.Tick(at(ms))
				}
				if i == 0 || ms/5000 != int64(i-1)*20_000/int64(flood)/5000 {
					d := l.Decide(at(ms), polite, g)
					if !d.Allowed {
						t.Fatalf("polite peer rejected at %d ms: %+v", ms, d)
					}
					d.Release()
					politeRequests++
				}
				d := l.Decide(at(ms), floodPeer(i), g)
				if !d.Allowed {
					t.Fatalf("flood peer %d rejected: %+v", i, d)
				}
				d.Release()
				if i%(flood/100) == 0 {
					if v, ok := l.Entry(at(ms), polite.Key, g); !ok || v.Requests != politeRequests {
						t.Fatalf("polite peer after flood peer %d: %+v, %v; want %d requests", i, v, ok, politeRequests)
					}
				}
			}
			end := at(20_000)
			v, ok := l.Entry(end, abuser.Key, g)
			if !ok || v.Requests != uint64(admitted+1) || v.RejectedRateLimit != 1 {
				t.Fatalf("abuser's entry after the flood: %+v, %v (admitted %d)", v, ok, admitted)
			}
			if d := l.Decide(end, abuser, g); d.Allowed || d.Reason != limiter.ReasonRateLimit {
				t.Fatalf("abuser after the flood: %+v, want a rate_limit rejection", d)
			}
			// Nothing expired in the hour: every entry made beyond the cap
			// evicted one.
			want := uint64(2 + flood - capacity)
			if l.Tracked() != capacity || evictions(l) != want || l.Stats()["test"].Evictions != want {
				t.Fatalf("tracked %d, evictions %d (group %d); want %d, %d", l.Tracked(), evictions(l), l.Stats()["test"].Evictions, capacity, want)
			}
		})
	}
}

// TestEvictionPrefersLight: a light entry goes before one that carries
// state even when it is newer; among entries that carry state, the one
// idle longest goes; after a sweep, a lapsed state is graded light again.
func TestEvictionPrefersLight(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{Window: 2, WindowMS: 60_000, Leaky: 0, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings()) // 2 a minute
	cfg.MaxTracked = 3
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	a, b, c, d, e := limitertest.Peer("192.0.2.1"), limitertest.Peer("192.0.2.2"), limitertest.Peer("192.0.2.3"), limitertest.Peer("192.0.2.4"), limitertest.Peer("192.0.2.5")
	decideRelease(l, at(0), a, g) // a: limited at 0 s
	decideRelease(l, at(0), a, g)
	decideRelease(l, at(5_000), b, g) // b: light at 5 s
	decideRelease(l, at(6_000), c, g) // c: limited at 6 s
	decideRelease(l, at(6_000), c, g)
	tracked := func(p peer.Peer, ms int64) bool { _, ok := l.Entry(at(ms), p.Key, g); return ok }
	decideRelease(l, at(10_000), d, g)
	if tracked(b, 10_000) || !tracked(a, 10_000) || !tracked(c, 10_000) {
		t.Fatal("d should have evicted b, the light one, not a or c")
	}
	decideRelease(l, at(11_000), d, g) // d: limited at 11 s
	decideRelease(l, at(12_000), e, g)
	if tracked(a, 12_000) || !tracked(c, 12_000) || !tracked(d, 12_000) {
		t.Fatal("e should have evicted a, limited and idle longest")
	}
	// At 70 s c's window has lapsed (a sweep grades it light again) and d
	// is still limited, e light but newer: the next peer evicts c.
	decideRelease(l, at(62_000), e, g)
	decideRelease(l, at(62_000), e, g) // e: limited at 62 s
	l.Tick(at(70_000))
	decideRelease(l, at(70_000), a, g)
	if tracked(c, 70_000) || !tracked(d, 70_000) || !tracked(e, 70_000) {
		t.Fatal("a should have evicted c, whose window lapsed")
	}
	if evictions(l) != 3 {
		t.Fatalf("evictions %d, want 3", evictions(l))
	}
}

// TestEvictionResurveys: a table full of limited entries (group strict,
// one request a minute) surveyed before a flood of light ones (group
// test) arrives. Without surveying again, the candidates already chosen
// (every strict entry: each shard holds fewer than a batch) would all go
// first; with resurveyAfter, at most that many per shard (64 shards) go
// before the newcomers do.
func TestEvictionResurveys(t *testing.T) {
	const capacity, flood = 20_000, 10_000
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings())
	cfg.Groups["strict"] = limitertest.Hybrid{Window: 1, WindowMS: 60_000, Leaky: 0, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings()
	cfg.MaxTracked = capacity
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	strict, _ := l.GroupID("strict")
	for i := range capacity + 1 { // the last one evicts: a survey
		decideRelease(l, at(int64(i)), floodPeer(i), strict)
	}
	for i := range flood {
		decideRelease(l, at(30_000), floodPeer(1_000_000+i), g)
	}
	st := l.Stats()
	lost := st["strict"].Evictions
	if max := uint64(64*64 + 64); lost > max {
		t.Fatalf("%d limited entries evicted for %d light newcomers; at most %d expected", lost, flood, max)
	}
	if got := st["strict"].Evictions + st["test"].Evictions; got != flood+1 || evictions(l) != got {
		t.Fatalf("evictions %d (strict %d + test %d), want %d", evictions(l), st["strict"].Evictions, st["test"].Evictions, flood+1)
	}
	t.Logf("limited entries evicted: %d of %d evictions", lost, flood+1)
}
