package cluster_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// t0 is the start of every fake timeline.
var t0 = time.UnixMilli(1_767_225_600_000) // 2026-01-01

// group returns hybrid settings.
func group(window, duration, leaky, interval, reduction, concurrency, cleanupEvery, cleanupExpiry int64) limiter.GroupSettings {
	return limiter.GroupSettings{
		SlidingWindowLimit: window, SlidingWindowDuration: duration,
		CleanupInterval: cleanupEvery, CleanupExpiry: cleanupExpiry,
		LeakyLimit: leaky, LeakyTickInterval: interval, LeakyTickReduction: reduction,
		ConcurrencyLimit: concurrency,
	}
}

// equivConfig has groups that reach every branch of the hybrid rule: a
// window in front of a bucket, a bucket alone, a window alone whose
// cleanup drops timestamps still counted (expiry below the duration), a
// group that admits nothing, and a dry_run one.
func equivConfig() limiter.Config {
	dry := group(1, 800, 1, 900, 1, 2, 1000, 5000)
	dry.Mode = limiter.ModeDryRun
	alg := func(k algo.Kind, limit, period, burst, concurrency int64) limiter.GroupSettings {
		g := group(0, 1000, 1, 30000, 1, concurrency, 120000, 120000)
		g.Algorithm, g.Limit, g.Period, g.Burst = k, limit, period, burst
		return g
	}
	return limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		"general": group(3, 1000, 5, 2000, 2, 4, 3000, 1500),
		"tight":   group(0, 1000, 2, 1000, 1, 2, 120000, 120000),
		"win":     group(4, 500, 0, 30000, 450, 10, 700, 300),
		"closed":  group(0, 1000, 0, 30000, 450, 10, 120000, 120000),
		"dry":     dry,
		"bucket":  alg(algo.TokenBucket, 3, 1000, 5, 20),
		"gcra":    alg(algo.GCRA, 2, 1000, 3, 20),
		"fixed":   alg(algo.FixedWindow, 3, 1000, 0, 20),
		"log":     alg(algo.SlidingLog, 3, 1000, 0, 20),
		"sliding": alg(algo.SlidingWindow, 4, 1000, 0, 20),
	}}
}

// clock is the fake clock shared by the limiters and Redis: ms is what
// the scripts take instead of Redis's TIME.
type clock struct{ limitertest.Clock }

func (c *clock) ms() int64 { return c.Now().UnixMilli() }

// redisServers returns the Redis servers the equivalence runs against:
// miniredis always, a real redis-server and a Redis Cluster of three
// masters when redis-server is installed (with CI=true it must be).
func redisServers(t *testing.T) map[string]func(t *testing.T) []string {
	return map[string]func(t *testing.T) []string{
		"miniredis": func(t *testing.T) []string {
			m := miniredis.RunT(t)
			return []string{m.Addr()}
		},
		"redis-server": func(t *testing.T) []string { return []string{redistest.Start(t).Addr()} },
		"redis-cluster": func(t *testing.T) []string {
			var addrs []string
			for _, s := range redistest.StartCluster(t, 3) {
				addrs = append(addrs, s.Addr())
			}
			return addrs
		},
	}
}

// TestSameDecisionsAsLocal runs one recorded sequence — decisions of three
// peers (an IPv4 address, an IPv6 /64, a malformed hop whose text holds
// '{', '}' and '|') in every group, releases in any order, manual
// reductions, time jumps across leaky and cleanup ticks, and live changes
// of the tick intervals — through a Limiter on the local backend and one on
// each cluster mode, and compares every decision, its Retry-After and its
// quota. The scripts take the test's clock instead of Redis's TIME (their
// "now" argument); local_first pushes before every step, as a single
// instance whose pushes were instant would. On a Redis Cluster the keys of
// the three peers live on different masters: every script call must find
// all of its keys on one (no CROSSSLOT).
func TestSameDecisionsAsLocal(t *testing.T) {
	for name, start := range redisServers(t) {
		for _, mode := range []cluster.Mode{cluster.Strict, cluster.LocalFirst} {
			t.Run(name+"/"+mode.String(), func(t *testing.T) {
				runEquivalence(t, start(t), mode, 1, equivConfig())
				runEquivalence(t, start(t), mode, 2, equivConfig())
			})
		}
	}
}

