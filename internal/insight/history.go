package insight

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// HistorySeconds is how far back History remembers: one sample a second
// for an hour.
const HistorySeconds = 3600

// histSample is one group's second: the counters' increase during it and
// the gauges at its end (in flight; the adaptive limit and the latency it
// follows, µs). A second never counts 4 billion of anything; the fields
// saturate rather than wrap.
type histSample struct {
	requests, admitted, rejConc, rejRate, would, inflight, denied uint32
	shed, limit, latency                                          uint32
}

// histCounters are the cumulative limiter counters History follows.
type histCounters struct {
	requests, admitted, rejConc, rejRate, would, denied, shed uint64
}

func countersOf(s *limiter.GroupStats) histCounters {
	return histCounters{
		requests: s.Requests,
		admitted: s.AllowedSliding + s.AllowedLeaky + s.AllowedAlgorithm + s.Unlimited,
		rejConc:  s.RejectedConcurrency,
		rejRate:  s.RejectedRateLimit,
		would:    s.WouldReject,
		denied:   s.Denied,
		shed:     s.RejectedAdaptive,
	}
}

// groupHistory is one group's ring: the sample of unix second t is at
// ring[t % HistorySeconds].
type groupHistory struct {
	ring [HistorySeconds]histSample
	prev histCounters
}

// History keeps, per group, the last hour of per-second samples of the
// limiter's counters (requests, admitted, rejected by reason,
// would_reject, denied, shed by the adaptive limit) and of its gauges (in
// flight, the adaptive limit and its latency), for the overview's charts.
// Server.Run feeds it once a second from Limiter.Stats; nothing on the
// request path touches it. It is safe for concurrent use.
type History struct {
	mu      sync.Mutex
	started bool
	first   int64 // unix second of the first sample
	last    int64 // unix second of the newest sample
	groups  map[string]*groupHistory
}

// NewHistory returns an empty History.
func NewHistory() *History { return &History{groups: map[string]*groupHistory{}} }

// Sample records the counters of stats as the second of now: the increase
// of each counter since the previous sample, and the in-flight gauge. A
// group's first sample is only its baseline (it records no increase).
// Seconds skipped since the previous sample are recorded as zeros; a
// second sample in the same second adds to it; a time before the newest
// sample (the clock went back) is ignored, and its increase is counted at
// the next sample that is not.
func (h *History) Sample(now time.Time, stats map[string]limiter.GroupStats) {
	sec := now.Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.started:
		h.started, h.first, h.last = true, sec, sec
	case sec < h.last:
		return
	case sec > h.last:
		// Clear the skipped seconds and this one in every group.
		from := max(h.last+1, sec-HistorySeconds+1)
		for _, g := range h.groups {
			for t := from; t <= sec; t++ {
				g.ring[t%HistorySeconds] = histSample{}
			}
		}
		h.last = sec
		h.first = max(h.first, sec-HistorySeconds+1)
	}
	i := sec % HistorySeconds
	for name, st := range stats {
		cur := countersOf(&st)
		g := h.groups[name]
		if g == nil {
			g = &groupHistory{prev: cur}
			h.groups[name] = g
		}
		s := &g.ring[i]
		s.requests = sat32(uint64(s.requests) + delta(cur.requests, g.prev.requests))
		s.admitted = sat32(uint64(s.admitted) + delta(cur.admitted, g.prev.admitted))
		s.rejConc = sat32(uint64(s.rejConc) + delta(cur.rejConc, g.prev.rejConc))
		s.rejRate = sat32(uint64(s.rejRate) + delta(cur.rejRate, g.prev.rejRate))
		s.would = sat32(uint64(s.would) + delta(cur.would, g.prev.would))
		s.denied = sat32(uint64(s.denied) + delta(cur.denied, g.prev.denied))
		s.shed = sat32(uint64(s.shed) + delta(cur.shed, g.prev.shed))
		s.inflight = sat32(uint64(max(st.ItemsConcurrency, 0)))
		s.limit = sat32(uint64(max(st.AdaptiveLimit, 0)))
		s.latency = sat32(uint64(max(st.AdaptiveLatencyUS, 0)))
		g.prev = cur
	}
}

