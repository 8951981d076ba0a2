package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/web"
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
	h := web.NewHistory()
	// The first sample is the baseline: counts since the start do not
	// land in one second.
	h.Sample(hsec(0), map[string]limiter.GroupStats{"a": hcounts(100, 90, 5, 5, 0, 3)})
	h.Sample(hsec(1).Add(300*time.Millisecond), map[string]limiter.GroupStats{"a": hcounts(110, 97, 6, 7, 0, 4), "b": hcounts(50, 50, 0, 0, 0, 1)})
	h.Sample(hsec(2), map[string]limiter.GroupStats{"a": hcounts(110, 97, 6, 7, 2, 0), "b": hcounts(60, 55, 5, 0, 0, 2)})

	s := h.Series("a", hsec(-100))
	if !slices.Equal(s.T, hsecs(0, 2)) {
		t.Fatalf("t = %v", s.T)
	}
	want := web.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 10, 0}, Admitted: []uint64{0, 7, 0},
		RejectedConcurrency: []uint64{0, 1, 0}, RejectedRateLimit: []uint64{0, 2, 0},
		WouldReject: []uint64{0, 0, 2}, Inflight: []uint64{3, 4, 0},
	}
	checkHistSeries(t, "a", s, want)
	// b appeared at second 1: its baseline; at 2 its increase.
	checkHistSeries(t, "b", h.Series("b", hsec(-100)), web.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 0, 10}, Admitted: []uint64{0, 0, 5},
		RejectedConcurrency: []uint64{0, 0, 5}, RejectedRateLimit: []uint64{0, 0, 0},
		WouldReject: []uint64{0, 0, 0}, Inflight: []uint64{0, 1, 2},
	})
	// All groups summed.
	checkHistSeries(t, "all", h.Series("", hsec(-100)), web.Series{
		T: hsecs(0, 2), Requests: []uint64{0, 10, 10}, Admitted: []uint64{0, 7, 5},
		RejectedConcurrency: []uint64{0, 1, 5}, RejectedRateLimit: []uint64{0, 2, 0},
		WouldReject: []uint64{0, 0, 2}, Inflight: []uint64{3, 5, 2},
	})
	// since cuts the start; an unknown group is zeros over the same seconds.
	if s := h.Series("a", hsec(2)); !slices.Equal(s.T, hsecs(2, 2)) || s.WouldReject[0] != 2 {
		t.Fatalf("since 2: %+v", s)
	}
	checkHistSeries(t, "nobody", h.Series("nobody", hsec(1)), web.Series{
		T: hsecs(1, 2), Requests: []uint64{0, 0}, Admitted: []uint64{0, 0},
		RejectedConcurrency: []uint64{0, 0}, RejectedRateLimit: []uint64{0, 0},
		WouldReject: []uint64{0, 0}, Inflight: []uint64{0, 0},
	})
	// After the newest sample: empty, not nil (JSON [] rather than null).
	if s := h.Series("a", hsec(3)); s.T == nil || len(s.T) != 0 || s.Inflight == nil {
		t.Fatalf("since 3: %+v", s)
	}
}

