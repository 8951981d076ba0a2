package bench_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
)

// The limits of the algorithms' benchmarks: general's 450 per 30 s (the
// hybrid's leaky_limit and tick), burst 450, concurrency 150, so that they
// admit and reject in the same proportions as the hybrid beside them.
const (
	benchLimit  = 450
	benchPeriod = 30_000
)

// withAlgorithm returns a limiter whose general group runs k (Hybrid: the
// Arweave default, unchanged).
func withAlgorithm(b testing.TB, k algo.Kind, maxTracked int) (*limiter.Limiter, limiter.GroupID) {
	groups := limiter.ArweaveGroups()
	if k != algo.Hybrid {
		g := groups[limiter.GroupGeneral]
		g.Algorithm, g.Limit, g.Period = k, benchLimit, benchPeriod
		groups[limiter.GroupGeneral] = g
	}
	l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64, MaxTracked: maxTracked})
	if err != nil {
		b.Fatal(err)
	}
	g, _ := l.GroupID(limiter.GroupGeneral)
	return l, g
}

var benchKinds = []algo.Kind{algo.Hybrid, algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingLog, algo.SlidingWindow}

// plain is a baseline of one algorithm as a Go developer would write it
// without limiterd: its state per client key in a map behind one mutex.
type plain interface {
	allow(now time.Time, key string) bool
}

// plainFixed is a fixed window: a count per key and window index.
type plainFixed struct {
	mu sync.Mutex
	m  map[string]*struct{ k, n int64 }
}

func (f *plainFixed) allow(now time.Time, key string) bool {
	ms := now.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.m[key]
	if s == nil {
		s = &struct{ k, n int64 }{}
		f.m[key] = s
	}
	if k := ms / benchPeriod; k != s.k {
		s.k, s.n = k, 0
	}
	if s.n+1 > benchLimit {
		return false
	}
	s.n++
	return true
}

// plainLog is a sliding log: the admission times per key in a slice.
type plainLog struct {
	mu sync.Mutex
	m  map[string]*[]int64
}

func (f *plainLog) allow(now time.Time, key string) bool {
	ms := now.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.m[key]
	if s == nil {
		s = new([]int64)
		f.m[key] = s
	}
	ts := *s
	i := 0
	for i < len(ts) && ts[i] <= ms-benchPeriod {
		i++
	}
	if i > 0 {
		ts = append(ts[:0], ts[i:]...)
	}
	if len(ts)+1 > benchLimit {
		*s = ts
		return false
	}
	*s = append(ts, ms)
	return true
}

// plainSliding is the estimated sliding window in floating point, as the
// PSPDFKit post writes it.
type plainSliding struct {
	mu sync.Mutex
	m  map[string]*struct{ k, curr, prev int64 }
}

func (f *plainSliding) allow(now time.Time, key string) bool {
	ms := now.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.m[key]
	if s == nil {
		s = &struct{ k, curr, prev int64 }{}
		f.m[key] = s
	}
	if k := ms / benchPeriod; k != s.k {
		if k == s.k+1 {
			s.prev = s.curr
		} else {
			s.prev = 0
		}
		s.k, s.curr = k, 0
	}
	elapsed := float64(ms-s.k*benchPeriod) / benchPeriod
	if float64(s.curr+1)+(1-elapsed)*float64(s.prev) > benchLimit {
		return false
	}
	s.curr++
	return true
}

// rateBase is the x/time/rate baseline of the token bucket and GCRA.
type rateBase struct{ k *bench.KeyedRate }

func (r rateBase) allow(now time.Time, key string) bool { return r.k.Allow(now, key) }

// baseline returns the nearest Go library for k, named.
func baseline(k algo.Kind) (string, func() plain) {
	switch k {
	case algo.FixedWindow:
		return "plain-map", func() plain { return &plainFixed{m: map[string]*struct{ k, n int64 }{}} }
	case algo.SlidingLog:
		return "plain-map", func() plain { return &plainLog{m: map[string]*[]int64{}} }
	case algo.SlidingWindow:
		return "plain-map", func() plain { return &plainSliding{m: map[string]*struct{ k, curr, prev int64 }{}} }
	}
	return "x-time-rate", func() plain {
		return rateBase{bench.NewKeyedRate(rate.Limit(float64(benchLimit)/(benchPeriod/1000)), benchLimit)}
	}
}

// step is the fake time between two decisions of the algorithms'
// benchmark: 3 333 ns, so that each of 10 000 peers asks every 33 ms, twice
// its limit of 450 per 30 s, and about half the decisions admit.
const step = 3333 * time.Nanosecond

// timeline is one sub-benchmark's steady state: decide is called with the
// op index i, which runs on across the rounds the testing package makes to
// size b.N, after a warm-up of one period (every log full, every bucket in
// its steady state).
type timeline struct {
	i      int
	decide func(i int)
}

