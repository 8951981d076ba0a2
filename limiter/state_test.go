package limiter_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestPure enforces that the core imports the standard library only (and
// its own sub-packages, such as limiter/algo, pure in turn: their
// dependencies are in this list too).
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		// The core's own sub-packages (limiter/ratelimit) are pure too:
		// their standard-library-only deps are checked here with the rest.
		if dep == "github.com/limiterd/limiterd/limiter" || strings.HasPrefix(dep, "github.com/limiterd/limiterd/limiter/") {
			continue
		}
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") {
			t.Errorf("limiter imports %s: the core is standard library only", dep)
		}
	}
}

// TestConcurrentOnePeer: 2000 goroutines on one peer with leaky_limit 450
// get exactly 450 admissions.
func TestConcurrentOnePeer(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 450, TickMS: 30000, Reduction: 450, Concurrency: 150}.Settings()))
	g, _ := l.GroupID(limiter.GroupGeneral)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 2000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := l.Decide(at(5), limitertest.Peer(A), g)
			defer d.Release()
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := admitted.Load(); n != 450 {
		t.Fatalf("admitted %d, want 450", n)
	}
	st := l.Stats()[limiter.GroupGeneral]
	if st.Requests != 2000 || st.AllowedLeaky != 450 || st.RejectedRateLimit+st.RejectedConcurrency != 1550 {
		t.Fatalf("stats %+v", st)
	}
	if st.ItemsConcurrency != 0 || st.PeersConcurrency != 0 {
		t.Fatalf("in-flight left after every release: %+v", st)
	}
}

// TestConcurrentManyPeers: 150 peers × 600 calls → 450 × 150 admitted.
func TestConcurrentManyPeers(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 450, TickMS: 30000, Reduction: 450, Concurrency: 150}.Settings()))
	g, _ := l.GroupID(limiter.GroupGeneral)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < 150; p++ {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr := limitertest.Peer(fmt.Sprintf("198.51.100.%d", p))
				for i := 0; i < 150; i++ {
					d := l.Decide(at(5), pr, g)
					if d.Allowed {
						admitted.Add(1)
					}
					d.Release()
				}
			}()
		}
	}
	wg.Wait()
	if n := admitted.Load(); n != 450*150 {
		t.Fatalf("admitted %d, want %d", n, 450*150)
	}
	if l.Tracked() != 150 {
		t.Fatalf("tracked %d, want 150", l.Tracked())
	}
}

func TestExemptDenySwitch(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings())
	cfg.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for i := 0; i < 5; i++ {
		d := l.Decide(at(0), limitertest.Peer("10.1.2.3"), g)
		if !d.Allowed || d.Via != limiter.ViaUnlimited || d.Group != limiter.LocalPeers || d.Limited {
			t.Fatalf("exempt peer: %+v", d)
		}
	}
	if d := l.Decide(at(0), limitertest.Peer("203.0.113.9"), g); d.Allowed || d.Reason != limiter.ReasonDenied {
		t.Fatalf("denied peer: %+v", d)
	}
	if l.Tracked() != 0 {
		t.Fatalf("exempt and denied peers must not take entries, tracked %d", l.Tracked())
	}
	st := l.Stats()
	if st[limiter.GroupLocalPeers].Requests != 5 || st["test"].Denied != 1 {
		t.Fatalf("stats: local %+v test %+v", st[limiter.GroupLocalPeers], st["test"])
	}

	// The global switch: off admits with no state change, on restores limits.
	if d := l.Decide(at(1), limitertest.Peer(A), g); d.Via != limiter.ViaLeaky {
		t.Fatalf("%+v", d)
	}
	l.SetEnabled(false)
	for i := 0; i < 3; i++ {
		if d := l.Decide(at(2), limitertest.Peer(A), g); d.Via != limiter.ViaUnlimited {
			t.Fatalf("switch off: %+v", d)
		}
	}
	if d := l.Decide(at(2), limitertest.Peer("203.0.113.9"), g); d.Reason != limiter.ReasonDenied {
		t.Fatalf("deny applies with the switch off: %+v", d)
	}
	l.SetEnabled(true)
	if d := l.Decide(at(3), limitertest.Peer(A), g); d.Reason != limiter.ReasonRateLimit {
		t.Fatalf("switch on again: %+v", d)
	}
}