func TestHistoryEmpty(t *testing.T) {
	b, err := json.Marshal(web.NewHistory().Series("", h0))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"t":[],"requests":[],"admitted":[],"rejected_concurrency":[],"rejected_rate_limit":[],"would_reject":[],"inflight":[]}`
	if string(b) != want {
		t.Fatalf("%s", b)
	}
}

func TestHistoryGapsAndClock(t *testing.T) {
	h := web.NewHistory()
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
	h := web.NewHistory()
	var n uint64
	for i := range 2*web.HistorySeconds + 17 {
		n += uint64(i % 7)
		h.Sample(hsec(i), map[string]limiter.GroupStats{"a": hcounts(n, n, 0, 0, 0, int64(i))})
	}
	last := 2*web.HistorySeconds + 16
	s := h.Series("a", hsec(-1))
	if len(s.T) != web.HistorySeconds || s.T[0] != hsec(last-web.HistorySeconds+1).Unix() || s.T[len(s.T)-1] != hsec(last).Unix() {
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
	if len(s.T) != web.HistorySeconds {
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
	h := web.NewHistory()
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
				if len(s.T) != len(s.Requests) || len(s.T) > web.HistorySeconds {
					t.Error("inconsistent series")
					return
				}
			}
		})
	}
	wg.Wait()
}

func checkHistSeries(t *testing.T, name string, got, want web.Series) {
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
	} {
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

func TestDashboardHistory(t *testing.T) {
	d, s := newDashServer(t, nil)
	sample := func() { s.History().Sample(d.clock.Now(), d.lim.Stats()) }
	sample()
	// Five requests from one peer in general (leaky_limit 3): 3 admitted,
	// 2 rejected by the rate limit, in the second after the baseline.
	d.clock.Add(time.Second)
	g, _ := d.lim.GroupID("general")
	a := mustAddr(t, "203.0.113.7")
	p := limiter.Peer{Addr: a, Key: limiter.KeyFromAddr(a, 64)}
	for range 5 {
		dec := d.lim.Decide(d.clock.Now(), p, g)
		dec.Release()
	}
	sample()
	d.clock.Add(time.Second)
	sample()

	get := func(path string, hdr ...string) (int, map[string]any) {
		t.Helper()
		resp := d.do("GET", path, nil, hdr...)
		defer resp.Body.Close()
		var v map[string]any
		if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, v
	}
	bearer := []string{"Authorization", "Bearer " + dashToken}
	for _, path := range []string{"/stats/history", "/stats/history?group=general&minutes=60", "/stats/history?minutes=1"} {
		code, v := get(path, bearer...)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, v)
		}
		ts := v["t"].([]any)
		if len(ts) != 3 || ts[0].(float64) != float64(d.clock.Now().Unix()-2) {
			t.Fatalf("%s: t = %v", path, ts)
		}
		for key, want := range map[string][]float64{
			"requests": {0, 5, 0}, "admitted": {0, 3, 0}, "rejected_rate_limit": {0, 2, 0},
			"rejected_concurrency": {0, 0, 0}, "would_reject": {0, 0, 0}, "inflight": {0, 0, 0},
		} {
			got := v[key].([]any)
			for i := range want {
				if got[i].(float64) != want[i] {
					t.Fatalf("%s: %s = %v, want %v", path, key, got, want)
				}
			}
		}
	}
	// Another group saw nothing.
	if code, v := get("/stats/history?group=chunk", bearer...); code != 200 || v["requests"].([]any)[1].(float64) != 0 {
		t.Fatalf("chunk: %d %v", code, v)
	}
	// Unknown group, bad minutes: 422 with the field.
	for path, field := range map[string]string{
		"/stats/history?group=nope":      "group",
		"/stats/history?minutes=0":       "minutes",
		"/stats/history?minutes=61":      "minutes",
		"/stats/history?minutes=an+hour": "minutes",
	} {
		if code, v := get(path, bearer...); code != 422 || v["field"] != field {
			t.Fatalf("%s: %d %v", path, code, v)
		}
	}
	// No session, no token: sent to log in; a wrong token: 401.
	if resp := d.do("GET", "/stats/history", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous: %d", resp.StatusCode)
	}
	if resp := d.do("GET", "/stats/history", nil, "Authorization", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	// A session works too, with the dashboard's headers.
	cookie, csrf := d.login()
	resp := d.do("GET", "/stats/history?group=general", nil, "Cookie", cookie)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("session: %d %v", resp.StatusCode, resp.Header)
	}

	// The overview: the chart's div and, for no JavaScript, the table of
	// the last 10 minutes' totals.
	doc := d.page("/", cookie)
	checkPage(t, "/", doc, csrf)
	div := find(doc, func(n *html.Node) bool { return attr(n, "id") == "history-charts" })
	if len(div) != 1 || attr(div[0], "data-history-url") != "/stats/history?minutes=60" {
		t.Fatalf("chart div: %v", div)
	}
	row := func(group string) map[string]string {
		rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-history-group") == group })
		if len(rows) != 1 {
			t.Fatalf("%d history rows for %q", len(rows), group)
		}
		out := map[string]string{}
		for _, td := range find(rows[0], byTag("td")) {
			out[attr(td, "data-col")] = text(td)
		}
		return out
	}
	for _, group := range []string{"general", "All groups"} {
		if r := row(group); r["requests"] != "5" || r["admitted"] != "3" || r["rejected_rate_limit"] != "2" || r["rejected_concurrency"] != "0" {
			t.Fatalf("%s: %v", group, r)
		}
	}
	if r := row("chunk"); r["requests"] != "0" {
		t.Fatalf("chunk: %v", r)
	}
	opts := find(doc, func(n *html.Node) bool {
		return n.Data == "option" && n.Parent != nil && attr(n.Parent, "id") == "history-group"
	})
	if len(opts) != len(d.lim.Stats())+1 {
		t.Fatalf("%d group options", len(opts))
	}
	// Ten minutes later the table has forgotten them; the hour has not.
	d.clock.Add(11 * time.Minute)
	sample()
	if r := row2(t, d, cookie, "general"); r != "0" {
		t.Fatalf("after 11 minutes: %q", r)
	}
	if code, v := get("/stats/history?group=general", bearer...); code != 200 || len(v["t"].([]any)) != 3+660 {
		t.Fatalf("after 11 minutes: %d, %d seconds", code, len(v["t"].([]any)))
	}
}

// row2 is the requests cell of group's line in the overview's history table.
func row2(t *testing.T, d *dash, cookie, group string) string {
	t.Helper()
	doc := d.page("/", cookie)
	for _, td := range find(doc, func(n *html.Node) bool {
		return n.Data == "td" && attr(n, "data-col") == "requests" && n.Parent != nil && attr(n.Parent, "data-history-group") == group
	}) {
		return text(td)
	}
	t.Fatalf("no history row for %s", group)
	return ""
}