// TestSameDecisionsAsLocal297 is TestSameDecisionsAsLocal under
// arweave.version 2.9.7 (docs/arweave297.md): the cleanups by the window's
// duration, the window-only group's reduction taking its oldest
// timestamp (expired or not: strict mode only, local_first keeps no
// timestamp past the window, see TestReduceWindow297), general counting
// concurrency per worker shard (2 workers), and no group that admits
// nothing (2.9.7 refuses one).
func TestSameDecisionsAsLocal297(t *testing.T) {
	cfg := func(mode cluster.Mode) limiter.Config {
		cfg := equivConfig()
		delete(cfg.Groups, "closed")
		g := cfg.Groups["general"]
		g.NumberOfWorkers, g.ConcurrencyScope = 2, limiter.ScopeShard
		cfg.Groups["general"] = g
		// The window-only group never full of requests in flight, so that
		// reductions find timestamps to take.
		w := cfg.Groups["win"]
		w.ConcurrencyLimit = 1000
		w.ManualReductionDisabled = mode == cluster.LocalFirst
		cfg.Groups["win"] = w
		cfg.ArweaveVersion = limiter.Arweave297
		return cfg
	}
	for name, start := range redisServers(t) {
		for _, mode := range []cluster.Mode{cluster.Strict, cluster.LocalFirst} {
			t.Run(name+"/"+mode.String(), func(t *testing.T) {
				runEquivalence(t, start(t), mode, 3, cfg(mode))
			})
		}
	}
}