func TestMaxTrackedEvictsLongestIdle(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings())
	cfg.MaxTracked = 3
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	// Peers seen at 0 s, 1 s, 2 s; then the first is seen again at 3 s.
	for i, p := range []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.10"} {
		d := l.Decide(at(int64(i)*1000), limitertest.Peer(p), g)
		d.Release()
	}
	// A fourth peer evicts .11, idle longest.
	d := l.Decide(at(4000), limitertest.Peer("192.0.2.13"), g)
	d.Release()
	if l.Tracked() != 3 {
		t.Fatalf("tracked %d, want 3", l.Tracked())
	}
	if v := l.Peer(at(4000), limitertest.Peer("192.0.2.11").Key); len(v) != 0 {
		t.Fatalf(".11 should have been evicted: %+v", v)
	}
	for _, p := range []string{"192.0.2.10", "192.0.2.12", "192.0.2.13"} {
		if v := l.Peer(at(4000), limitertest.Peer(p).Key); len(v) != 1 {
			t.Fatalf("%s should be tracked", p)
		}
	}
	if evictions(l) != 1 || l.Stats()["test"].Evictions != 1 {
		t.Fatalf("evictions %d", evictions(l))
	}
}

// TestMaxTrackedClosedGroup: a new peer in a closed group is rejected and
// keeps nothing, so it evicts nobody.
func TestMaxTrackedClosedGroup(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 10}.Settings())
	cfg.Groups["closed"] = limitertest.Hybrid{WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
	cfg.MaxTracked = 1
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	closed, _ := l.GroupID("closed")
	d := l.Decide(at(0), limitertest.Peer(A), g)
	d.Release()
	if d := l.Decide(at(1000), limitertest.Peer(B), closed); d.Allowed || d.Reason != limiter.ReasonRateLimit {
		t.Fatalf("closed group: %+v, want a rate_limit rejection", d)
	}
	if l.Tracked() != 1 || evictions(l) != 0 || len(l.Peer(at(1000), limitertest.Peer(A).Key)) != 1 {
		t.Fatalf("tracked %d, evictions %d: A's entry should still be there", l.Tracked(), evictions(l))
	}
}

// TestForgetKeepsInFlight: a forget drops a peer's tokens and window but
// not its requests in flight, which keep counting against the concurrency
// limit until released: forgetting a peer never lets it put more than
// concurrency_limit of its requests on the node. The release of a request
// admitted before the forget still finds its entry.
func TestForgetKeepsInFlight(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 1}.Settings()))
	g, _ := l.GroupID("test")
	p := limitertest.Peer(A)
	d := l.Decide(at(0), p, g)
	if n := l.Forget(p.Key); n != 1 {
		t.Fatalf("forgot %d entries", n)
	}
	if v := l.Peer(at(1), p.Key); len(v) != 1 || v[0].Inflight != 1 || v[0].Tokens != 0 {
		t.Fatalf("after the forget: %+v, want one request in flight and no token", v)
	}
	if d2 := l.Decide(at(1), p, g); d2.Allowed || d2.Reason != limiter.ReasonConcurrency {
		t.Fatalf("a second request while the first is in flight: %+v", d2)
	}
	d.Release()
	if v := l.Peer(at(2), p.Key); len(v) != 0 {
		t.Fatalf("released, the forgotten entry should be gone: %+v", v)
	}
	d3 := l.Decide(at(2), p, g)
	if !d3.Allowed {
		t.Fatalf("after the release: %+v", d3)
	}
	if v := l.Peer(at(2), p.Key); len(v) != 1 || v[0].Inflight != 1 || v[0].Tokens != 1 {
		t.Fatalf("a fresh state: %+v", v)
	}
	d3.Release()
}

