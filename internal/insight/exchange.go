package insight

import (
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// exchangeBoundsSeconds are the upper bounds of the finite buckets of an
// exchange's duration: from a rejection answered in microseconds to a
// long transfer to a slow peer.
var exchangeBoundsSeconds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

var exchangeBoundsNanos = func() (b [len(exchangeBoundsSeconds)]int64) {
	for i, s := range exchangeBoundsSeconds {
		b[i] = int64(s * 1e9)
	}
	return b
}()

// ExchangeBuckets returns the upper bounds of an ExchangeHistogram's
// finite buckets in seconds, ascending; the +Inf bucket is implied. The
// slice is new on every call.
func ExchangeBuckets() []float64 {
	return append([]float64(nil), exchangeBoundsSeconds[:]...)
}

// ExchangeHistogram is a lock-free histogram of exchange durations with
// the buckets of ExchangeBuckets. Its zero value is empty and ready. It is
// safe for concurrent use: Observe is two atomic adds and never allocates.
type ExchangeHistogram struct {
	counts   [len(exchangeBoundsSeconds) + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sumNanos atomic.Uint64
}

// Observe records one duration; a negative one counts as 0.
func (h *ExchangeHistogram) Observe(d time.Duration) {
	ns := max(int64(d), 0)
	i := 0
	for i < len(exchangeBoundsNanos) && ns > exchangeBoundsNanos[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNanos.Add(uint64(ns))
}

// Snapshot returns the cumulative counts of the finite buckets, the count
// and the sum in seconds (see LatencyHistogram.Snapshot for what a
// concurrent Observe may leave uneven).
func (h *ExchangeHistogram) Snapshot() (buckets []uint64, count uint64, sumSeconds float64) {
	buckets = make([]uint64, len(exchangeBoundsSeconds))
	for i := range buckets {
		count += h.counts[i].Load()
		buckets[i] = count
	}
	count += h.counts[len(buckets)].Load()
	return buckets, count, float64(h.sumNanos.Load()) / 1e9
}

// StatusClasses are the code labels of Exchanges, by status / 100 − 1.
var StatusClasses = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// Exchanges holds the duration of the public listener's exchanges — from
// the request's arrival to the end of its response, rejections and errors
// included — per group and status class: the source of
// limiterd_proxy_request_duration_seconds{group,code}. Its zero value is
// ready; it is safe for concurrent use.
type Exchanges struct {
	h [limiter.MaxGroups + 1][len(StatusClasses)]ExchangeHistogram
	// own are the exchanges of status 5xx limiterd answered itself,
	// never asking the node (ObserveOwn): counted in h too, for the
	// metric; the node's minute (NodeWindow) leaves them out.
	own [limiter.MaxGroups + 1]ExchangeHistogram
}

// ObserveOwn is Observe for an exchange of status 5xx that limiterd
// answered itself without asking the node: a request the adaptive limit
// shed, a backend that could not decide (503). It counts in the metric
// as any other; the node's minute leaves it out, the node having had no
// part in it.
func (e *Exchanges) ObserveOwn(g limiter.GroupID, status int, d time.Duration) {
	e.Observe(g, status, d)
	if status >= 500 && status <= 599 && int(g) < len(e.own) {
		e.own[g].Observe(d)
	}
}

// Observe records an exchange of group g (or limiter.ExemptPathGroup, shown as group="exempt_path") answered
// with status, which took d. A status outside 100–599 counts as 5xx (the
// client saw no proper answer); a group out of range is ignored.
func (e *Exchanges) Observe(g limiter.GroupID, status int, d time.Duration) {
	c := status/100 - 1
	if c < 0 || c >= len(StatusClasses) {
		c = len(StatusClasses) - 1
	}
	if int(g) < len(e.h) {
		e.h[g][c].Observe(d)
	}
}

// Histogram returns the histogram of group g and status class c (an index
// of StatusClasses), nil when out of range.
func (e *Exchanges) Histogram(g limiter.GroupID, c int) *ExchangeHistogram {
	if int(g) >= len(e.h) || c < 0 || c >= len(StatusClasses) {
		return nil
	}
	return &e.h[g][c]
}
