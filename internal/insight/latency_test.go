package insight_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

func TestLatencyBuckets(t *testing.T) {
	want := []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
	if got := insight.LatencyBuckets(); !slices.Equal(got, want) {
		t.Fatalf("LatencyBuckets() = %v, want %v", got, want)
	}
	insight.LatencyBuckets()[0] = 99 // a copy: must not change the next call
	if got := insight.LatencyBuckets()[0]; got != 1 {
		t.Fatalf("LatencyBuckets()[0] = %v after a caller wrote its copy, want 1", got)
	}
}

func TestLatencyHistogramObserve(t *testing.T) {
	// Bounds are inclusive ("le"): 1µs lands in le=1, 1µs+1ns in le=2.
	steps := []struct {
		d time.Duration
		// want is the cumulative bucket counts after the step.
		want []uint64
		sum  float64 // µs, cumulative
	}{
		{0, []uint64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0},
		{-time.Second, []uint64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 0},
		{time.Microsecond, []uint64{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, 1},
		{time.Microsecond + 1, []uint64{3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, 2.001},
		{700 * time.Microsecond, []uint64{3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5}, 702.001},
		{10 * time.Millisecond, []uint64{3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 6}, 10702.001},
		{10*time.Millisecond + 1, []uint64{3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 6}, 20702.002},
		{time.Hour, []uint64{3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 6}, 3600020702.002},
	}
	var h insight.LatencyHistogram
	for i, s := range steps {
		h.Observe(s.d)
		buckets, count, sum := h.Snapshot()
		if !slices.Equal(buckets, s.want) {
			t.Errorf("step %d Observe(%v): buckets %v, want %v", i, s.d, buckets, s.want)
		}
		if count != uint64(i+1) {
			t.Errorf("step %d Observe(%v): count %d, want %d", i, s.d, count, i+1)
		}
		if diff := sum - s.sum; diff > 1e-6 || diff < -1e-6 {
			t.Errorf("step %d Observe(%v): sum %v µs, want %v", i, s.d, sum, s.sum)
		}
	}
}

func TestLatencyObserveAllocs(t *testing.T) {
	var h insight.LatencyHistogram
	if n := testing.AllocsPerRun(1000, func() { h.Observe(3 * time.Microsecond) }); n != 0 {
		t.Errorf("LatencyHistogram.Observe allocates %v times per call, want 0", n)
	}
	var l insight.Latencies
	if n := testing.AllocsPerRun(1000, func() { l.Observe(3, 3*time.Microsecond) }); n != 0 {
		t.Errorf("Latencies.Observe allocates %v times per call, want 0", n)
	}
}

func TestLatenciesGroups(t *testing.T) {
	var l insight.Latencies
	l.Observe(2, 3*time.Microsecond)
	l.Observe(2, 3*time.Microsecond)
	l.Observe(limiter.MaxGroups-1, time.Millisecond)
	l.Observe(limiter.MaxGroups, time.Millisecond) // out of range: ignored
	l.Observe(255, time.Millisecond)               // likewise
	for _, c := range []struct {
		g     limiter.GroupID
		count uint64
	}{{0, 0}, {1, 0}, {2, 2}, {3, 0}, {limiter.MaxGroups - 1, 1}} {
		if _, n, _ := l.Group(c.g).Snapshot(); n != c.count {
			t.Errorf("group %d: count %d, want %d", c.g, n, c.count)
		}
	}
	if h := l.Group(limiter.MaxGroups); h != nil {
		t.Errorf("Group(MaxGroups) = %p, want nil", h)
	}
}

func TestLatencyConcurrent(t *testing.T) {
	const workers, each = 8, 2000
	var l insight.Latencies
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				l.Observe(1, time.Duration(w*each+i)) // nanoseconds
			}
		})
	}
	// Read while writing: count never falls below the last cumulative
	// bucket.
	for range 100 {
		b, n, _ := l.Group(1).Snapshot()
		if n < b[len(b)-1] {
			t.Fatalf("count %d < last bucket %d", n, b[len(b)-1])
		}
	}
	wg.Wait()
	b, n, sum := l.Group(1).Snapshot()
	const total = workers * each
	if n != total {
		t.Errorf("count %d, want %d", n, total)
	}
	// Every observation is below 16µs: sum of 0..total-1 ns.
	if want := float64(total*(total-1)/2) / 1e3; sum != want {
		t.Errorf("sum %v µs, want %v", sum, want)
	}
	// le=10µs holds the observations of 0..10000 ns.
	if b[3] != 10001 {
		t.Errorf("bucket le=10: %d, want 10001", b[3])
	}
}

func BenchmarkLatencyObserve(b *testing.B) {
	var l insight.Latencies
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Observe(3, time.Duration(i&4095)) // up to ~4µs
	}
}

// BenchmarkLatencyObserveParallel is the worst case: every request in the
// same group, hence on the same cache lines.
func BenchmarkLatencyObserveParallel(b *testing.B) {
	var l insight.Latencies
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			l.Observe(3, time.Duration(i&4095))
		}
	})
}