// TestAlgorithmChangeKeepsInFlight: a live change of a group's algorithm
// drops its peers' state but not their requests in flight.
func TestAlgorithmChangeKeepsInFlight(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 10, Concurrency: 1}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	p := limitertest.Peer(A)
	d := l.Decide(at(0), p, g)
	tb := cfg.Groups["test"]
	tb.Algorithm, tb.Limit, tb.Period = algo.TokenBucket, 10, 1000
	cfg.Groups["test"] = tb
	dropped, err := l.Apply(at(1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if dropped["test"] != 1 {
		t.Fatalf("dropped %v, want test: 1", dropped)
	}
	if d2 := l.Decide(at(2), p, g); d2.Allowed || d2.Reason != limiter.ReasonConcurrency {
		t.Fatalf("a second request while the first is in flight: %+v", d2)
	}
	d.Release()
	d3 := l.Decide(at(3), p, g)
	if !d3.Allowed || d3.Via != limiter.ViaAlgorithm {
		t.Fatalf("after the release, the token bucket: %+v", d3)
	}
	d3.Release()
}

func TestQuota(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 5, TickMS: 30000, Reduction: 5, Concurrency: 10}.Settings()))
	g, _ := l.GroupID("test")
	d := l.Decide(at(7000), limitertest.Peer(A), g)
	q := d.Quota()
	if !d.Limited || q.BucketLimit != 5 || q.BucketRemaining != 5 || q.BucketWindow != 30000 || q.BucketReset != 23000 ||
		q.WindowLimit != 2 || q.WindowRemaining != 1 || q.WindowReset != 1000 {
		t.Fatalf("quota %+v", q)
	}
	l.Decide(at(7100), limitertest.Peer(A), g)
	d = l.Decide(at(7200), limitertest.Peer(A), g)
	if d.Via != limiter.ViaLeaky || d.Quota().BucketRemaining != 4 || d.Quota().WindowRemaining != 0 || d.Quota().WindowReset != 800 {
		t.Fatalf("%+v", d)
	}
}

func TestLiveIntervalChangeKeepsPhase(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 30000, Reduction: 1, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for i := 0; i < 10; i++ {
		d := l.Decide(at(1000), limitertest.Peer(A), g)
		d.Release()
	}
	// At 20 s the interval becomes 5 s: the tick at 30 s still happens,
	// then one every 5 s.
	cfg.Groups["test"] = limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 5000, Reduction: 1, Concurrency: 100}.Settings()
	if _, err := l.Apply(at(20_000), cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ at, tokens int64 }{{29_999, 10}, {30_000, 9}, {34_999, 9}, {35_000, 8}, {45_000, 6}} {
		if v := l.Peer(at(c.at), limitertest.Peer(A).Key); v[0].Tokens != c.tokens {
			t.Fatalf("at %d: tokens %d, want %d", c.at, v[0].Tokens, c.tokens)
		}
	}
}

func TestStatsCountTicks(t *testing.T) {
	l := limitertest.New(t, testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 3, Concurrency: 100}.Settings()))
	g, _ := l.GroupID("test")
	for i := 0; i < 5; i++ {
		d := l.Decide(at(0), limitertest.Peer(A), g)
		d.Release()
	}
	l.Tick(at(10_000))
	st := l.Stats()["test"]
	// 5 tokens, 3 per tick: ticks 1 and 2 reduce (3 then 2), tick 3 deletes.
	if st.TickReductionsPeer != 2 || st.TickTokenReductions != 5 || st.TickDeletePeer != 1 || st.LeakyTicks != 10 {
		t.Fatalf("%+v", st)
	}
	if st.PeersTokens != 0 || st.ItemsTokens != 0 || l.Tracked() != 0 {
		t.Fatalf("gauges not back to zero: %+v", st)
	}
}

