package metrics_test

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

var _ metrics.StatsSource = (*limiter.Limiter)(nil)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newLimiter returns a Limiter with the Arweave groups and routes, where
// wallet_list runs in dry_run, 198.51.100.0/24 is denied and
// 203.0.113.0/24 exempt.
func newLimiter(t testing.TB) *limiter.Limiter {
	t.Helper()
	groups := limiter.ArweaveGroups()
	wl := groups["wallet_list"]
	wl.Mode = limiter.ModeDryRun
	groups["wallet_list"] = wl
	lim, err := limiter.New(memory.New(), t0, limiter.Config{
		Groups:     groups,
		Routes:     limiter.ArweaveRoutes(),
		IPv6Prefix: 64,
		Deny:       []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		Exempt:     []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func peerAt(t testing.TB, lim *limiter.Limiter, addr string) peer.Peer {
	t.Helper()
	p, err := lim.ParsePeer(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func groupID(t testing.TB, lim *limiter.Limiter, name string) limiter.GroupID {
	t.Helper()
	g, ok := lim.GroupID(name)
	if !ok {
		t.Fatalf("no group %q", name)
	}
	return g
}

// groupOnly passes on the metrics of one group and those without a
// limiter_id, so that exact expectations stay short.
type groupOnly struct {
	c     prometheus.Collector
	group string
}

func (f groupOnly) Describe(ch chan<- *prometheus.Desc) { f.c.Describe(ch) }

func (f groupOnly) Collect(ch chan<- prometheus.Metric) {
	mc := make(chan prometheus.Metric)
	go func() {
		f.c.Collect(mc)
		close(mc)
	}()
	for m := range mc {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		keep := true
		for _, l := range pb.GetLabel() {
			if l.GetName() == "limiter_id" {
				keep = l.GetValue() == f.group
			}
		}
		if keep {
			ch <- m
		}
	}
}

// series gathers g into "name{label="value",…}" → value, labels sorted by
// name; a histogram gives name_count and name_sum.
func series(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, "{", "_count{", 1)] = float64(m.GetHistogram().GetSampleCount())
				out[strings.Replace(key, "{", "_sum{", 1)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func checkSeries(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s missing", k)
		} else if v != want[k] {
			t.Errorf("%s = %v, want %v", k, v, want[k])
		}
	}
}

// TestCollectorMetricsGroup drives the metrics group (leaky_limit 2,
// concurrency_limit 2, one leaky tick a second) through both rejections (two
// for concurrency, one for rate), a
// manual reduction and the ticks that empty it, and compares the exact
// exposition.
func TestCollectorMetricsGroup(t *testing.T) {
	lim := newLimiter(t)
	var lat insight.Latencies
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(groupOnly{metrics.NewCollector(lim, &lat, nil), "metrics"})

	g := groupID(t, lim, "metrics")
	a := peerAt(t, lim, "192.0.2.1")
	d1 := lim.Decide(t0, a, g)
	d2 := lim.Decide(t0, a, g)
	d3 := lim.Decide(t0, a, g) // two in flight: concurrency
	lim.Decide(t0, a, g)       // and again
	d2.Release()
	d4 := lim.Decide(t0, a, g) // two tokens used: rate_limit
	for i, c := range []struct {
		d      limiter.Decision
		ok     bool
		reason limiter.Reason
	}{{d1, true, 0}, {d2, true, 0}, {d3, false, limiter.ReasonConcurrency}, {d4, false, limiter.ReasonRateLimit}} {
		if c.d.Allowed != c.ok || c.d.Reason != c.reason {
			t.Fatalf("decision %d: allowed %v reason %v, want %v %v", i+1, c.d.Allowed, c.d.Reason, c.ok, c.reason)
		}
	}
	if r := lim.Reduce(t0, a.Key, g); r != limiter.Reduced {
		t.Fatalf("Reduce = %v, want reduced", r)
	}
	lat.Observe(g, 700*time.Nanosecond)
	lat.Observe(g, 3*time.Microsecond)
	lat.Observe(g, 3*time.Microsecond)
	lat.Observe(g, 20*time.Millisecond)

	const help = `
# HELP ar_limiter_leaky_tick_delete_peer_total The number of times a peer was dropped from the leaky bucket token register.
# TYPE ar_limiter_leaky_tick_delete_peer_total counter
ar_limiter_leaky_tick_delete_peer_total{limiter_id="metrics"} %[1]d
# HELP ar_limiter_leaky_tick_reductions_peer The number of leaky bucket tick reductions performed for a peer holding tokens.
# TYPE ar_limiter_leaky_tick_reductions_peer counter
ar_limiter_leaky_tick_reductions_peer{limiter_id="metrics"} %[2]d
# HELP ar_limiter_leaky_tick_token_reductions_total The number of consumed leaky bucket tokens given back by ticks, all peers together.
# TYPE ar_limiter_leaky_tick_token_reductions_total counter
ar_limiter_leaky_tick_token_reductions_total{limiter_id="metrics"} %[3]d
# HELP ar_limiter_leaky_ticks The number of leaky bucket ticks the limiter has processed.
# TYPE ar_limiter_leaky_ticks counter
ar_limiter_leaky_ticks{limiter_id="metrics"} %[4]d
# HELP ar_limiter_peers The number of peers the limiter tracks now, by limiting type: with requests in flight (concurrency), holding leaky bucket tokens, holding sliding window timestamps.
# TYPE ar_limiter_peers gauge
ar_limiter_peers{limiter_id="metrics",limiting_type="concurrency"} %[5]d
ar_limiter_peers{limiter_id="metrics",limiting_type="leaky_bucket_tokens"} %[6]d
ar_limiter_peers{limiter_id="metrics",limiting_type="sliding_window_timestamps"} 0
# HELP ar_limiter_reduce_requests_total The number of manual reduction requests (one leaky-bucket token given back to a peer).
# TYPE ar_limiter_reduce_requests_total counter
ar_limiter_reduce_requests_total{limiter_id="metrics"} 1
# HELP ar_limiter_rejected_total The number of requests rejected by the limiter (429), by reason: concurrency or rate_limit; and (503) adaptive, shed by the group's adaptive concurrency limit.
# TYPE ar_limiter_rejected_total counter
ar_limiter_rejected_total{limiter_id="metrics",reason="concurrency"} 2
ar_limiter_rejected_total{limiter_id="metrics",reason="rate_limit"} 1
# HELP ar_limiter_requests_total The number of requests the limiter has processed.
# TYPE ar_limiter_requests_total counter
ar_limiter_requests_total{limiter_id="metrics"} 5
# HELP ar_limiter_response_time_microseconds Time the limiter took to decide on a request, in microseconds.
# TYPE ar_limiter_response_time_microseconds histogram
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="1"} 1
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="2"} 1
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="5"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="10"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="25"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="50"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="100"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="250"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="500"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="1000"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="2500"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="5000"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="10000"} 3
ar_limiter_response_time_microseconds_bucket{limiter_id="metrics",le="+Inf"} 4
ar_limiter_response_time_microseconds_sum{limiter_id="metrics"} 20006.7
ar_limiter_response_time_microseconds_count{limiter_id="metrics"} 4
# HELP ar_limiter_tracked_items_total The number of items the limiter tracks now, by limiting type: requests in flight (concurrency), leaky bucket tokens, sliding window timestamps.
# TYPE ar_limiter_tracked_items_total gauge
ar_limiter_tracked_items_total{limiter_id="metrics",limiting_type="concurrency"} %[7]d
ar_limiter_tracked_items_total{limiter_id="metrics",limiting_type="leaky_bucket_tokens"} %[8]d
ar_limiter_tracked_items_total{limiter_id="metrics",limiting_type="sliding_window_timestamps"} 0
# HELP limiterd_admitted_total Requests admitted, by how: within the sliding window, with a leaky bucket token, by the group's other algorithm, or with no limiting applied (exempt peer, mode off, limiter switched off).
# TYPE limiterd_admitted_total counter
limiterd_admitted_total{limiter_id="metrics",via="algorithm"} 0
limiterd_admitted_total{limiter_id="metrics",via="leaky_bucket"} 2
limiterd_admitted_total{limiter_id="metrics",via="no_limiting_applied"} 0
limiterd_admitted_total{limiter_id="metrics",via="sliding_window"} 0
# HELP limiterd_tracked_entries (peer, group) entries the limiter tracks now.
# TYPE limiterd_tracked_entries gauge
limiterd_tracked_entries %[9]d
`
	names := []string{
		"ar_limiter_leaky_tick_delete_peer_total", "ar_limiter_leaky_tick_reductions_peer",
		"ar_limiter_leaky_tick_token_reductions_total", "ar_limiter_leaky_ticks",
		"ar_limiter_peers", "ar_limiter_reduce_requests_total", "ar_limiter_rejected_total",
		"ar_limiter_requests_total", "ar_limiter_response_time_microseconds",
		"ar_limiter_tracked_items_total", "limiterd_admitted_total", "limiterd_tracked_entries",
	}
	// One request in flight, one token left after the reduction.
	want := fmt.Sprintf(help, 0, 0, 0, 0, 1, 1, 1, 1, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// Release; the first tick takes the last token, the second drops the
	// peer from the token register, and the entry goes.
	d1.Release()
	lim.Tick(t0.Add(time.Second))
	want = fmt.Sprintf(help, 0, 1, 1, 1, 0, 1, 0, 0, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal("after release and one tick:", err)
	}
	lim.Tick(t0.Add(2 * time.Second))
	want = fmt.Sprintf(help, 1, 1, 1, 2, 0, 0, 0, 0, 0)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal("after two ticks:", err)
	}
}

// TestCollectorAllGroups checks the series of every group, the dry run,
// deny list, exemption and sliding-window paths, and limiterd's own
// counters.
func TestCollectorAllGroups(t *testing.T) {
	lim := newLimiter(t)
	var lat insight.Latencies
	var pc insight.ProxyCounters
	reg := prometheus.NewPedanticRegistry()
	c := metrics.NewCollector(lim, &lat, &pc)
	reg.MustRegister(c)

	a := peerAt(t, lim, "192.0.2.1")
	chunk := groupID(t, lim, "chunk")
	var held []limiter.Decision
	for range 3 {
		held = append(held, lim.Decide(t0, a, chunk)) // window of 100
	}
	wl := groupID(t, lim, "wallet_list") // dry_run, leaky_limit 1
	for range 3 {
		d := lim.Decide(t0, a, wl)
		if !d.Allowed {
			t.Fatal("dry_run rejected")
		}
		d.Release()
	}
	general := groupID(t, lim, "general")
	if d := lim.Decide(t0, peerAt(t, lim, "198.51.100.7"), general); d.Allowed || d.Reason != limiter.ReasonDenied {
		t.Fatalf("denied peer: %+v", d)
	}
	if d := lim.Decide(t0, peerAt(t, lim, "203.0.113.9"), general); !d.Allowed || d.Via != limiter.ViaUnlimited {
		t.Fatalf("exempt peer: %+v", d)
	}
	pc.UpstreamErrors.Add(2)
	pc.UpstreamTimeouts.Add(3)
	pc.InternalErrors.Add(4)
	pc.ExemptPath.Add(5)
	pc.BadRequests.Add(6)
	pc.TooLarge.Add(7)
	pc.ConnsRefusedPerIP.Add(8)
	pc.ConnsRefusedTotal.Add(9)
	pc.AnswerMemory.Add(10)
	pc.AnswerDisk.Add(11)
	pc.UpstreamWaits.Add(12)
	pc.UpstreamWaitsOverShare.Add(5)
	lim.Reduce(t0, a.Key, chunk) // counts; nothing to reduce

	groups := lim.Groups()
	if len(groups) != len(limiter.ArweaveGroups())+1 {
		t.Fatalf("groups %v: want the Arweave ones and local_peers", groups)
	}
	// Per group: 9 ar_ counter series, 6 gauges, 7 limiterd_ counter
	// series, 3 limiterd_ gauges (entries, sliding log timestamps, the
	// algorithm), one histogram; then 23 process-wide series (6 of them
	// HTTP/2's, 6 the answers' buffers and the upstream pool's waits).
	if n, want := testutil.CollectAndCount(c), 26*len(groups)+23; n != want {
		t.Errorf("CollectAndCount = %d, want %d", n, want)
	}
	if n := testutil.CollectAndCount(c, "ar_limiter_rejected_total"); n != 2*len(groups) {
		t.Errorf("ar_limiter_rejected_total: %d series, want %d", n, 2*len(groups))
	}

	got := series(t, reg)
	checkSeries(t, got, map[string]float64{
		`ar_limiter_requests_total{limiter_id="chunk"}`:                                                3,
		`ar_limiter_reduce_requests_total{limiter_id="chunk"}`:                                         1,
		`limiterd_admitted_total{limiter_id="chunk",via="sliding_window"}`:                             3,
		`ar_limiter_peers{limiter_id="chunk",limiting_type="concurrency"}`:                             1,
		`ar_limiter_peers{limiter_id="chunk",limiting_type="sliding_window_timestamps"}`:               1,
		`ar_limiter_tracked_items_total{limiter_id="chunk",limiting_type="concurrency"}`:               3,
		`ar_limiter_tracked_items_total{limiter_id="chunk",limiting_type="sliding_window_timestamps"}`: 3,
		`ar_limiter_tracked_items_total{limiter_id="chunk",limiting_type="leaky_bucket_tokens"}`:       0,

		`ar_limiter_requests_total{limiter_id="wallet_list"}`:                            3,
		`limiterd_would_reject_total{limiter_id="wallet_list"}`:                          2,
		`ar_limiter_rejected_total{limiter_id="wallet_list",reason="rate_limit"}`:        0,
		`limiterd_admitted_total{limiter_id="wallet_list",via="leaky_bucket"}`:           1,
		`ar_limiter_peers{limiter_id="wallet_list",limiting_type="leaky_bucket_tokens"}`: 1,

		`ar_limiter_requests_total{limiter_id="general"}`:                             1,
		`limiterd_denied_total{limiter_id="general"}`:                                 1,
		`ar_limiter_requests_total{limiter_id="local_peers"}`:                         1,
		`limiterd_admitted_total{limiter_id="local_peers",via="no_limiting_applied"}`: 1,

		`limiterd_tracked_entries{}`:                                      2,
		`limiterd_evictions_total{}`:                                      0,
		`limiterd_upstream_errors_total{kind="unreachable"}`:              2,
		`limiterd_upstream_errors_total{kind="timeout"}`:                  3,
		`limiterd_internal_errors_total{}`:                                4,
		`limiterd_exempt_path_requests_total{}`:                           5,
		`limiterd_bad_requests_total{}`:                                   6,
		`limiterd_request_body_too_large_total{}`:                         7,
		`limiterd_connections_refused_total{cap="per_ip"}`:                8,
		`limiterd_connections_refused_total{cap="total"}`:                 9,
		`limiterd_answer_buffer_bytes{where="memory"}`:                    10,
		`limiterd_answer_buffer_bytes{where="disk"}`:                      11,
		`limiterd_upstream_waits_total{share="within"}`:                   7,
		`limiterd_upstream_waits_total{share="over"}`:                     5,
		`ar_limiter_response_time_microseconds_count{limiter_id="chunk"}`: 0,
	})

	// No label value is a peer's address, nor its prefix.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				if _, err := netip.ParseAddr(v); err == nil || strings.Contains(v, "192.0.2") || strings.Contains(v, "198.51") || strings.Contains(v, "203.0") {
					t.Errorf("%s: label %s=%q holds an address", mf.GetName(), l.GetName(), v)
				}
			}
		}
	}

	// Release the window's requests; the cleanup tick after expiry drops
	// the timestamps and the peer: every gauge is back to 0.
	for i := range held {
		held[i].Release()
	}
	lim.Tick(t0.Add(4 * time.Minute))
	got = series(t, reg)
	for k, v := range got {
		if (strings.HasPrefix(k, "ar_limiter_peers{") || strings.HasPrefix(k, "ar_limiter_tracked_items_total{")) && v != 0 {
			t.Errorf("%s = %v after the ticks, want 0", k, v)
		}
	}
	checkSeries(t, got, map[string]float64{
		`ar_limiter_cleanup_tick_expired_sliding_peers_deleted_total{limiter_id="chunk"}`: 1,
		`ar_limiter_leaky_tick_delete_peer_total{limiter_id="wallet_list"}`:               1,
		`ar_limiter_leaky_ticks{limiter_id="general"}`:                                    8,
		`ar_limiter_leaky_ticks{limiter_id="metrics"}`:                                    240,
		`limiterd_tracked_entries{}`:                                                      0,
	})
}

