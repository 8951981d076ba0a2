package cluster_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU time redis-server has used (INFO cpu).
func redisCPU(b *testing.B, admin *redis.Client) time.Duration {
	info, err := admin.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sec += f
		}
	}
	return time.Duration(sec * float64(time.Second))
}

// BenchmarkStrictDecide measures one strict decision and its release on
// a real redis-server, at 64 concurrent callers over 1 000 peers (as
// bench/cluster.sh's contenders): its time is the Go side's and Redis's
// together on this machine, its allocations are the Go side's alone.
// docs/benchmarks.md ("Cluster mode against go-redis/redis_rate") has
// the figures.
func BenchmarkStrictDecide(b *testing.B) {
	srv := redistest.Start(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for _, tc := range []struct {
		name string
		kind algo.Kind
	}{{"gcra", algo.GCRA}, {"token_bucket", algo.TokenBucket}, {"hybrid", algo.Hybrid}} {
		b.Run(tc.name, func(b *testing.B) {
			gs := limiter.GroupSettings{
				SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
				LeakyLimit: 1 << 30, LeakyTickInterval: 30000, LeakyTickReduction: 1 << 30, ConcurrencyLimit: 1 << 30,
			}
			if tc.kind != algo.Hybrid {
				gs.Algorithm, gs.Limit, gs.Period, gs.Burst = tc.kind, 1_000_000, 1000, 1_000_000
			}
			cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": gs}}
			be, err := cluster.Open(cluster.Options{Addrs: []string{srv.Addr()}, Mode: cluster.Strict, OnFailure: cluster.FailClosed,
				Timeout: 200 * time.Millisecond, Lease: 10 * time.Second, SyncInterval: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			l, err := limiter.New(be, time.Now(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			g, _ := l.GroupID("general")
			peers := make([]peer.Peer, 1000)
			for i := range peers {
				a := netip.AddrFrom4([4]byte{11, 0, byte(i >> 8), byte(i)})
				peers[i] = peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
			}
			for i := range peers { // the scripts loaded, the schedules read
				d := l.Decide(time.Now(), peers[i], g)
				d.Release()
			}
			b.SetParallelism(32) // 64 callers on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, rcpu0 := cpuTime(), redisCPU(b, admin)
			var next, unavailable atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7))
				for pb.Next() {
					d := l.Decide(time.Now(), peers[i%len(peers)], g)
					if d.Reason == limiter.ReasonUnavailable {
						unavailable.Add(1) // past cluster.timeout on a busy machine
					}
					d.Release()
					i += 61
				}
			})
			b.StopTimer()
			// This process's CPU per decision (Redis's is its own): the Go
			// side's cost, which a busy machine stretches far less than the
			// time per decision.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64((redisCPU(b, admin)-rcpu0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
			if n := unavailable.Load(); n > 0 {
				b.ReportMetric(float64(n), "unavailable")
				if n == int64(b.N) {
					b.Fatal("no decision reached redis")
				}
			}
		})
	}
}