func TestSettingErrors(t *testing.T) {
	bad := limitertest.Hybrid{WindowMS: 0, Leaky: 10, TickMS: 1000, Reduction: 3, Concurrency: 100}.Settings()
	err := bad.Validate("chunk")
	if err == nil || err.Error() != "http_api.limiter.chunk.sliding_window_duration: must be an integer > 0, got 0" {
		t.Fatalf("%v", err)
	}
	bad = limitertest.Hybrid{Window: -1, WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 3, Concurrency: 100}.Settings()
	if err := bad.Validate("x"); err == nil || !strings.Contains(err.Error(), "x.sliding_window_limit") {
		t.Fatalf("%v", err)
	}
	if _, err := limiter.New(memory.New(), t0, testConfig(bad)); err == nil || !strings.Contains(err.Error(), "http_api.limiter.test.sliding_window_limit") {
		t.Fatalf("%v", err)
	}
	// A missing key takes general's value.
	got, err := limiter.ResolveGroups(map[string]limiter.PartialGroup{"custom": {limiter.KeyLeakyLimit: int64(10)}})
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.ArweaveGroups()[limiter.GroupGeneral]
	want.LeakyLimit = 10
	if got["custom"] != want {
		t.Fatalf("%+v", got["custom"])
	}
	if _, err := limiter.ResolveGroups(map[string]limiter.PartialGroup{"local_peers": {}}); err == nil {
		t.Fatal("local_peers is reserved")
	}
}

// TestEvictionOrderAtScale fills a table past max_tracked in several
// rounds and checks that each eviction takes the entry idle longest (to
// the second) among those with nothing in flight, also when candidates
// chosen by an earlier survey were seen again since.
func TestEvictionOrderAtScale(t *testing.T) {
	const n = 5000
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings())
	cfg.MaxTracked = n
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	ip := func(i int) peer.Peer {
		return limitertest.Peer(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
	}
	decide := func(i int, sec int64, release bool) {
		d := l.Decide(at(sec*1000), ip(i), g)
		if !d.Allowed {
			t.Fatalf("peer %d at %d s: %+v", i, sec, d)
		}
		if release {
			d.Release()
		}
	}
	// Peer i last seen at second i; peer 12 keeps a request in flight.
	for i := range n {
		decide(i, int64(i), i != 12)
	}
	tracked := func(i int) bool { return len(l.Peer(at(n*1000), ip(i).Key)) == 1 }
	// Five new peers evict peers 0–4.
	for i := n; i < n+5; i++ {
		decide(i, n, true)
	}
	// Peers 5–9, candidates of that survey, are seen again.
	for i := 5; i < 10; i++ {
		decide(i, n+1, true)
	}
	// Five more evict 10, 11, 13, 14, 15: not the fresh 5–9, not 12 in flight.
	for i := n + 5; i < n+10; i++ {
		decide(i, n+2, true)
	}
	gone := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 10: true, 11: true, 13: true, 14: true, 15: true}
	for i := range n + 10 {
		if tracked(i) == gone[i] {
			t.Errorf("peer %d: tracked %v, want %v", i, tracked(i), !gone[i])
		}
	}
	if l.Tracked() != n || evictions(l) != 10 {
		t.Fatalf("tracked %d, evictions %d; want %d, 10", l.Tracked(), evictions(l), n)
	}
}

// TestEvictionConcurrent: goroutines flooding a full table with new peers,
// holding some requests in flight, while the sweeper runs. Run with -race.
func TestEvictionConcurrent(t *testing.T) {
	const capacity, workers, each = 1000, 8, 1500
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 3_600_000, Reduction: 1, Concurrency: 10}.Settings())
	cfg.MaxTracked = capacity
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	var wg sync.WaitGroup
	var rejected atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []limiter.Decision
			for i := range each {
				p := limitertest.Peer(fmt.Sprintf("10.%d.%d.%d", w, i>>8, i&255))
				d := l.Decide(at(int64(i)), p, g)
				if !d.Allowed {
					rejected.Add(1)
				}
				if i%50 == 0 {
					held = append(held, d) // in flight: never evicted
				} else {
					d.Release()
				}
			}
			for i := range held {
				held[i].Release()
			}
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
				l.Tick(at(i % each)) // no leaky tick falls in the first hour
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	if rejected.Load() != 0 {
		t.Fatalf("%d rejections of new peers", rejected.Load())
	}
	if n := l.Tracked(); n > capacity+workers {
		t.Fatalf("tracked %d, cap %d (+%d inserting goroutines)", n, capacity, workers)
	}
	if got, want := evictions(l), uint64(workers*each-l.Tracked()); got != want {
		t.Fatalf("evictions %d, want %d", got, want)
	}
	var inflight int64
	for _, s := range l.Stats() {
		inflight += s.ItemsConcurrency
	}
	if inflight != 0 {
		t.Fatalf("in flight after every release: %d", inflight)
	}
}