// TestCollectorLint lets through only the problems of the names docs/metrics.md
// takes from the Arweave node.
func TestCollectorLint(t *testing.T) {
	lim := newLimiter(t)
	problems, err := testutil.CollectAndLint(metrics.NewCollector(lim, &insight.Latencies{}, &insight.ProxyCounters{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Metric+": "+p.Text)
	}
	sort.Strings(got)
	want := []string{
		`ar_limiter_leaky_tick_reductions_peer: counter metrics should have "_total" suffix`,
		`ar_limiter_leaky_ticks: counter metrics should have "_total" suffix`,
		`ar_limiter_response_time_microseconds: use base unit "seconds" instead of "microseconds"`,
		`ar_limiter_tracked_items_total: non-counter metrics should not have "_total" suffix`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("lint problems:\n%s\nwant only:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCollectorExtra checks that extra metrics are collected and described,
// so that a pedantic registry accepts them, and that nil sources leave their
// metrics out.
func TestCollectorExtra(t *testing.T) {
	lim := newLimiter(t)
	snap := prometheus.NewDesc("limiterd_snapshot_duration_seconds", "Duration of the last snapshot.", nil, nil)
	var calls atomic.Int64
	extra := func(ch chan<- prometheus.Metric) {
		calls.Add(1)
		ch <- prometheus.MustNewConstMetric(snap, prometheus.GaugeValue, 0.25)
	}
	c := metrics.NewCollector(lim, nil, nil, extra)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	got := series(t, reg)
	checkSeries(t, got, map[string]float64{`limiterd_snapshot_duration_seconds{}`: 0.25})
	for k := range got {
		if strings.HasPrefix(k, "ar_limiter_response_time") || strings.HasPrefix(k, "limiterd_upstream") ||
			strings.HasPrefix(k, "limiterd_internal") || strings.HasPrefix(k, "limiterd_exempt") {
			t.Errorf("%s present without its source", k)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("extra called %d times, want 2 (Describe, Collect)", n)
	}
	// An extra metric that clashes with one registered already is refused
	// at registration, because Describe names it.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "limiterd_snapshot_duration_seconds", Help: "Taken."}))
	if err := other.Register(metrics.NewCollector(lim, nil, nil, extra)); err == nil {
		t.Error("registering a clashing extra metric: no error")
	}
}

// TestCollectorConcurrentScrape scrapes while 4 goroutines decide: counters
// never go back, and the last scrape sees every request (run with -race).
func TestCollectorConcurrentScrape(t *testing.T) {
	lim := newLimiter(t)
	var lat insight.Latencies
	var pc insight.ProxyCounters
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(lim, &lat, &pc))
	groups := []limiter.GroupID{groupID(t, lim, "general"), groupID(t, lim, "chunk"), groupID(t, lim, "metrics")}

	const workers, each = 4, 3000
	peers := make([]peer.Peer, 64)
	for i := range peers {
		peers[i] = peerAt(t, lim, fmt.Sprintf("192.0.2.%d", i))
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				p := peers[(w*each+i)%len(peers)]
				g := groups[i%len(groups)]
				start := time.Now()
				d := lim.Decide(now, p, g)
				lat.Observe(g, time.Since(start))
				if i%7 == 0 {
					lim.Reduce(now, p.Key, g)
				}
				if i%100 == 0 {
					pc.UpstreamErrors.Add(1)
				}
				d.Release()
			}
		})
	}
	go func() { wg.Wait(); done.Store(true) }()

	sum := func(m map[string]float64, prefix string) float64 {
		var s float64
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				s += v
			}
		}
		return s
	}
	var lastReq, lastLat float64
	scrapes := 0
	for !done.Load() || scrapes == 0 {
		m := series(t, reg)
		req, n := sum(m, "ar_limiter_requests_total{"), sum(m, "ar_limiter_response_time_microseconds_count{")
		if req < lastReq || n < lastLat {
			t.Fatalf("scrape %d: requests %v (was %v), latency count %v (was %v)", scrapes, req, lastReq, n, lastLat)
		}
		lastReq, lastLat = req, n
		scrapes++
	}
	wg.Wait()
	lim.Tick(t0.Add(time.Hour))
	m := series(t, reg)
	if req := sum(m, "ar_limiter_requests_total{"); req != workers*each {
		t.Errorf("requests_total %v, want %d", req, workers*each)
	}
	if n := sum(m, "ar_limiter_response_time_microseconds_count{"); n != workers*each {
		t.Errorf("latency count %v, want %d", n, workers*each)
	}
	if v := m[`limiterd_upstream_errors_total{kind="unreachable"}`]; v != workers*each/100 {
		t.Errorf("upstream errors %v, want %d", v, workers*each/100)
	}
	if g := sum(m, "ar_limiter_peers{") + sum(m, "ar_limiter_tracked_items_total{") + m["limiterd_tracked_entries{}"]; g != 0 {
		t.Errorf("gauges sum to %v after release and the ticks, want 0", g)
	}
	t.Logf("%d scrapes during %d decisions", scrapes, workers*each)
}

func BenchmarkCollectorGather(b *testing.B) {
	lim := newLimiter(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(lim, &insight.Latencies{}, &insight.ProxyCounters{}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
