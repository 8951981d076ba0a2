package limiter_test

import (
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Peers of worker shards with 5 workers: the last octet mod 5.
const (
	S1a = "192.0.2.1" // shard 1
	S1b = "192.0.2.6" // shard 1
	S2  = "192.0.2.2" // shard 2
)

// sharded returns s with number_of_workers workers and concurrency_scope
// "shard".
func sharded(s limiter.GroupSettings, workers int64) limiter.GroupSettings {
	s.NumberOfWorkers, s.ConcurrencyScope = workers, limiter.ScopeShard
	return s
}

// config297 is testConfig with arweave.version 2.9.7.
func config297(test limiter.GroupSettings) limiter.Config {
	cfg := testConfig(test)
	cfg.ArweaveVersion = limiter.Arweave297
	return cfg
}

// checkShards fails unless shard i of c holds want[i].
func checkShards(t *testing.T, what string, c *limiter.ShardCounters, want ...int64) {
	t.Helper()
	if c == nil || c.Len() != len(want) {
		t.Fatalf("%s: counters %v, want %d shards", what, c, len(want))
	}
	for i, w := range want {
		if got := c.InFlight(i); got != w {
			t.Errorf("%s: shard %d holds %d, want %d", what, i, got, w)
		}
	}
}

// TestShardConcurrency: with concurrency_scope "shard" concurrency_limit
// counts the requests in flight of every peer of the peer's worker shard
// (docs/arweave297.md): two peers of shard 1 share its 2 slots, a peer of
// shard 2 has its own. A shard rejection changes no state, answers
// Retry-After 1 and is counted; with scope "peer" the same sequence admits
// where the peer's own count is under the limit.
func TestShardConcurrency(t *testing.T) {
	base := limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 30000, Reduction: 1000, Concurrency: 2}.Settings()
	steps := func(third string) []step {
		return []step{
			req(1, S1a, "leaky").state(1, 0, 1), // 0
			req(2, S1b, "leaky").state(1, 0, 1), // 1
			// Shard 1 holds 2; S1a alone holds 1.
			req(3, S1a, third), // 2
			req(4, S2, "leaky"),
			req(5, S2, "leaky").state(2, 0, 2), // 4
			release(7, 1),
			req(8, S1a, "leaky"), // 6
			release(10, 0),
			release(10, 6),
		}
	}
	shard := steps("concurrency")
	shard[2] = shard[2].retryAfter(1).state(1, 0, 1)
	shard = append(shard,
		req(11, S2, "concurrency").retryAfter(1).state(2, 0, 2),
		req(12, S1b, "leaky").state(2, 0, 1))

	l := limitertest.New(t, testConfig(sharded(base, 5)))
	g, _ := l.GroupID("test")
	run(t, l, "test", shard)
	checkShards(t, "after the run", limiter.ShardCountersOf(l, g), 0, 0, 0, 0, 0)
	st := l.Stats()["test"]
	if st.RejectedConcurrency != 2 || st.Requests != 8 || st.AllowedLeaky != 6 {
		t.Errorf("stats: %d rejected by concurrency, %d requests, %d leaky; want 2, 8, 6", st.RejectedConcurrency, st.Requests, st.AllowedLeaky)
	}

	peerScope := limitertest.New(t, testConfig(base))
	if limiter.ShardCountersOf(peerScope, g) != nil {
		t.Error("scope peer has shard counters")
	}
	run(t, peerScope, "test", steps("leaky")[:5])
}