// admitN decides (and releases) n requests of peer p in group g at ms.
func admitN(l *limiter.Limiter, ms int64, p string, g limiter.GroupID, n int) {
	for range n {
		d := l.Decide(at(ms), limitertest.Peer(p), g)
		d.Release()
	}
}

// TestApplyAppliesDueTicksFirst: a tick that fell before a live edit is
// applied with the settings in force when it fell, as the Arweave node's
// eager ticks would be, even if no decision touched the entry since.
func TestApplyAppliesDueTicksFirst(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 1, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	admitN(l, 0, A, g, 10)
	// The tick at 1 s took one token (reduction 1); at 1.1 s the reduction
	// becomes 10.
	cfg.Groups["test"] = limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 10, Concurrency: 100}.Settings()
	if _, err := l.Apply(at(1100), cfg); err != nil {
		t.Fatal(err)
	}
	if v := l.Peer(at(1200), limitertest.Peer(A).Key); len(v) != 1 || v[0].Tokens != 9 {
		t.Fatalf("after the edit: %+v, want 9 tokens", v)
	}
	if v := l.Peer(at(2000), limitertest.Peer(A).Key); len(v) != 1 || v[0].Tokens != 0 {
		t.Fatalf("after the next tick (reduction 10): %+v, want 0 tokens", v)
	}

	// The cleanup expiry: a timestamp the old expiry kept past a cleanup
	// tick stays until the next one.
	cfg = testConfig(limiter.GroupSettings{SlidingWindowLimit: 1, SlidingWindowDuration: 1000,
		CleanupInterval: 100, CleanupExpiry: 5000, LeakyLimit: 0, LeakyTickInterval: 1000, LeakyTickReduction: 1, ConcurrencyLimit: 10})
	l = limitertest.New(t, cfg)
	d := l.Decide(at(0), limitertest.Peer(A), g)
	d.Release()
	gs := cfg.Groups["test"]
	gs.CleanupExpiry = 10
	cfg.Groups["test"] = gs
	if _, err := l.Apply(at(150), cfg); err != nil {
		t.Fatal(err)
	}
	// Eagerly: the tick at 100 kept the timestamp (expiry 5 s); the next,
	// at 200, drops it. At 160 the window (1 per 1 s) is still full.
	if d := l.Decide(at(160), limitertest.Peer(A), g); d.Allowed {
		t.Fatalf("at 160: %+v, want a rejection (the window still holds 0)", d)
	}
}

// TestGroupRemovedAndBack: a group removed and defined again at once (before
// the sweeper ran) does not keep entries whose tick index belongs to its old
// schedule: they would wait for the new schedule's index to catch up, an
// hour here, with their tokens stuck.
func TestGroupRemovedAndBack(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 10, Concurrency: 100}.Settings())
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	admitN(l, 3_600_000, A, g, 10)
	without := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 10, TickMS: 1000, Reduction: 10, Concurrency: 100}.Settings())
	delete(without.Groups, "test")
	if _, err := l.Apply(at(3_600_000), without); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(at(3_600_100), cfg); err != nil {
		t.Fatal(err)
	}
	if d := l.Decide(at(3_602_000), limitertest.Peer(A), g); !d.Allowed {
		t.Fatalf("two ticks later: %+v, want the bucket drained", d)
	}
}
