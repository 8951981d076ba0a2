package cluster_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/redistest"
)

// TestShardScope: with concurrency_scope "shard" (SPEC §6.3) each
// instance counts its worker shards' requests in flight itself, and the
// scripts get no per-peer limit: a peer with 2 requests in flight on one
// instance (its shard there full) is admitted by the other, which a
// per-peer limit of 2 shared in Redis refuses. Both modes, a real Redis.
func TestShardScope(t *testing.T) {
	srv := redistest.Start(t)
	for _, mode := range []cluster.Mode{cluster.Strict, cluster.LocalFirst} {
		for _, scope := range []limiter.ConcurrencyScope{limiter.ScopePeer, limiter.ScopeShard} {
			t.Run(fmt.Sprintf("mode=%v/scope=%s", mode, scope), func(t *testing.T) {
				g := group(0, 1000, 100, 600000, 100, 2, 120000, 120000)
				g.NumberOfWorkers, g.ConcurrencyScope = 5, scope
				cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": g}}
				open := func() (*cluster.Backend, *limiter.Limiter) {
					spare, err := limiter.New(time.Now(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					b, err := cluster.Open(cluster.Options{Addrs: []string{srv.Addr()}, Mode: mode, Timeout: 50 * time.Millisecond,
						Lease: 10 * time.Second, SyncInterval: 100 * time.Millisecond, Fallback: spare.Backend(),
						Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Close() })
					lim, err := limiter.New(time.Now(), cfg, limiter.WithBackend(b))
					if err != nil {
						t.Fatal(err)
					}
					return b, lim
				}
				ab, a := open()
				bb, b := open()
				// A peer of its own per subtest: the Redis is shared.
				p := fmt.Sprintf("192.0.%d.%d", mode, 1+5*int(scope)) // shard 1 of 5
				var held []limiter.Decision
				for range 2 {
					d := decide(a, p)
					if !d.Allowed {
						t.Fatalf("%+v", d)
					}
					held = append(held, d)
				}
				if d := decide(a, p); d.Allowed || d.Reason != limiter.ReasonConcurrency {
					t.Fatalf("the third on the same instance: %+v", d)
				}
				// local_first: a pushes its requests in flight, b learns them.
				ab.SyncAll(time.Now().UnixMilli())
				bb.SyncAll(time.Now().UnixMilli())
				d := decide(b, p)
				if want := scope == limiter.ScopeShard; d.Allowed != want {
					t.Errorf("on the other instance: allowed %v, want %v (%+v)", d.Allowed, want, d)
				}
				d.Release()
				for i := range held {
					held[i].Release()
				}
			})
		}
	}
}
