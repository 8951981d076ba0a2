package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestRedisClusterFailover: two instances share one limit on a real Redis
// Cluster of three masters with a replica each, started by the test; a
// master is stopped, its replica is promoted, and meanwhile the instances
// decide as on_failure says (closed: 503, never an admission beyond the
// limit); once the replica serves the slots they share the limit again,
// on keys of the promoted node as on the others.
func TestRedisClusterFailover(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	c := redistest.StartClusterReplicas(t, 3, 1, 1000)
	var addrs []string
	for _, s := range c.Nodes {
		addrs = append(addrs, s.Addr())
	}
	o := cluster.Options{Addrs: addrs, OnFailure: cluster.FailClosed, Timeout: 500 * time.Millisecond}
	a, limA, logA := open(t, o)
	b, limB, logB := open(t, o)
	if !a.Status().Up || !b.Status().Up {
		t.Fatalf("%+v %+v", a.Status(), b.Status())
	}
	key := func(peer string) string { return "ld:" + cluster.TagOf(peer, "general") + ":pt" }
	// peerOn returns a peer not used yet whose keys live on node s.
	next := 0
	peerOn := func(s *redistest.Server) string {
		t.Helper()
		for range 200 {
			next++
			p := fmt.Sprintf("198.51.100.%d", next)
			if c.MasterOf(key(p)) == s {
				return p
			}
		}
		t.Fatalf("no peer found on %s", s.Addr())
		return ""
	}
	// general: leaky_limit 3 and concurrency 2 (open's group): one limit
	// across both instances.
	shared := func(peer string) int {
		t.Helper()
		n := 0
		var seen []string
		for i := range 8 {
			lim := limA
			if i%2 == 1 {
				lim = limB
			}
			d := decide(lim, peer)
			seen = append(seen, fmt.Sprintf("%v/%v", d.Via, d.Reason))
			if d.Allowed {
				n++
				d.Release()
			}
		}
		if n != 3 {
			t.Logf("peer %s: %v", peer, seen)
		}
		return n
	}
	masters := map[*redistest.Server]bool{}
	for _, p := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"} {
		masters[c.MasterOf(key(p))] = true
		if n := shared(p); n != 3 {
			t.Fatalf("before the failover, peer %s: %d admitted across two instances, want 3", p, n)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("six peers' keys on %d master(s): the test does not cross nodes", len(masters))
	}

	victim := c.MasterOf(key("192.0.2.1"))
	onVictim := peerOn(victim)
	victim.Stop()
	start := time.Now()
	sawClosed := false
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// shared again: both instances decide the victim's keys in Redis
		// (admitted or limited, not unavailable)
		again := 0
		for _, lim := range []*limiter.Limiter{limA, limB} {
			d := decide(lim, onVictim)
			if d.Reason == limiter.ReasonUnavailable {
				sawClosed = true
			} else if sawClosed {
				again++
			}
			d.Release()
		}
		if again == 2 && a.Status().Up && b.Status().Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover within 20s (closed answers seen: %v): %+v %+v\nlogs:\n%s\n%s", sawClosed, a.Status(), b.Status(), logA, logB)
		}
	}
	t.Logf("failover: decisions by on_failure, then shared again after %s", time.Since(start).Round(100*time.Millisecond))
	if s := a.Stats(); s.FailClosed == 0 {
		t.Fatalf("no decision by on_failure during the failover: %+v", s)
	}
	promoted := c.MasterOf(key("192.0.2.1"))
	if promoted == victim {
		t.Fatalf("the stopped master still serves its slots")
	}
	for _, s := range []*redistest.Server{promoted, c.MasterOf(key("192.0.2.2")), c.MasterOf(key("192.0.2.3"))} {
		p := peerOn(s)
		if n := shared(p); n != 3 {
			t.Fatalf("after the failover, peer %s on %s: %d admitted across two instances, want 3 (%+v)", p, s.Addr(), n, a.Status())
		}
	}
}

// TestRedisClusterEvictedOnce: on a Redis Cluster the eviction counter is
// each master's own. One master that evicted keys before the instance
// started is not taken for one evicting now at every probe (a cluster
// client sends INFO to a master at random: comparing two masters'
// counters would see evictions grow and shrink); one that evicts while
// the instance runs is seen.
func TestRedisClusterEvictedOnce(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	nodes := redistest.StartCluster(t, 3)
	var addrs []string
	for _, s := range nodes {
		addrs = append(addrs, s.Addr())
	}
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	one := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer one.Close()
	// evict has the first master evict keys: a small maxmemory under
	// allkeys-random while keys are written all over the cluster.
	evict := func() {
		t.Helper()
		used, err := one.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		fmt.Sscanf(used[strings.Index(used, "used_memory:")+len("used_memory:"):], "%d", &n)
		if err := one.ConfigSet(ctx, "maxmemory-policy", "allkeys-random").Err(); err != nil {
			t.Fatal(err)
		}
		if err := one.ConfigSet(ctx, "maxmemory", fmt.Sprint(n+200_000)).Err(); err != nil {
			t.Fatal(err)
		}
		val := strings.Repeat("x", 1000)
		for i := range 3000 {
			_ = cc.Set(ctx, fmt.Sprintf("fill:%d", i), val, 0).Err()
		}
		if err := one.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
		for i := range 3000 {
			_ = cc.Del(ctx, fmt.Sprintf("fill:%d", i)).Err()
		}
		info, _ := one.Info(ctx, "stats").Result()
		if strings.Contains(info, "evicted_keys:0\r") {
			t.Fatalf("no key evicted:\n%s", info)
		}
	}
	evict()
	b, _, logs := open(t, cluster.Options{Addrs: addrs})
	if !b.Status().Up {
		t.Fatalf("%+v", b.Status())
	}
	// probes run every second while up: five of them, each reading INFO
	time.Sleep(5500 * time.Millisecond)
	if s := b.Stats(); !s.Up || s.Errors[cluster.KindEvicted] != 0 {
		t.Fatalf("old evictions taken for new ones: %+v\n%s", s, logs)
	}
	evict()
	waitFor(t, "the evictions seen", func() bool { return b.Stats().Errors[cluster.KindEvicted] > 0 })
}