func runEquivalence(t *testing.T, addrs []string, mode cluster.Mode, seed uint64, cfg limiter.Config) {
	var c clock
	c.Set(t0)
	local, err := limiter.New(memory.New(), c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.OpenWithClock(cluster.Options{
		Addrs: addrs, Mode: mode, OnFailure: cluster.FailClosed,
		Timeout: 2 * time.Second, Lease: 1000 * time.Hour,
	}, c.ms)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Status().Up {
		t.Fatalf("redis not up: %+v", b.Status())
	}
	shared, err := limiter.New(b, c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	peers := []peer.Peer{
		{Addr: netip.MustParseAddr("192.0.2.7"), Key: peer.KeyFromAddr(netip.MustParseAddr("192.0.2.7"), 64)},
		{Addr: netip.MustParseAddr("2001:db8::1"), Key: peer.KeyFromAddr(netip.MustParseAddr("2001:db8::1"), 64)},
		{Key: peer.OpaqueKey("bad{hop}|x")},
	}
	var groups []string
	for _, name := range []string{"general", "tight", "win", "closed", "dry", "bucket", "gcra", "fixed", "log", "sliding"} {
		if _, ok := cfg.Groups[name]; ok {
			groups = append(groups, name)
		}
	}
	type held struct{ a, b limiter.Decision }
	var open []held
	rng := rand.New(rand.NewPCG(seed, 99))
	counts := map[string]int{}
	for step := range 3000 {
		switch r := rng.IntN(100); {
		case r < 25:
			c.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		case r < 27:
			c.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		}
		if mode == cluster.LocalFirst {
			b.SyncAll(c.ms())
		}
		switch r := rng.IntN(100); {
		case r < 20 && len(open) > 0:
			i := rng.IntN(len(open))
			open[i].a.Release()
			open[i].b.Release()
			open = append(open[:i], open[i+1:]...)
			counts["release"]++
		case r < 25:
			p, gname := peers[rng.IntN(len(peers))], groups[rng.IntN(len(groups))]
			g, _ := local.GroupID(gname)
			ra, rb := local.Reduce(c.Now(), p.Key, g), shared.Reduce(c.Now(), p.Key, g)
			if ra != rb {
				t.Fatalf("step %d: reduce %s in %s: local %v, %s %v", step, p.Key, gname, ra, mode, rb)
			}
			counts["reduce_"+ra.String()]++
			counts[gname+"/reduce_"+ra.String()]++
		case r < 27:
			// A live change: the general group's tick intervals, the
			// limits of an algorithm (its state rescaled), or a group's
			// algorithm (its state dropped).
			switch rng.IntN(3) {
			case 0:
				gs := cfg.Groups["general"]
				gs.LeakyTickInterval = 1000 + int64(rng.IntN(3))*500
				gs.CleanupInterval = 2000 + int64(rng.IntN(3))*1000
				cfg.Groups["general"] = gs
				counts["retime"]++
			case 1:
				name := []string{"bucket", "gcra", "fixed", "log", "sliding"}[rng.IntN(5)]
				gs := cfg.Groups[name]
				gs.Limit, gs.Period = 2+int64(rng.IntN(3)), 500+int64(rng.IntN(3))*500
				if gs.Algorithm.HasBurst() {
					gs.Burst = gs.Limit + int64(rng.IntN(3))
				}
				cfg.Groups[name] = gs
				counts["limits"]++
			default:
				gs := cfg.Groups["sliding"]
				if gs.Algorithm == algo.SlidingWindow {
					gs.Algorithm = algo.FixedWindow
				} else {
					gs.Algorithm = algo.SlidingWindow
				}
				cfg.Groups["sliding"] = gs
				counts["algorithm"]++
			}
			if _, err := local.Apply(c.Now(), cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := shared.Apply(c.Now(), cfg); err != nil {
				t.Fatal(err)
			}
		default:
			// One request, or a burst of a peer in one group, a few ms
			// apart: what reaches every algorithm's limit.
			p, gname := peers[rng.IntN(len(peers))], groups[rng.IntN(len(groups))]
			g, _ := local.GroupID(gname)
			n := 1
			if rng.IntN(4) == 0 {
				n = 2 + rng.IntN(5)
			}
			for range n {
				da, db := local.Decide(c.Now(), p, g), shared.Decide(c.Now(), p, g)
				if da.Allowed != db.Allowed || da.Via != db.Via || da.Reason != db.Reason || da.RetryAfter != db.RetryAfter ||
					da.WouldReject != db.WouldReject || da.Limited != db.Limited || da.Quota() != db.Quota() {
					t.Fatalf("step %d at +%d ms: %s in %s:\n local %+v quota %+v\n %s %+v quota %+v",
						step, c.ms()-t0.UnixMilli(), p.Key, gname, da, da.Quota(), mode, db, db.Quota())
				}
				counts[da.Via.String()+"/"+da.Reason.String()]++
				if s, _ := local.Settings(g); s.Algorithm != algo.Hybrid {
					counts[s.Algorithm.String()+"/"+da.Via.String()+"/"+da.Reason.String()]++
				}
				if da.Allowed {
					open = append(open, held{da, db})
				}
				c.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}
	}
	want := []string{"sliding_window/", "leaky_bucket/", "none/concurrency", "none/rate_limit", "release", "reduce_reduced", "reduce_noop", "retime", "limits", "algorithm"}
	for _, k := range []string{"token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window"} {
		want = append(want, k+"/algorithm/", k+"/none/rate_limit")
	}
	if cfg.ArweaveVersion == limiter.Arweave297 && mode == cluster.Strict {
		want = append(want, "win/reduce_reduced") // the oldest timestamp taken
	}
	for _, want := range want {
		if counts[want] == 0 {
			t.Errorf("the sequence never reached %q: %v", want, counts)
		}
	}
	if st := b.Stats(); st.FailClosed != 0 || !st.Up {
		t.Fatalf("redis failed during the run: %+v %+v", st, b.Status())
	}
}
