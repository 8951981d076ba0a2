package insight_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

// counts builds one group's cumulative counters.
func hcounts(requests, admitted, rejConc, rejRate, would uint64, inflight int64) limiter.GroupStats {
	return limiter.GroupStats{
		Requests: requests, AllowedLeaky: admitted, RejectedConcurrency: rejConc,
		RejectedRateLimit: rejRate, WouldReject: would, ItemsConcurrency: inflight,
	}
}

var h0 = time.Unix(1_700_000_000, 0)

func hsec(n int) time.Time { return h0.Add(time.Duration(n) * time.Second) }

func hsecs(from, to int) []int64 {
	var out []int64
	for n := from; n <= to; n++ {
		out = append(out, hsec(n).Unix())
	}
	return out
}

func TestHistoryDeltas(t *testing.T) {
	h := insight.NewHistory()
	// The first sample is the baseline: counts since the start do not
	// land in one second.
	h.Sample(hsec(0), map[string]limiter.GroupStats{"a": hcounts(100, 90, 5, 5, 0, 3)})
	h.Sample(hsec(1).Add(300*time.Millisecond), map[string]limiter.GroupStats{"a": hcounts(110, 97, 6, 7, 0, 4), "b": hcounts(50, 50, 0, 0, 0, 1)})
	h.Sample(hsec(2), map[string]limiter.GroupStats{"a": hcounts(110, 97, 6, 7, 2, 0), "b": hcounts(60, 55, 5, 0, 0, 2)})

	s := h.Series("a", hsec(-100))
	if !slices.Equal(s.T, hsecs(0, 2)) {
		t.Fatalf("t = %v", s.T)
	}
	want := insight.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 10, 0}, Admitted: []uint64{0, 7, 0},
		RejectedConcurrency: []uint64{0, 1, 0}, RejectedRateLimit: []uint64{0, 2, 0},
		WouldReject: []uint64{0, 0, 2}, Inflight: []uint64{3, 4, 0},
	}
	checkHistSeries(t, "a", s, want)
	// b appeared at second 1: its baseline; at 2 its increase.
	checkHistSeries(t, "b", h.Series("b", hsec(-100)), insight.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 0, 10}, Admitted: []uint64{0, 0, 5},
		RejectedConcurrency: []uint64{0, 0, 5}, RejectedRateLimit: []uint64{0, 0, 0},
		WouldReject: []uint64{0, 0, 0}, Inflight: []uint64{0, 1, 2},
	})
	// All groups summed.
	checkHistSeries(t, "all", h.Series("", hsec(-100)), insight.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 10, 10}, Admitted: []uint64{0, 7, 5},
		RejectedConcurrency: []uint64{0, 1, 5}, RejectedRateLimit: []uint64{0, 2, 0},
		WouldReject: []uint64{0, 0, 2}, Inflight: []uint64{3, 5, 2},
	})
	// since cuts the start; an unknown group is zeros over the same seconds.
	if s := h.Series("a", hsec(2)); !slices.Equal(s.T, hsecs(2, 2)) || s.WouldReject[0] != 2 {
		t.Fatalf("since 2: %+v", s)
	}
	checkHistSeries(t, "nobody", h.Series("nobody", hsec(1)), insight.Series{
		T: hsecs(1, 2), Requests: []uint64{0, 0}, Admitted: []uint64{0, 0},
		RejectedConcurrency: []uint64{0, 0}, RejectedRateLimit: []uint64{0, 0},
		WouldReject: []uint64{0, 0}, Inflight: []uint64{0, 0},
	})
	// After the newest sample: empty, not nil (JSON [] rather than null).
	if s := h.Series("a", hsec(3)); s.T == nil || len(s.T) != 0 || s.Inflight == nil {
		t.Fatalf("since 3: %+v", s)
	}
}

