package bench_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// peers returns n distinct IPv4 peers outside every exempt range.
func peers(n int) []peer.Peer {
	out := make([]peer.Peer, n)
	for i := range out {
		a := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
		out[i] = peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
	}
	return out
}

func arweave(b testing.TB) (*limiter.Limiter, limiter.GroupID) {
	l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		b.Fatal(err)
	}
	g, _ := l.GroupID(limiter.GroupGeneral)
	return l, g
}

var sizes = []int{1, 10_000, 1_000_000}

// The same clock for both: 1 µs per operation, so that neither measures
// time.Now.
func clock(i int) time.Time { return t0.Add(time.Duration(i) * time.Microsecond) }

// BenchmarkDecide: an existing peer in the default general group (leaky 450
// per 30 s, concurrency 150), Decide plus Release of what was admitted.
func BenchmarkDecide(b *testing.B) {
	for _, n := range sizes {
		ps := peers(n)
		b.Run(fmt.Sprintf("limiterd/peers=%d/serial", n), func(b *testing.B) {
			l, g := arweave(b)
			for i, p := range ps {
				d := l.Decide(clock(i), p, g)
				d.Release()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := l.Decide(clock(i), ps[i%n], g)
				d.Release()
			}
		})
		b.Run(fmt.Sprintf("limiterd/peers=%d/parallel", n), func(b *testing.B) {
			l, g := arweave(b)
			for i, p := range ps {
				d := l.Decide(clock(i), p, g)
				d.Release()
			}
			b.ReportAllocs()
			b.ResetTimer()
			decideParallel(b, l, ps, g)
		})
		keys := make([]string, n)
		for i, p := range ps {
			keys[i] = p.Addr.String()
		}
		// 450 per 30 s with a burst of 450: the nearest x/time/rate limiter.
		newBase := func() *bench.KeyedRate {
			k := bench.NewKeyedRate(rate.Limit(450.0/30), 450)
			for i, key := range keys {
				k.Allow(clock(i), key)
			}
			return k
		}
		b.Run(fmt.Sprintf("x-time-rate/peers=%d/serial", n), func(b *testing.B) {
			k := newBase()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k.Allow(clock(i), keys[i%n])
			}
		})
		b.Run(fmt.Sprintf("x-time-rate/peers=%d/parallel", n), func(b *testing.B) {
			k := newBase()
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1)) * 7919
				for pb.Next() {
					k.Allow(clock(i), keys[i%n])
					i++
				}
			})
		})
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory reports the heap bytes per tracked token-only (peer,
// group) entry at 1 000 000 entries, and the baseline's per key.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	ps := peers(n)
	keys := make([]string, n)
	for i, p := range ps {
		keys[i] = p.Addr.String()
	}
	b.Run("limiterd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			before := heap()
			l, g := arweave(b)
			for j, p := range ps {
				d := l.Decide(clock(j), p, g)
				d.Release()
			}
			after := heap()
			if l.Tracked() != n {
				b.Fatalf("tracked %d", l.Tracked())
			}
			b.ReportMetric(float64(after-before)/n, "bytes/entry")
			runtime.KeepAlive(l)
		}
	})
	b.Run("x-time-rate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			before := heap()
			k := bench.NewKeyedRate(rate.Limit(15), 450)
			for j, key := range keys {
				k.Allow(clock(j), key)
			}
			after := heap()
			// The key strings are counted: the map holds them.
			b.ReportMetric(float64(after-before)/n, "bytes/entry")
			runtime.KeepAlive(k)
		}
	})
}

