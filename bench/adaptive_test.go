package bench_test

import (
	"fmt"
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// BenchmarkDecideAdaptive: Decide plus Release in the general group (2.9.6
// limits: leaky 450 per 30 s, concurrency 150), 10 000 existing peers,
// with adaptive_concurrency off against on (a limit pinned at 1000, above
// what the benchmark holds in flight: the path of every admission, the
// group's count and the peer's slot taken and given back), serial and
// parallel. The two alternate, A/B, over five rounds in one run (the
// machines are noisy: compare the minimum of each).
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
			d := l.Decide(clock(i), p, id)
			d.Release()
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
					d := l.Decide(clock(i), ps[i%n], g)
					d.Release()
				}
			})
		}
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("round=%d/adaptive=%v/parallel", round, on), func(b *testing.B) {
				l, g := setup(b, on)
				b.ReportAllocs()
				b.ResetTimer()
				decideParallel(b, l, ps, g)
			})
		}
	}
}