// Series is a stretch of History as parallel slices, one element a
// second: T holds the unix seconds, the others the counts of that second
// (the increase of the counter) and the in-flight gauge at its end.
type Series struct {
	T                   []int64  `json:"t"`
	Requests            []uint64 `json:"requests"`
	Admitted            []uint64 `json:"admitted"`
	RejectedConcurrency []uint64 `json:"rejected_concurrency"`
	RejectedRateLimit   []uint64 `json:"rejected_rate_limit"`
	WouldReject         []uint64 `json:"would_reject"`
	// Denied counts the requests of denied peers (answered 403).
	Denied   []uint64 `json:"denied"`
	Inflight []uint64 `json:"inflight"`
	// Shed counts the requests the adaptive limit shed (503);
	// AdaptiveLimit and AdaptiveLatencyUS are its limit and the latency
	// it followed, µs, at the second's end (0 without adaptive
	// concurrency; summed over the groups for "").
	Shed              []uint64 `json:"shed"`
	AdaptiveLimit     []uint64 `json:"adaptive_limit"`
	AdaptiveLatencyUS []uint64 `json:"adaptive_latency_us"`
}

// Series returns group's seconds from since (or from the first sample,
// or an hour before the newest, whichever is latest) to the newest
// sample. The group "" is the sum of every group. A group History has not
// seen yields zeros over the same seconds. The slices are never nil.
func (h *History) Series(group string, since time.Time) Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s Series
	from, to := max(since.Unix(), h.first), h.last
	if !h.started || from > to {
		to = from - 1
	}
	n := int(to - from + 1)
	s.T = make([]int64, n)
	s.Requests, s.Admitted = make([]uint64, n), make([]uint64, n)
	s.RejectedConcurrency, s.RejectedRateLimit = make([]uint64, n), make([]uint64, n)
	s.WouldReject, s.Inflight, s.Denied = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	s.Shed, s.AdaptiveLimit, s.AdaptiveLatencyUS = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	var gs []*groupHistory
	if group == "" {
		gs = slices.Collect(maps.Values(h.groups))
	} else if g := h.groups[group]; g != nil {
		gs = []*groupHistory{g}
	}
	for k := range n {
		t := from + int64(k)
		s.T[k] = t
		for _, g := range gs {
			x := &g.ring[t%HistorySeconds]
			s.Requests[k] += uint64(x.requests)
			s.Admitted[k] += uint64(x.admitted)
			s.RejectedConcurrency[k] += uint64(x.rejConc)
			s.RejectedRateLimit[k] += uint64(x.rejRate)
			s.WouldReject[k] += uint64(x.would)
			s.Denied[k] += uint64(x.denied)
			s.Inflight[k] += uint64(x.inflight)
			s.Shed[k] += uint64(x.shed)
			s.AdaptiveLimit[k] += uint64(x.limit)
			s.AdaptiveLatencyUS[k] += uint64(x.latency)
		}
	}
	return s
}

// SeriesRates are a Series' rates over its last seconds.
type SeriesRates struct {
	// Seconds is how many seconds they cover.
	Seconds int
	// Requests, Rejected (concurrency, rate limit, dry run's would-be and
	// the adaptive limit's sheds) and Denied (403) per second.
	Requests, Rejected, Denied float64
	// Inflight is the in-flight gauge at the end of the newest second.
	Inflight int64
}

// Rates returns s's rates over its last secs seconds (all of s when it is
// shorter); zero rates when s is empty.
func (s Series) Rates(secs int) SeriesRates {
	n := len(s.T)
	r := SeriesRates{Seconds: min(n, max(secs, 0))}
	if r.Seconds == 0 {
		return r
	}
	var req, rej, den uint64
	for i := n - r.Seconds; i < n; i++ {
		req += s.Requests[i]
		rej += s.RejectedConcurrency[i] + s.RejectedRateLimit[i] + s.WouldReject[i] + s.ShedAt(i)
		den += s.Denied[i]
	}
	per := float64(r.Seconds)
	r.Requests, r.Rejected, r.Denied = float64(req)/per, float64(rej)/per, float64(den)/per
	r.Inflight = int64(s.Inflight[n-1])
	return r
}

// ShedAt is s.Shed[i], or 0 for a Series that has no sheds recorded (one
// built before adaptive concurrency, or by hand).
func (s Series) ShedAt(i int) uint64 {
	if i < len(s.Shed) {
		return s.Shed[i]
	}
	return 0
}

func sat32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }

func delta(cur, prev uint64) uint64 {
	if cur < prev { // the counter was reset
		return cur
	}
	return cur - prev
}
