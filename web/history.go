package web

import (
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/templates"
)

// HistorySeconds is how far back History remembers: one sample a second
// for an hour.
const HistorySeconds = 3600

// histSample is one group's second: the counters' increase during it and
// the in-flight gauge at its end. A second never counts 4 billion of
// anything; the fields saturate rather than wrap.
type histSample struct {
	requests, admitted, rejConc, rejRate, would, inflight uint32
}

// histCounters are the cumulative limiter counters History follows.
type histCounters struct {
	requests, admitted, rejConc, rejRate, would uint64
}

func countersOf(s *limiter.GroupStats) histCounters {
	return histCounters{
		requests: s.Requests,
		admitted: s.AllowedSliding + s.AllowedLeaky + s.Unlimited,
		rejConc:  s.RejectedConcurrency,
		rejRate:  s.RejectedRateLimit,
		would:    s.WouldReject,
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
// would_reject) and of its in-flight gauge, for the overview's charts.
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

// History returns the server's per-second history (fed by Run).
func (s *Server) History() *History { return s.history }

func sat32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }

func delta(cur, prev uint64) uint64 {
	if cur < prev { // the counter was reset
		return cur
	}
	return cur - prev
}

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
		s.inflight = sat32(uint64(max(st.ItemsConcurrency, 0)))
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
	Inflight            []uint64 `json:"inflight"`
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
	s.WouldReject, s.Inflight = make([]uint64, n), make([]uint64, n)
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
			s.Inflight[k] += uint64(x.inflight)
		}
	}
	return s
}

// Totals sums s: the counts over its seconds and the highest in-flight.
func (s Series) Totals() templates.HistoryRow {
	var r templates.HistoryRow
	for k := range s.T {
		r.Requests += s.Requests[k]
		r.Admitted += s.Admitted[k]
		r.RejectedConcurrency += s.RejectedConcurrency[k]
		r.RejectedRateLimit += s.RejectedRateLimit[k]
		r.WouldReject += s.WouldReject[k]
		r.PeakInflight = max(r.PeakInflight, s.Inflight[k])
	}
	r.Seconds = len(s.T)
	return r
}

// historyTableMinutes is what the overview's table (shown without
// JavaScript, in place of the charts) sums.
const historyTableMinutes = 10

// charts is the overview's chart section: the groups to choose from and
// each group's totals over the last 10 minutes.
func (d *dashboard) charts() templates.Charts {
	since := d.s.now().Add(-historyTableMinutes * time.Minute)
	c := templates.Charts{URL: "/stats/history?minutes=60", Minutes: historyTableMinutes}
	for _, name := range slices.Sorted(maps.Keys(d.s.lim.Stats())) {
		c.Groups = append(c.Groups, name)
		r := d.s.history.Series(name, since).Totals()
		r.Group = name
		c.Rows = append(c.Rows, r)
	}
	c.All = d.s.history.Series("", since).Totals()
	c.All.Group = "All groups"
	return c
}

// minutesParam reads the charts' ?minutes= (1 to 60, default 60); on a bad
// value it answers 422 naming the field and returns false.
func minutesParam(w http.ResponseWriter, q url.Values) (int, bool) {
	m := q.Get("minutes")
	if m == "" {
		return 60, true
	}
	n, err := strconv.Atoi(m)
	if err != nil || n < 1 || n > 60 {
		writeError(w, http.StatusUnprocessableEntity, "minutes must be an integer from 1 to 60", "minutes")
		return 0, false
	}
	return n, true
}

// handleHistory serves GET /stats/history?group=&minutes=: the last
// minutes (1 to 60, default 60) of group's per-second samples as JSON
// (Series); no group means every group summed.
func (d *dashboard) handleHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	minutes, ok := minutesParam(w, q)
	if !ok {
		return
	}
	group := q.Get("group")
	if group != "" {
		if _, ok := d.s.lim.Stats()[group]; !ok {
			writeError(w, http.StatusUnprocessableEntity, "no group "+strconv.Quote(group), "group")
			return
		}
	}
	since := d.s.now().Add(-time.Duration(minutes) * time.Minute)
	writeJSON(w, http.StatusOK, d.s.history.Series(group, since))
}
