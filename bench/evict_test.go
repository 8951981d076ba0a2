package bench_test

import (
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// BenchmarkDecideEvictingStateful: the table is full (max_tracked 100 000)
// of limited entries — peers of a group admitting one request an hour,
// each past it — and every decision is a new peer of the general group: a
// light newcomer whose eviction of another is what bench/evict.sh
// compares across builds. Eviction prefers light entries (decision 159),
// so the shards survey again as newcomers arrive (resurveyAfter); the
// build before took the idlest limited entry each time.
func BenchmarkDecideEvictingStateful(b *testing.B) {
	const capacity = 100_000
	groups := limiter.ArweaveGroups()
	groups["strict"] = limiter.GroupSettings{
		SlidingWindowLimit: 1, SlidingWindowDuration: 3_600_000,
		CleanupInterval: 3_600_000, CleanupExpiry: 3_600_000,
		LeakyLimit: 0, LeakyTickInterval: 3_600_000, LeakyTickReduction: 1,
		ConcurrencyLimit: 10,
	}
	l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64, MaxTracked: capacity})
	if err != nil {
		b.Fatal(err)
	}
	strict, _ := l.GroupID("strict")
	g, _ := l.GroupID(limiter.GroupGeneral)
	ps := peers(capacity * 4)
	for i := range capacity {
		d := l.Decide(clock(i), ps[i], strict)
		d.Release()
		if d = l.Decide(clock(i), ps[i], strict); d.Allowed {
			b.Fatal("strict admitted twice")
		}
	}
	decideNewPeers(b, l, ps, g, capacity)
}