// TestHistoryDenied: the requests of denied peers (403) per second.
func TestHistoryDenied(t *testing.T) {
	h := insight.NewHistory()
	h.Sample(hsec(0), map[string]limiter.GroupStats{"a": {Requests: 5, Denied: 5}})
	h.Sample(hsec(1), map[string]limiter.GroupStats{"a": {Requests: 12, Denied: 9}})
	h.Sample(hsec(2), map[string]limiter.GroupStats{"a": {Requests: 12, Denied: 9}})
	s := h.Series("a", hsec(0))
	if !slices.Equal(s.Denied, []uint64{0, 4, 0}) || !slices.Equal(s.Requests, []uint64{0, 7, 0}) {
		t.Fatalf("denied %v, requests %v", s.Denied, s.Requests)
	}
}

// TestHistoryAdaptive: the requests the adaptive limit shed per second,
// its limit and its latency at each second's end.
func TestHistoryAdaptive(t *testing.T) {
	h := insight.NewHistory()
	h.Sample(hsec(0), map[string]limiter.GroupStats{"a": {Requests: 5, RejectedAdaptive: 2, AdaptiveLimit: 40, AdaptiveLatencyUS: 9000}})
	h.Sample(hsec(1), map[string]limiter.GroupStats{"a": {Requests: 12, RejectedAdaptive: 6, AdaptiveLimit: 30, AdaptiveLatencyUS: 12000}})
	s := h.Series("a", hsec(0))
	if !slices.Equal(s.Shed, []uint64{0, 4}) || !slices.Equal(s.AdaptiveLimit, []uint64{40, 30}) || !slices.Equal(s.AdaptiveLatencyUS, []uint64{9000, 12000}) {
		t.Fatalf("shed %v, limit %v, latency %v", s.Shed, s.AdaptiveLimit, s.AdaptiveLatencyUS)
	}
}