func (tl *timeline) at(i int) time.Time { return t0.Add(time.Duration(i) * step) }

// run warms tl up once, then makes b.N decisions serially or, parallel,
// from every core (each claiming 256 op indices at a time).
func (tl *timeline) run(b *testing.B, parallel bool) {
	const warm = int(benchPeriod * time.Millisecond / step)
	if tl.i == 0 {
		for ; tl.i < warm; tl.i++ {
			tl.decide(tl.i)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for j := 0; j < b.N; j++ {
			tl.decide(tl.i + j)
		}
		tl.i += b.N
		return
	}
	var next atomic.Int64
	next.Store(int64(tl.i))
	b.RunParallel(func(pb *testing.PB) {
		i, end := 0, 0
		for pb.Next() {
			if i == end {
				i = int(next.Add(256)) - 256
				end = i + 256
			}
			tl.decide(i)
			i++
		}
	})
	tl.i = int(next.Load())
}

// BenchmarkDecideAlgorithms: Decide plus Release at 10 000 peers, each
// asking twice its limit (450 per 30 s), in the steady state after one
// period: the hybrid (Arweave general: the same 450 per 30 s) and every
// other algorithm (docs/limiting.md, "Other algorithms"), each beside its
// nearest Go baseline on the same timeline. With -count N the cases alternate N
// times.
func BenchmarkDecideAlgorithms(b *testing.B) {
	const n = 10_000
	ps := peers(n)
	keys := make([]string, n)
	for i, p := range ps {
		keys[i] = p.Addr.String()
	}
	for _, k := range benchKinds {
		for _, parallel := range []bool{false, true} {
			tl := &timeline{}
			mode := map[bool]string{false: "serial", true: "parallel"}[parallel]
			b.Run(fmt.Sprintf("limiterd/%s/%s", k, mode), func(b *testing.B) {
				if tl.decide == nil {
					l, g := withAlgorithm(b, k, 0)
					tl.decide = func(i int) {
						d := l.Decide(tl.at(i), ps[i%n], g)
						d.Release()
					}
				}
				tl.run(b, parallel)
			})
		}
		if k == algo.Hybrid {
			continue
		}
		name, newBase := baseline(k)
		tl := &timeline{}
		b.Run(fmt.Sprintf("%s/%s/serial", name, k), func(b *testing.B) {
			if tl.decide == nil {
				base := newBase()
				tl.decide = func(i int) { base.allow(tl.at(i), keys[i%n]) }
			}
			tl.run(b, false)
		})
	}
}

// BenchmarkMemoryAlgorithms reports the heap bytes per tracked (peer,
// group) entry at 1 000 000 entries, one admission each, for every
// algorithm (the sliding log's log holds that one timestamp).
func BenchmarkMemoryAlgorithms(b *testing.B) {
	const n = 1_000_000
	ps := peers(n)
	for _, k := range benchKinds {
		b.Run(k.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := heap()
				l, g := withAlgorithm(b, k, 0)
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
	}
}

// BenchmarkDecideRatio runs each algorithm against the hybrid in
// alternating blocks of 16 384 decisions (about 2 ms each), timing every
// block, on the timelines of BenchmarkDecideAlgorithms: a shared machine's
// load then falls on both alike. It reports each side's ns per decision and
// the ratio algorithm ÷ hybrid ("x-hybrid"; target ≤ 1.10). b.N counts
// blocks pairs.
func BenchmarkDecideRatio(b *testing.B) {
	const n, block = 10_000, 16_384
	ps := peers(n)
	newTL := func(k algo.Kind) *timeline {
		l, g := withAlgorithm(b, k, 0)
		tl := &timeline{}
		tl.decide = func(i int) {
			d := l.Decide(tl.at(i), ps[i%n], g)
			d.Release()
		}
		return tl
	}
	for _, k := range benchKinds[1:] {
		var hy, al *timeline
		b.Run(k.String(), func(b *testing.B) {
			if hy == nil {
				hy, al = newTL(algo.Hybrid), newTL(k)
				hy.run(b, false) // warm-up of one period each (b.N = 0 or 1)
				al.run(b, false)
			}
			var th, ta time.Duration
			b.ResetTimer()
			for j := 0; j < b.N; j++ {
				for _, side := range []struct {
					tl *timeline
					d  *time.Duration
				}{{hy, &th}, {al, &ta}} {
					start := time.Now()
					for i := side.tl.i; i < side.tl.i+block; i++ {
						side.tl.decide(i)
					}
					*side.d += time.Since(start)
					side.tl.i += block
				}
			}
			b.ReportMetric(float64(th.Nanoseconds())/float64(b.N*block), "hybrid-ns/op")
			b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N*block), "algo-ns/op")
			b.ReportMetric(float64(ta)/float64(th), "x-hybrid")
		})
	}
}
