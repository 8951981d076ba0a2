package limiter_test

import (
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/shardcount"
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
func checkShards(t *testing.T, what string, c *shardcount.Counters, want ...int64) {
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
// (SPEC §6.3): two peers of shard 1 share its 2 slots, a peer of shard 2
// has its own. A shard rejection changes no state, answers Retry-After 1
// and is counted; with scope "peer" the same sequence admits where the
// peer's own count is under the limit.
func TestShardConcurrency(t *testing.T) {
	base := settings(0, 1000, 1000, 30000, 1000, 2)
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

	l := newLimiter(t, testConfig(sharded(base, 5)))
	g, _ := l.GroupID("test")
	run(t, l, "test", shard)
	checkShards(t, "after the run", limiter.ShardCounters(l, g), 0, 0, 0, 0, 0)
	st := l.Stats()["test"]
	if st.RejectedConcurrency != 2 || st.Requests != 8 || st.AllowedLeaky != 6 {
		t.Errorf("stats: %d rejected by concurrency, %d requests, %d leaky; want 2, 8, 6", st.RejectedConcurrency, st.Requests, st.AllowedLeaky)
	}

	peerScope := newLimiter(t, testConfig(base))
	if limiter.ShardCounters(peerScope, g) != nil {
		t.Error("scope peer has shard counters")
	}
	run(t, peerScope, "test", steps("leaky")[:5])
}

// TestShardRejectionFields: a shard rejection carries the Arweave fields'
// concurrency form and IETF fields saying nothing is left for a second;
// in dry_run it is let through, holds no slot, and is counted as such.
func TestShardRejectionFields(t *testing.T) {
	s := sharded(settings(3, 2000, 450, 30000, 450, 1), 5)
	l := newLimiter(t, testConfig(s))
	g, _ := l.GroupID("test")
	held := l.Decide(at(1), peer(S1a), g)
	d := l.Decide(at(2), peer(S1b), g)
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
	if err := l.Apply(at(3), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	d = l.Decide(at(4), peer(S1b), g)
	if !d.Allowed || !d.WouldReject || d.Reason != limiter.ReasonConcurrency || d.Holds() {
		t.Fatalf("dry_run: %+v", d)
	}
	d.Release()
	held.Release()
	checkShards(t, "released", limiter.ShardCounters(l, g), 0, 0, 0, 0, 0)
	st := l.Stats()["test"]
	if st.RejectedConcurrency != 1 || st.WouldReject != 1 || st.Requests != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestShardReleaseAfterForget: a slot is given back by Release exactly
// once, even after the peer's entry was forgotten.
func TestShardReleaseAfterForget(t *testing.T) {
	l := newLimiter(t, testConfig(sharded(settings(0, 1000, 1000, 30000, 1000, 1), 5)))
	g, _ := l.GroupID("test")
	c := limiter.ShardCounters(l, g)
	d := l.Decide(at(1), peer(S1a), g)
	if !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if n := l.Forget(peer(S1a).Key); n != 1 {
		t.Fatalf("forgot %d entries", n)
	}
	if o := l.Decide(at(2), peer(S1b), g); o.Reason != limiter.ReasonConcurrency {
		t.Fatalf("the forgotten request's slot is free: %+v", o)
	}
	d.Release()
	d.Release()
	checkShards(t, "released twice", c, 0, 0, 0, 0, 0)
	o := l.Decide(at(3), peer(S1b), g)
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
	s := sharded(settings(0, 1000, 1000, 30000, 1000, 1), 5)
	l := newLimiter(t, testConfig(s))
	g, _ := l.GroupID("test")
	old := limiter.ShardCounters(l, g)
	d1 := l.Decide(at(1), peer(S1a), g)

	s.LeakyLimit = 900 // the same shards: the count stays
	if err := l.Apply(at(2), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	if c := limiter.ShardCounters(l, g); c != old {
		t.Fatal("an edit of leaky_limit replaced the shard counters")
	}
	if d := l.Decide(at(3), peer(S1b), g); d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("after an unrelated edit: %+v", d)
	}

	s.NumberOfWorkers = 3 // 1 mod 3 = 1, 6 mod 3 = 0
	if err := l.Apply(at(4), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	next := limiter.ShardCounters(l, g)
	d2 := l.Decide(at(5), peer(S1b), g) // shard 0 of 3
	d3 := l.Decide(at(6), peer(S1a), g) // shard 1 of 3: its old request is not counted here
	if !d2.Allowed || !d3.Allowed {
		t.Fatalf("3 workers: %+v %+v", d2, d3)
	}
	if d := l.Decide(at(7), peer("192.0.2.4"), g); d.Reason != limiter.ReasonConcurrency { // 4 mod 3 = 1
		t.Fatalf("shard 1 of 3 full: %+v", d)
	}
	checkShards(t, "old, before release", old, 0, 1, 0, 0, 0)
	d1.Release()
	checkShards(t, "old", old, 0, 0, 0, 0, 0)
	checkShards(t, "new", next, 1, 1, 0)

	s.ConcurrencyScope = limiter.ScopePeer // no shard counters: releases still go to theirs
	if err := l.Apply(at(8), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	if limiter.ShardCounters(l, g) != nil {
		t.Fatal("scope peer kept shard counters")
	}
	d4 := l.Decide(at(9), peer(S2), g)
	d2.Release()
	d3.Release()
	checkShards(t, "new, released under scope peer", next, 0, 0, 0)
	s.ConcurrencyScope = limiter.ScopeShard
	if err := l.Apply(at(10), testConfig(s)); err != nil {
		t.Fatal(err)
	}
	d4.Release() // held no shard slot
	checkShards(t, "fresh", limiter.ShardCounters(l, g), 0, 0, 0)
}

// TestShardDecideDoesNotAllocate: the shard count costs no allocation.
func TestShardDecideDoesNotAllocate(t *testing.T) {
	l := newLimiter(t, testConfig(sharded(settings(0, 1000, 1_000_000, 30000, 1, 2), 5)))
	g, _ := l.GroupID("test")
	p := peer(S1a)
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
		k := limiter.KeyFromAddr(peer(c.addr).Addr, c.prefix)
		if got := k.ShardByte(); got != c.want {
			t.Errorf("%s/%d: %#x, want %#x", c.addr, c.prefix, got, c.want)
		}
	}
	if got := shardcount.New(5).Shard(254); got != 4 {
		t.Errorf("254 mod 5: %d", got)
	}
}