// BenchmarkDecideDuringTick measures Decide latency while the sweeper
// applies a leaky tick to 1 000 000 entries, and reports the worst and the
// 99th percentile wait seen by Decide (target: the tick never blocks
// Decide for more than 1 ms).
func BenchmarkDecideDuringTick(b *testing.B) {
	const n = 1_000_000
	ps := peers(n)
	for i := 0; i < b.N; i++ {
		l, g := arweave(b)
		for _, p := range ps {
			d := l.Decide(t0, p, g)
			d.Release()
		}
		tickAt := t0.Add(30 * time.Second) // the first leaky tick of general
		var wg sync.WaitGroup
		var done atomic.Bool
		wg.Add(1)
		start := time.Now()
		go func() {
			defer wg.Done()
			l.Tick(tickAt)
			done.Store(true)
		}()
		lat := make([]time.Duration, 0, 1<<20) // no allocation (and GC) while measuring
		for j := 0; !done.Load(); j++ {
			s := time.Now()
			d := l.Decide(tickAt, ps[(j*7919)%n], g)
			lat = append(lat, time.Since(s))
			d.Release()
		}
		wg.Wait()
		sweep := time.Since(start)
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(sweep.Milliseconds()), "sweep-ms")
		b.ReportMetric(float64(len(lat)), "decides-during-sweep")
	}
}

// BenchmarkDecideEvicting: the table is full (max_tracked 100 000) and
// every decision is for a new peer, so each one evicts the entry idle
// longest: the cost of a flood of fresh addresses at the cap.
func BenchmarkDecideEvicting(b *testing.B) {
	const capacity = 100_000
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64, MaxTracked: capacity}
	l, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		b.Fatal(err)
	}
	g, _ := l.GroupID(limiter.GroupGeneral)
	ps := peers(capacity * 4)
	for i := range capacity {
		d := l.Decide(clock(i*1000), ps[i], g)
		d.Release()
	}
	decideNewPeers(b, l, ps, g, capacity)
}

// decideParallel makes b.N decisions over RunParallel, each goroutine
// from its own offset into ps (peer i%len(ps) at clock(i)), in group g.
func decideParallel(b *testing.B, l *limiter.Limiter, ps []peer.Peer, g limiter.GroupID) {
	n := len(ps)
	var seq atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			d := l.Decide(clock(i), ps[i%n], g)
			d.Release()
			i++
		}
	})
}

// decideNewPeers times b.N decisions in group g of peers not yet seen
// (those of ps beyond the first capacity, which fill the table), a second
// apart: each one evicts at max_tracked = capacity, which the table must
// still hold to at the end.
func decideNewPeers(b *testing.B, l *limiter.Limiter, ps []peer.Peer, g limiter.GroupID, capacity int) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := capacity + i%(len(ps)-capacity)
		d := l.Decide(clock((capacity+i)*1000), ps[j], g)
		d.Release()
	}
	b.StopTimer()
	if l.Tracked() > capacity {
		b.Fatalf("tracked %d > %d", l.Tracked(), capacity)
	}
}

// BenchmarkDecideRandomOrder is BenchmarkDecide's serial case with the
// peers visited in a random order instead of the order they were first
// seen in: traffic from many peers interleaves. BenchmarkDecide's
// sequential order lets the baseline's per-key objects, allocated in that
// same order during the warm-up, be read ahead by the processor; here
// every lookup of both is a random access, as in a daemon.
func BenchmarkDecideRandomOrder(b *testing.B) {
	for _, n := range sizes[1:] {
		ps := peers(n)
		order := rand.New(rand.NewPCG(3, 4)).Perm(n)
		b.Run(fmt.Sprintf("limiterd/peers=%d/serial", n), func(b *testing.B) {
			l, g := arweave(b)
			for i, p := range ps {
				d := l.Decide(clock(i), p, g)
				d.Release()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := l.Decide(clock(i), ps[order[i%n]], g)
				d.Release()
			}
		})
		keys := make([]string, n)
		for i, p := range ps {
			keys[i] = p.Addr.String()
		}
		b.Run(fmt.Sprintf("x-time-rate/peers=%d/serial", n), func(b *testing.B) {
			k := bench.NewKeyedRate(rate.Limit(450.0/30), 450)
			for i, key := range keys {
				k.Allow(clock(i), key)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k.Allow(clock(i), keys[order[i%n]])
			}
		})
	}
}
