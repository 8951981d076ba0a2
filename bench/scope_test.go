package bench_test

import (
	"fmt"
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// BenchmarkDecideScope: Decide plus Release in the general group (2.9.6
// limits: leaky 450 per 30 s, concurrency 150) with concurrency_scope
// "peer" against "shard" (5 workers: the shard's in-flight count is an
// atomic add and, at the release, a subtraction), 10 000 existing peers,
// serial and parallel. The two alternate, A/B, over three rounds in one
// run (the machines are noisy: read the ratio within a round).
func BenchmarkDecideScope(b *testing.B) {
	const n = 10_000
	ps := peers(n)
	setup := func(b *testing.B, scope limiter.ConcurrencyScope) (*limiter.Limiter, limiter.GroupID) {
		groups := limiter.ArweaveGroups()
		g := groups[limiter.GroupGeneral]
		g.ConcurrencyScope, g.NumberOfWorkers = scope, 5
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
	for round := 1; round <= 3; round++ {
		for _, scope := range []limiter.ConcurrencyScope{limiter.ScopePeer, limiter.ScopeShard} {
			b.Run(fmt.Sprintf("round=%d/scope=%s/serial", round, scope), func(b *testing.B) {
				l, g := setup(b, scope)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					d := l.Decide(clock(i), ps[i%n], g)
					d.Release()
				}
			})
		}
		for _, scope := range []limiter.ConcurrencyScope{limiter.ScopePeer, limiter.ScopeShard} {
			b.Run(fmt.Sprintf("round=%d/scope=%s/parallel", round, scope), func(b *testing.B) {
				l, g := setup(b, scope)
				b.ReportAllocs()
				b.ResetTimer()
				decideParallel(b, l, ps, g)
			})
		}
	}
}
