package insight

import (
	"sync"
	"time"
)

// NodeMinute is the node's traffic over the last minute, from the public
// listener's exchanges: those the node answered or failed (status 1xx,
// 2xx, 3xx and 5xx: limiterd's own 429s and 403s, 4xx, aside, and its
// own 503s, Exchanges.ObserveOwn).
type NodeMinute struct {
	// Seconds is the stretch covered: a minute, or less since the start.
	Seconds float64
	// Requests and Errors5xx are the exchanges, and those answered 5xx
	// (the node's own and limiterd's 502 and 504), per second.
	Requests, Errors5xx float64
	// P50 and P99 are the exchanges' latency quantiles, interpolated in
	// the histogram's buckets (as Prometheus's histogram_quantile does);
	// negative without an exchange.
	P50, P99 time.Duration
}

// nodeSample is the exchanges' cumulative counts at one moment.
type nodeSample struct {
	at      time.Time
	buckets [len(exchangeBoundsSeconds) + 1]uint64 // per bucket, the last +Inf
	errs    uint64                                 // of status 5xx
}

// nodeSamples is how many one-second samples a NodeWindow keeps: a minute
// and the one before it.
const nodeSamples = 61

// NodeWindow keeps a minute of samples of Exchanges, to say the node's
// traffic over the last minute (Minute) without touching the request
// path. It is safe for concurrent use.
type NodeWindow struct {
	mu   sync.Mutex
	ring [nodeSamples]nodeSample
	n    int // samples taken, at most nodeSamples
	next int
}

// nodeClasses are the status classes of the node's answers (indexes of
// StatusClasses): 1xx, 2xx, 3xx, 5xx.
var nodeClasses = [...]int{0, 1, 2, 4}

// Sample records e's counts as of now; the owner calls it once a second.
func (w *NodeWindow) Sample(now time.Time, e *Exchanges) {
	s := nodeSample{at: now}
	for g := range e.h {
		// limiterd's own 5xx first: ObserveOwn counts them in h before
		// own, so that h read after never holds fewer.
		var own [len(s.buckets)]uint64
		for i := range own {
			own[i] = e.own[g].counts[i].Load()
		}
		for _, c := range nodeClasses {
			h := &e.h[g][c]
			for i := range h.counts {
				n := h.counts[i].Load()
				if c == 4 {
					n -= min(n, own[i])
					s.errs += n
				}
				s.buckets[i] += n
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ring[w.next] = s
	w.next = (w.next + 1) % nodeSamples
	w.n = min(w.n+1, nodeSamples)
}

// Minute returns the traffic between the newest sample and the oldest
// one at most a minute before it. Counters that went down (a restart of
// the histograms cannot happen, but a test may swap them) count from 0.
func (w *NodeWindow) Minute() NodeMinute {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := NodeMinute{P50: -1, P99: -1}
	if w.n < 2 {
		return out
	}
	newest := &w.ring[(w.next+nodeSamples-1)%nodeSamples]
	oldest := newest
	for k := 2; k <= w.n; k++ {
		s := &w.ring[(w.next+nodeSamples-k)%nodeSamples]
		if newest.at.Sub(s.at) > time.Minute {
			break
		}
		oldest = s
	}
	secs := newest.at.Sub(oldest.at).Seconds()
	if secs <= 0 {
		return out
	}
	out.Seconds = secs
	var d [len(exchangeBoundsSeconds) + 1]uint64
	var total uint64
	for i := range d {
		if newest.buckets[i] >= oldest.buckets[i] {
			d[i] = newest.buckets[i] - oldest.buckets[i]
		}
		total += d[i]
	}
	var errs uint64
	if newest.errs >= oldest.errs {
		errs = newest.errs - oldest.errs
	}
	out.Requests, out.Errors5xx = float64(total)/secs, float64(errs)/secs
	if total > 0 {
		out.P50, out.P99 = quantile(0.5, d[:], total), quantile(0.99, d[:], total)
	}
	return out
}

// quantile returns the q-quantile of counts (per bucket, of
// exchangeBoundsSeconds and +Inf), interpolated linearly within its
// bucket; in the +Inf bucket, the last finite bound.
func quantile(q float64, counts []uint64, total uint64) time.Duration {
	rank := q * float64(total)
	var cum float64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			if i == len(exchangeBoundsSeconds) {
				return time.Duration(exchangeBoundsSeconds[i-1] * float64(time.Second))
			}
			lo := 0.0
			if i > 0 {
				lo = exchangeBoundsSeconds[i-1]
			}
			hi := exchangeBoundsSeconds[i]
			return time.Duration((lo + (hi-lo)*(rank-cum)/float64(c)) * float64(time.Second))
		}
		cum += float64(c)
	}
	return time.Duration(exchangeBoundsSeconds[len(exchangeBoundsSeconds)-1] * float64(time.Second))
}
