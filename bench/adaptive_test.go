package bench_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// admitClock returns the clock of decision i, 10 µs apart: each of 10 000
// peers decides 10 times a second, inside the general group's leaky rate
// (450 per 30 s), so that the decisions are admissions (the adaptive
// path's cost is theirs).
func admitClock(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Microsecond) }

// BenchmarkDecideAdaptive: Decide plus Release in the general group (2.9.6
// limits: leaky 450 per 30 s, concurrency 150), 10 000 existing peers,
// with adaptive_concurrency off against on (a limit pinned at 1000, above
// what the benchmark holds in flight: the path of every admission, the
// group's count and the peer's slot taken and given back; the group never
// holds half its limit, so it keeps no fair pace), serial and parallel.
// The two alternate, A/B, over five rounds in one run (the
// machines are noisy: compare the minimum of each; cmd/adaptivecost
// interleaves them finer).
func BenchmarkDecideAdaptive(b *testing.B) {
	const n = 10_000
	ps := peers(n)
	setup := func(b *testing.B, on bool) (*limiter.Limiter, limiter.GroupID) {
		groups := limiter.ArweaveGroups()
		g := groups[limiter.GroupGeneral]
		g.AdaptiveConcurrency = on
		g.AdaptiveMinLimit, g.AdaptiveMaxLimit = 1000, 1000
		groups[limiter.GroupGeneral] = g
		l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
		if err != nil {
			b.Fatal(err)
		}
		id, _ := l.GroupID(limiter.GroupGeneral)
		for i, p := range ps {
			d := l.Decide(admitClock(i), p, id)
			d.Release()
		}
		if on {
			bench.MeasureQuota(l, id, ps, t0)
		}
		return l, id
	}
	for round := 1; round <= 5; round++ {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("round=%d/adaptive=%v/serial", round, on), func(b *testing.B) {
				l, g := setup(b, on)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					d := l.Decide(admitClock(n+i), ps[i%n], g)
					d.Release()
				}
			})
		}
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("round=%d/adaptive=%v/parallel", round, on), func(b *testing.B) {
				l, g := setup(b, on)
				b.ReportAllocs()
				b.ResetTimer()
				var next atomic.Int64
				next.Store(int64(n))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(next.Add(1))
						d := l.Decide(admitClock(i), ps[(i*7919)%n], g)
						d.Release()
					}
				})
			})
		}
	}
}