func TestHistoryEmpty(t *testing.T) {
	b, err := json.Marshal(insight.NewHistory().Series("", h0))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"t":[],"requests":[],"admitted":[],"rejected_concurrency":[],"rejected_rate_limit":[],"would_reject":[],"denied":[],"inflight":[],"shed":[],"adaptive_limit":[],"adaptive_latency_us":[]}`
	if string(b) != want {
		t.Fatalf("%s", b)
	}
}

func TestHistoryGapsAndClock(t *testing.T) {
	h := insight.NewHistory()
	st := func(n uint64) map[string]limiter.GroupStats {
		return map[string]limiter.GroupStats{"a": hcounts(n, n, 0, 0, 0, 1)}
	}
	h.Sample(hsec(0), st(0))
	h.Sample(hsec(1), st(5))
	// Seconds 2 to 4 missed: zeros; second 5 holds everything since 1.
	h.Sample(hsec(5), st(12))
	// The clock goes back: ignored, and its increase is not lost.
	h.Sample(hsec(3), st(20))
	// A second sample in the same second adds to it.
	h.Sample(hsec(6), st(21))
	h.Sample(hsec(6).Add(900*time.Millisecond), st(25))
	s := h.Series("a", hsec(0))
	if !slices.Equal(s.T, hsecs(0, 6)) {
		t.Fatalf("t = %v", s.T)
	}
	if want := []uint64{0, 5, 0, 0, 0, 7, 13}; !slices.Equal(s.Requests, want) {
		t.Fatalf("requests %v, want %v", s.Requests, want)
	}
	if want := []uint64{1, 1, 0, 0, 0, 1, 1}; !slices.Equal(s.Inflight, want) {
		t.Fatalf("inflight %v, want %v", s.Inflight, want)
	}
	// A counter reset (it went down) counts from zero.
	h.Sample(hsec(7), st(3))
	if s := h.Series("a", hsec(7)); s.Requests[0] != 3 {
		t.Fatalf("after a reset: %v", s.Requests)
	}
}

func TestHistoryKeepsAnHour(t *testing.T) {
	h := insight.NewHistory()
	var n uint64
	for i := range 2*insight.HistorySeconds + 17 {
		n += uint64(i % 7)
		h.Sample(hsec(i), map[string]limiter.GroupStats{"a": hcounts(n, n, 0, 0, 0, int64(i))})
	}
	last := 2*insight.HistorySeconds + 16
	s := h.Series("a", hsec(-1))
	if len(s.T) != insight.HistorySeconds || s.T[0] != hsec(last-insight.HistorySeconds+1).Unix() || s.T[len(s.T)-1] != hsec(last).Unix() {
		t.Fatalf("%d seconds, %d..%d", len(s.T), s.T[0], s.T[len(s.T)-1])
	}
	for k, tt := range s.T {
		i := int(tt - h0.Unix())
		if s.Requests[k] != uint64(i%7) || s.Inflight[k] != uint64(i) {
			t.Fatalf("second %d: requests %d inflight %d", i, s.Requests[k], s.Inflight[k])
		}
	}
	// A jump longer than the hour clears everything before it.
	h.Sample(hsec(last+5000), map[string]limiter.GroupStats{"a": hcounts(n+4, n+4, 0, 0, 0, 0)})
	s = h.Series("a", hsec(0))
	if len(s.T) != insight.HistorySeconds {
		t.Fatalf("%d seconds", len(s.T))
	}
	var sum uint64
	for _, v := range s.Requests {
		sum += v
	}
	if sum != 4 || s.Requests[len(s.Requests)-1] != 4 {
		t.Fatalf("after the jump: sum %d", sum)
	}
}

func TestHistoryConcurrent(t *testing.T) {
	h := insight.NewHistory()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 2000 {
			h.Sample(hsec(i), map[string]limiter.GroupStats{"a": hcounts(uint64(i), 0, 0, 0, 0, 0)})
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s := h.Series("", hsec(0))
				if len(s.T) != len(s.Requests) || len(s.T) > insight.HistorySeconds {
					t.Error("inconsistent series")
					return
				}
			}
		})
	}
	wg.Wait()
}

func checkHistSeries(t *testing.T, name string, got, want insight.Series) {
	t.Helper()
	for _, c := range []struct {
		field     string
		got, want []uint64
	}{
		{"requests", got.Requests, want.Requests},
		{"admitted", got.Admitted, want.Admitted},
		{"rejected_concurrency", got.RejectedConcurrency, want.RejectedConcurrency},
		{"rejected_rate_limit", got.RejectedRateLimit, want.RejectedRateLimit},
		{"would_reject", got.WouldReject, want.WouldReject},
		{"inflight", got.Inflight, want.Inflight},
		{"denied", got.Denied, want.Denied},
	} {
		if c.want == nil && c.field == "denied" {
			continue
		}
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s %s = %v, want %v", name, c.field, c.got, c.want)
		}
	}
	if !slices.Equal(got.T, want.T) {
		t.Errorf("%s t = %v, want %v", name, got.T, want.T)
	}
}

// newHistoryDash is newDash keeping the Server, whose history the test
// samples by hand on the fake clock (Run is not running).

// TestSeriesRates: the rates over the last seconds of a series, a
// dry run's would-be rejections and the adaptive limit's sheds counted as
// rejections.
func TestSeriesRates(t *testing.T) {
	s := insight.Series{T: []int64{1, 2, 3, 4}, Requests: []uint64{100, 10, 20, 30},
		RejectedConcurrency: []uint64{0, 1, 0, 0}, RejectedRateLimit: []uint64{50, 2, 4, 6}, WouldReject: []uint64{0, 0, 1, 0},
		Denied: []uint64{0, 0, 3, 3}, Inflight: []uint64{9, 8, 7, 5}}
	r := s.Rates(3)
	if r.Seconds != 3 || r.Requests != 20 || r.Rejected != 14.0/3 || r.Denied != 2 || r.Inflight != 5 {
		t.Fatalf("last 3 s: %+v", r)
	}
	if r := s.Rates(60); r.Seconds != 4 || r.Requests != 40 {
		t.Fatalf("beyond the series: %+v", r)
	}
	if r := (insight.Series{}).Rates(30); r.Seconds != 0 || r.Requests != 0 {
		t.Fatalf("empty: %+v", r)
	}
	// The adaptive limit's sheds are rejections too.
	s.Shed = []uint64{0, 0, 0, 9}
	if r := s.Rates(3); r.Rejected != 23.0/3 {
		t.Fatalf("with 9 shed in the last second: %+v", r)
	}
}