// TestShardRejectionFields: a shard rejection carries the Arweave fields'
// concurrency form and IETF fields saying nothing is left for a second;
// in dry_run it is let through, holds no slot, and is counted as such.
func TestShardRejectionFields(t *testing.T) {
	s := sharded(limitertest.Hybrid{Window: 3, WindowMS: 2000, Leaky: 450, TickMS: 30000, Reduction: 450, Concurrency: 1}.Settings(), 5)
	l := limitertest.New(t, testConfig(s))
	g, _ := l.GroupID("test")
	held := l.Decide(at(1), limitertest.Peer(S1a), g)
	d := l.Decide(at(2), limitertest.Peer(S1b), g)
	if d.Allowed || d.Reason != limiter.ReasonConcurrency || d.RetryAfter != 1 || !d.Limited || d.Holds() {
		t.Fatalf("shard full: %+v", d)
	}
	f, ok := d.Arweave()
	if got := [4]int64{f.Expiring, f.Remaining, f.Reset, f.ResetAmount}; !ok || got != [4]int64{1, 0, 1, 1} || f.Usage != 453 {
		t.Errorf("Arweave fields %v (usage %d), want {1, 0, 1, 1} (453)", got, f.Usage)
	}
	q := d.Quota()
	if q.BucketRemaining != 0 || q.BucketReset != 1000 || q.WindowRemaining != 0 || q.WindowReset != 1000 || q.BucketLimit != 450 {
		t.Errorf("quota %+v", q)
	}

	s.Mode = limiter.ModeDryRun
	if _, err := l.Apply(at(3), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	d = l.Decide(at(4), limitertest.Peer(S1b), g)
	if !d.Allowed || !d.WouldReject || d.Reason != limiter.ReasonConcurrency || d.Holds() {
		t.Fatalf("dry_run: %+v", d)
	}
	d.Release()
	held.Release()
	checkShards(t, "released", limiter.ShardCountersOf(l, g), 0, 0, 0, 0, 0)
	st := l.Stats()["test"]
	if st.RejectedConcurrency != 1 || st.WouldReject != 1 || st.Requests != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestShardReleaseAfterForget: a slot is given back by Release exactly
// once, even after the peer's entry was forgotten.
func TestShardReleaseAfterForget(t *testing.T) {
	l := limitertest.New(t, testConfig(sharded(limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 30000, Reduction: 1000, Concurrency: 1}.Settings(), 5)))
	g, _ := l.GroupID("test")
	c := limiter.ShardCountersOf(l, g)
	d := l.Decide(at(1), limitertest.Peer(S1a), g)
	if !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if n := l.Forget(limitertest.Peer(S1a).Key); n != 1 {
		t.Fatalf("forgot %d entries", n)
	}
	if o := l.Decide(at(2), limitertest.Peer(S1b), g); o.Reason != limiter.ReasonConcurrency {
		t.Fatalf("the forgotten request's slot is free: %+v", o)
	}
	d.Release()
	d.Release()
	checkShards(t, "released twice", c, 0, 0, 0, 0, 0)
	o := l.Decide(at(3), limitertest.Peer(S1b), g)
	if !o.Allowed {
		t.Fatalf("after release: %+v", o)
	}
	o.Release()
}

// TestShardWorkersLiveEdit: a live edit that keeps number_of_workers and
// the scope keeps the counts; one that changes them starts new counters,
// and the requests already in flight give their slot back to the old
// ones, so that no count goes negative or stays held.
func TestShardWorkersLiveEdit(t *testing.T) {
	s := sharded(limitertest.Hybrid{WindowMS: 1000, Leaky: 1000, TickMS: 30000, Reduction: 1000, Concurrency: 1}.Settings(), 5)
	l := limitertest.New(t, testConfig(s))
	g, _ := l.GroupID("test")
	old := limiter.ShardCountersOf(l, g)
	d1 := l.Decide(at(1), limitertest.Peer(S1a), g)

	s.LeakyLimit = 900 // the same shards: the count stays
	if _, err := l.Apply(at(2), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	if c := limiter.ShardCountersOf(l, g); c != old {
		t.Fatal("an edit of leaky_limit replaced the shard counters")
	}
	if d := l.Decide(at(3), limitertest.Peer(S1b), g); d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("after an unrelated edit: %+v", d)
	}

	s.NumberOfWorkers = 3 // 1 mod 3 = 1, 6 mod 3 = 0
	if _, err := l.Apply(at(4), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	next := limiter.ShardCountersOf(l, g)
	d2 := l.Decide(at(5), limitertest.Peer(S1b), g) // shard 0 of 3
	d3 := l.Decide(at(6), limitertest.Peer(S1a), g) // shard 1 of 3: its old request is not counted here
	if !d2.Allowed || !d3.Allowed {
		t.Fatalf("3 workers: %+v %+v", d2, d3)
	}
	if d := l.Decide(at(7), limitertest.Peer("192.0.2.4"), g); d.Reason != limiter.ReasonConcurrency { // 4 mod 3 = 1
		t.Fatalf("shard 1 of 3 full: %+v", d)
	}
	checkShards(t, "old, before release", old, 0, 1, 0, 0, 0)
	d1.Release()
	checkShards(t, "old", old, 0, 0, 0, 0, 0)
	checkShards(t, "new", next, 1, 1, 0)

	s.ConcurrencyScope = limiter.ScopePeer // no shard counters: releases still go to theirs
	if _, err := l.Apply(at(8), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	if limiter.ShardCountersOf(l, g) != nil {
		t.Fatal("scope peer kept shard counters")
	}
	d4 := l.Decide(at(9), limitertest.Peer(S2), g)
	d2.Release()
	d3.Release()
	checkShards(t, "new, released under scope peer", next, 0, 0, 0)
	s.ConcurrencyScope = limiter.ScopeShard
	if _, err := l.Apply(at(10), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	d4.Release() // held no shard slot
	checkShards(t, "fresh", limiter.ShardCountersOf(l, g), 0, 0, 0)
}

// TestShardDecideDoesNotAllocate: the shard count costs no allocation.
func TestShardDecideDoesNotAllocate(t *testing.T) {
	l := limitertest.New(t, testConfig(sharded(limitertest.Hybrid{WindowMS: 1000, Leaky: 1_000_000, TickMS: 30000, Reduction: 1, Concurrency: 2}.Settings(), 5)))
	g, _ := l.GroupID("test")
	p := limitertest.Peer(S1a)
	if n := testing.AllocsPerRun(200, func() {
		d := l.Decide(at(2), p, g)
		d.Release()
	}); n != 0 {
		t.Errorf("Decide+Release: %v allocations", n)
	}
}

// TestShardByte: the shard is the last IPv4 octet (Arweave), the last
// byte of an IPv6 key's prefix (limiterd's extension), mod the workers.
func TestShardByte(t *testing.T) {
	for _, c := range []struct {
		addr   string
		prefix int
		want   byte
	}{
		{"192.0.2.1", 64, 1},
		{"10.0.0.255", 64, 255},
		{"::ffff:10.0.0.7", 64, 7},
		{"2001:db8:0:12ab:ffff::1", 64, 0xab},
		{"2001:db8:0:12ab:ffff::1", 48, 0},
		{"2001:db8:5:12ab:ffff::1", 48, 5},
		{"2001:db8:0:12ab:ffff::1", 60, 0xa0},
		{"2001:db8::17", 128, 0x17},
	} {
		k := peer.KeyFromAddr(limitertest.Peer(c.addr).Addr, c.prefix)
		if got := k.ShardByte(); got != c.want {
			t.Errorf("%s/%d: %#x, want %#x", c.addr, c.prefix, got, c.want)
		}
	}
	if got := limiter.NewShardCounters(5).Shard(254); got != 4 {
		t.Errorf("254 mod 5: %d", got)
	}
}

// TestCleanup297: with 2.9.7 a cleanup tick drops the timestamps with ts +
// sliding_window_duration ≤ the tick (there is no separate expiry);
// 2.9.6 keeps them until they are older than the expiry (120000 here).
func TestCleanup297(t *testing.T) {
	s := limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
	s.CleanupInterval = 5000 // ticks at 5000, 10000, …
	steps := func(v limiter.ArweaveVersion) []step {
		kept := check(5000, S1a, 0, 1, 0)
		if v == limiter.Arweave297 {
			kept = gone(5000, S1a) // 4000 + 1000 ≤ 5000
		}
		return []step{
			req(4000, S1a, "sliding"),
			release(4000, 0),
			req(4001, S2, "sliding"),
			release(4001, 2),
			tick(5000),
			kept,
			check(5000, S2, 0, 1, 0), // 4001 + 1000 > 5000: kept by both
		}
	}
	for _, v := range []limiter.ArweaveVersion{limiter.Arweave296, limiter.Arweave297} {
		t.Run(v.String(), func(t *testing.T) {
			cfg := testConfig(s)
			cfg.ArweaveVersion = v
			run(t, limitertest.New(t, cfg), "test", steps(v))
		})
	}
	// The group suite's peer_cleanup (window 1/1000, leaky 1, concurrency
	// 2), its manual ticks placed on the schedule: leaky ticks every 5000,
	// a cleanup tick at 20000 that leaves nothing.
	pc := limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 1, TickMS: 5000, Reduction: 1, Concurrency: 2}.Settings()
	pc.CleanupInterval = 20000
	run(t, limitertest.New(t, config297(pc)), "test", []step{
		req(1, S1a, "sliding"), req(20, S1a, "leaky").state(1, 1, 2), req(300, S1a, "concurrency").retryAfter(1),
		release(400, 0), release(400, 1),
		tick(5000), tick(10000), check(10000, S1a, 0, 1, 0),
		tick(20000), gone(20000, S1a),
	})
	// The same tick applied lazily, by the peer's next decision.
	l := limitertest.New(t, config297(s))
	run(t, l, "test", []step{
		req(4000, S1a, "sliding"), release(4000, 0), req(4500, S1a, "sliding"), release(4500, 2),
		req(5000, S1a, "sliding").state(0, 2, 1), // 4000 dropped by the tick at 5000, 4500 kept
	})
}

// TestReduce297 runs the group suite's manual reduction sequences
// (arweave_limiter_group_SUITE: leaky_manual_reduction and
// sliding_manual_reduction) under both versions: with a bucket both give
// back a token; without one 2.9.7 removes the oldest window timestamp
// while 2.9.6 has nothing to give back. An unknown peer's reduction is an
// ok answer that creates nothing (the node writes an empty entry, which
// no decision can see; docs/arweave297.md, decision 154).
func TestReduce297(t *testing.T) {
	leaky := []step{
		req(1, S1a, "leaky"), req(20, S1a, "leaky"), req(40, S1a, "leaky"), req(60, S1a, "leaky").state(4, 0, 4),
		reduce(61, S1a, "reduced"), reduce(61, S1a, "reduced").state(2, 0, 4),
		reduce(61, S2, "noop"), gone(61, S2),
		reduce(62, S1a, "reduced"), reduce(62, S1a, "reduced").state(0, 0, 4),
		reduce(63, S1a, "noop").state(0, 0, 4),
	}
	sliding := func(v limiter.ArweaveVersion) []step {
		steps := []step{req(1, S1a, "sliding"), req(20, S1a, "sliding"), req(40, S1a, "sliding"), req(60, S1a, "sliding").state(0, 4, 4)}
		if v == limiter.Arweave296 {
			return append(steps, reduce(61, S1a, "noop").state(0, 4, 4))
		}
		return append(steps,
			reduce(61, S1a, "reduced").state(0, 3, 4),
			reduce(61, S2, "noop"), gone(61, S2),
			reduce(62, S1a, "reduced"), reduce(62, S1a, "reduced"), reduce(62, S1a, "reduced").state(0, 0, 4),
			reduce(63, S1a, "noop").state(0, 0, 4),
			// The window holds 0: five more fit.
			req(64, S1a, "sliding"), req(64, S1a, "sliding"), req(64, S1a, "sliding"), req(64, S1a, "sliding"),
			req(64, S1a, "sliding"), req(64, S1a, "concurrency"))
	}
	for _, v := range []limiter.ArweaveVersion{limiter.Arweave296, limiter.Arweave297} {
		t.Run(v.String(), func(t *testing.T) {
			cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 5, TickMS: 100000, Reduction: 1, Concurrency: 10}.Settings())
			cfg.ArweaveVersion = v
			run(t, limitertest.New(t, cfg), "test", leaky)
			cfg = testConfig(limitertest.Hybrid{Window: 5, WindowMS: 1000, Leaky: 0, TickMS: 100000, Reduction: 1, Concurrency: 9}.Settings())
			cfg.ArweaveVersion = v
			run(t, limitertest.New(t, cfg), "test", sliding(v))
		})
	}
}

// TestReduce297OldestStored: 2.9.7 removes the oldest timestamp held, even
// one already out of the window (only cleanup ticks prune them): then the
// reduction changes no decision. Before it expires, it frees a place.
func TestReduce297OldestStored(t *testing.T) {
	s := limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
	for _, c := range []struct {
		name  string
		v     limiter.ArweaveVersion
		at    int64
		steps []step
	}{
		// At 1100 the timestamp 1 is out of the window but held.
		{"expired/2.9.7", limiter.Arweave297, 1100, []step{
			reduce(1100, S1a, "reduced").state(0, 1, 0),
			req(1100, S1a, "sliding"), req(1100, S1a, "rate_limit"),
		}},
		{"expired/2.9.6", limiter.Arweave296, 1100, []step{
			reduce(1100, S1a, "noop").state(0, 2, 0),
			req(1100, S1a, "sliding"), req(1100, S1a, "rate_limit"),
		}},
		{"live/2.9.7", limiter.Arweave297, 600, []step{
			reduce(600, S1a, "reduced").state(0, 1, 0),
			req(600, S1a, "sliding"), req(600, S1a, "rate_limit"),
		}},
		{"live/2.9.6", limiter.Arweave296, 600, []step{
			reduce(600, S1a, "noop").state(0, 2, 0),
			req(600, S1a, "rate_limit"),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(s)
			cfg.ArweaveVersion = c.v
			run(t, limitertest.New(t, cfg), "test", append([]step{
				req(1, S1a, "sliding"), release(1, 0), req(500, S1a, "sliding"), release(500, 2),
			}, c.steps...))
		})
	}
}

// TestLeakyTicks297: the 2.9.7 tick rule, applied one tick at a time
// (tokens ≤ 0 → the entry is deleted; 0 < tokens < reduction → 0; else
// tokens − reduction), gives what algo.Tick computes for n ticks at once
// (the rule of 2.9.6, which both versions use): tokens left, ticks that
// reduced, deletion.
func TestLeakyTicks297(t *testing.T) {
	for r := int64(1); r <= 7; r++ {
		for tokens := int64(0); tokens <= 30; tokens++ {
			left, reducing, deleted := tokens, int64(0), false
			for n := int64(1); n <= 40; n++ {
				if !deleted {
					switch {
					case left <= 0:
						deleted = true
					case left < r:
						left, reducing = 0, reducing+1
					default:
						left, reducing = left-r, reducing+1
					}
				}
				gl, gr, gd := leakyTicks(tokens, n, r)
				if gl != left || gr != reducing || gd != deleted {
					t.Fatalf("tokens %d, %d ticks of %d: algo.Tick (%d, %d, %v), 2.9.7 rule (%d, %d, %v)", tokens, n, r, gl, gr, gd, left, reducing, deleted)
				}
			}
		}
	}
}
