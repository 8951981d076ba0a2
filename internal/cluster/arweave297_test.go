package cluster_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestReduceWindow297: with arweave.version 2.9.7 a reduction in a group
// without a bucket takes the peer's oldest window timestamp
// (docs/arweave297.md, "Cleanup, leaky ticks and reduce"),
// freeing a place, in both modes; local_first pushes its own admissions
// first. An unknown peer's reduction creates nothing.
func TestReduceWindow297(t *testing.T) {
	srv := redistest.Start(t)
	for _, mode := range []cluster.Mode{cluster.Strict, cluster.LocalFirst} {
		t.Run(mode.String(), func(t *testing.T) {
			var c clock
			c.Set(t0)
			cfg := limiter.Config{IPv6Prefix: 64, ArweaveVersion: limiter.Arweave297, Groups: map[string]limiter.GroupSettings{
				"general": group(2, 1000, 0, 30000, 1, 10, 120000, 120000),
			}}
			b, err := cluster.OpenWithClock(cluster.Options{Addrs: []string{srv.Addr()}, Mode: mode, OnFailure: cluster.FailClosed,
				Timeout: 2 * time.Second, Lease: time.Hour, Logger: slog.New(slog.DiscardHandler)}, c.ms)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			lim, err := limiter.New(b, c.Now(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := lim.GroupID("general")
			p := peerOf(fmt.Sprintf("198.51.100.%d", 1+int(mode)))
			step := func(ms int64, want limiter.Via) {
				t.Helper()
				c.Set(t0.Add(time.Duration(ms) * time.Millisecond))
				d := lim.Decide(c.Now(), p, g)
				if d.Via != want {
					t.Fatalf("t=%d: %+v, want %v", ms, d, want)
				}
				d.Release()
			}
			step(1, limiter.ViaSliding)
			step(500, limiter.ViaSliding)
			step(600, limiter.ViaNone)
			if r := lim.Reduce(c.Now(), p.Key, g); r != limiter.Reduced {
				t.Fatalf("reduce: %v", r)
			}
			step(600, limiter.ViaSliding) // the timestamp 1 went
			step(600, limiter.ViaNone)
			if r := lim.Reduce(c.Now(), peerOf("198.51.100.99").Key, g); r != limiter.ReduceNoop {
				t.Fatalf("reduce of an unknown peer: %v", r)
			}
			if st := b.Stats(); st.FailClosed != 0 || !st.Up {
				t.Fatalf("redis failed: %+v", st)
			}
		})
	}
}

// TestShardScope: with concurrency_scope "shard" (docs/arweave297.md,
// "Concurrency per worker shard") each
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
					// 2 s: a sync timed out at 50 ms on a loaded host is a
					// lost sync, which this test is not about.
					b, lim, _ := openWith(t, cluster.Options{Addrs: []string{srv.Addr()}, Mode: mode, Timeout: 2 * time.Second}, cfg)
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
