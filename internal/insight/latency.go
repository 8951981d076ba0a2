package insight

import (
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// latencyBoundsMicros are the upper bounds (inclusive, "le") of the
// finite buckets of a LatencyHistogram, in microseconds. A limiter
// decision takes about a microsecond; the upper buckets catch lock waits
// and scheduler stalls.
var latencyBoundsMicros = [...]float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}

// latencyBoundsNanos are latencyBoundsMicros in nanoseconds, compared with
// the observed duration as is.
var latencyBoundsNanos = func() (b [len(latencyBoundsMicros)]int64) {
	for i, us := range latencyBoundsMicros {
		b[i] = int64(us) * 1000
	}
	return b
}()

// LatencyBuckets returns the upper bounds of a LatencyHistogram's finite
// buckets in microseconds, ascending; the +Inf bucket is implied. The
// slice is new on every call.
func LatencyBuckets() []float64 {
	return append([]float64(nil), latencyBoundsMicros[:]...)
}

// LatencyHistogram is a lock-free histogram of durations with the fixed
// buckets of LatencyBuckets. Its zero value is empty and ready to use. It
// is safe for concurrent use: Observe is two atomic adds and never
// allocates, so it can run once per request; Snapshot reads it at scrape
// time.
type LatencyHistogram struct {
	// counts[i] is the number of observations in bucket i alone (not
	// cumulative); the last one is the +Inf bucket. The total count is
	// their sum, so count and buckets always agree.
	counts [len(latencyBoundsMicros) + 1]atomic.Uint64
	// sumNanos is the sum of all observations in nanoseconds: it would
	// take 584 years of summed latency to wrap.
	sumNanos atomic.Uint64
}

// Observe records one duration. A negative duration counts as 0.
func (h *LatencyHistogram) Observe(d time.Duration) {
	ns := max(int64(d), 0)
	i := 0
	for i < len(latencyBoundsNanos) && ns > latencyBoundsNanos[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNanos.Add(uint64(ns))
}

// Snapshot returns the cumulative counts of the finite buckets (index i
// counts the observations ≤ LatencyBuckets()[i]), the number of
// observations and their sum in microseconds. count is always at least
// the last cumulative bucket, as Prometheus requires. Observations made
// during the call may be counted in the buckets and not yet in the sum,
// or the other way round; nothing else is inconsistent.
func (h *LatencyHistogram) Snapshot() (buckets []uint64, count uint64, sumMicros float64) {
	buckets = make([]uint64, len(latencyBoundsMicros))
	for i := range buckets {
		count += h.counts[i].Load()
		buckets[i] = count
	}
	count += h.counts[len(buckets)].Load()
	return buckets, count, float64(h.sumNanos.Load()) / 1e3
}

// Latencies holds one LatencyHistogram per group, indexed by
// limiter.GroupID: the source of ar_limiter_response_time_microseconds.
// Its zero value is ready to use. It is safe for concurrent use.
type Latencies struct {
	groups [limiter.MaxGroups]LatencyHistogram
}

// Observe records d, the time a decision of group g took. An ID out of
// range is ignored.
func (l *Latencies) Observe(g limiter.GroupID, d time.Duration) {
	if int(g) < len(l.groups) {
		l.groups[g].Observe(d)
	}
}

// Group returns the histogram of group g, or nil for an ID out of range.
func (l *Latencies) Group(g limiter.GroupID) *LatencyHistogram {
	if int(g) >= len(l.groups) {
		return nil
	}
	return &l.groups[g]
}
