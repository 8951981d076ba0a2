package web_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// benchPages are the dashboard's pages and the endpoints its scripts poll,
// as BenchmarkDashboardPages1M requests them.
var benchPages = []struct{ name, path string }{
	{"overview", "/"},
	{"overview-stats", "/stats"},
	{"history-json", "/stats/history?minutes=60"},
	{"history-json-general", "/stats/history?group=general&minutes=60"},
	{"peers", "/peers"},
	{"peers-requests", "/peers?sort=requests"},
	{"peers-tokens", "/peers?sort=tokens"},
	{"peers-last_seen", "/peers?sort=last_seen"},
	{"peers-inflight", "/peers?sort=inflight"},
	{"peers-group", "/peers?group=general&sort=tokens"},
	{"peers-deep", "/peers?sort=requests&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("950"))},
	{"peers-cidr-20", "/peers?q=" + url.QueryEscape("11.3.16.0/20")},
	{"peers-cidr-8", "/peers?q=" + url.QueryEscape("11.0.0.0/8")},
	{"peers-ip", "/peers?q=11.3.16.7"},
	{"peer", "/peer?key=11.3.16.7"},
	{"peer-history-json", "/peer/history?key=11.3.16.7"},
	{"groups", "/groups"},
	{"group", "/groups/general"},
	{"whatif-field", "/groups/general/whatif?field=leaky_limit&leaky_limit=100"},
	{"overview-rejections-json", "/stats/rejections?minutes=60"},
	{"peers-request_rate", "/peers?sort=request_rate"},
	{"peers-rejection_rate", "/peers?sort=rejection_rate"},
	{"offenders", "/offenders"},
	{"exemptions", "/exemptions"},
	{"outbound", "/outbound"},
	{"outbound-stats", "/outbound/stats"},
	{"audit", "/audit"},
}

// benchDashboard is a Server over 1 000 000 tracked entries with its
// background state as Run would have made it after an hour: the peer
// index built, an hour of per-second history, the peer history full
// (insight.PeerHistoryMax peers, an hour each), 5000 audit entries, live and file
// exemptions and an outbound throttle with 2000 keys. It serves the admin
// handler on loopback and returns the base URL and a session cookie.
func benchDashboard(b *testing.B) (s *web.Server, base, cookie string, t0 time.Time) {
	lim, t0 := limitertest.Filled(b, 1_000_000)
	now := func() time.Time { return t0 }
	ctx := context.Background()
	cfg := lim.Config()
	cfg.Exempt = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	cfg.ExemptPaths = []string{"/health"}
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	db := webtest.OpenStore(b)
	lv, err := live.New(ctx, lim, db, cfg, now)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		kind := []live.ExemptionKind{live.ExemptPeer, live.DenyPeer}[i%2]
		if _, err := lv.AddExemption(ctx, "bench", live.Exemption{Kind: kind, Value: fmt.Sprintf("198.18.%d.0/24", i), Note: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 5000 {
		if err := lv.Record(ctx, "bench", "peer.reduce", fmt.Sprintf("11.3.%d.%d general", (i>>8)&255, i&255), nil, "reduced"); err != nil {
			b.Fatal(err)
		}
	}
	th, err := throttle.New(t0, webtest.ArweaveThrottle())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		th.Try(t0, fmt.Sprintf("node-%d.example:1984", i), "/info")
	}
	s = webtest.MustNewServer(b, lim, lv, web.Options{Token: "bench-token", Now: now, Throttle: th, Offenses: db})
	fillActivity(b, s, lim, db, t0)

	// What Run builds in the background.
	s.RefreshPeerIndex()
	stats := lim.Stats()
	for i := range insight.HistorySeconds {
		for g, st := range stats {
			st.Requests += uint64(i * 7)
			st.AllowedLeaky += uint64(i * 5)
			st.RejectedRateLimit += uint64(i * 2)
			stats[g] = st
		}
		s.History().Sample(t0.Add(time.Duration(i-insight.HistorySeconds+1)*time.Second), stats)
	}
	keys := append(s.HistoryTop(), peer.KeyFromAddr(netip.MustParseAddr("11.3.16.7"), 64))
	for i := 0; len(keys) < insight.PeerHistoryMax; i++ {
		keys = append(keys, peer.KeyFromAddr(netip.AddrFrom4([4]byte{11, 3, byte(i >> 8), byte(i)}), 64))
	}
	for i := range insight.PeerHistoryPoints + 1 {
		at := t0.Add(time.Duration(i-insight.PeerHistoryPoints) * insight.PeerHistoryStep)
		n := uint64(i)
		s.PeerHistory().Sample(at, keys, func(k peer.Key) []limiter.EntryView {
			return []limiter.EntryView{{GroupID: 1, Requests: n * 9, RejectedRateLimit: n * 3, Inflight: int64(n % 4)}}
		})
	}
	if s.PeerHistory().Len() != insight.PeerHistoryMax {
		b.Fatalf("peer history holds %d peers", s.PeerHistory().Len())
	}

	srv := httptest.NewServer(s.AdminHandler())
	b.Cleanup(srv.Close)
	c := noRedirects(srv.Client())
	resp, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"bench-token"}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "limiterd_session" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		b.Fatalf("login: %d", resp.StatusCode)
	}
	return s, srv.URL, cookie, t0
}

// Sizes of the record of decisions the pages read in the benchmark.
const (
	benchLogged     = insight.RequestLogSize // the what-if's log, full: an hour of general
	benchTalkers    = 5000                   // peers in the top talkers' record
	benchPerBucket  = 20000                  // their decisions per 10 s
	benchOffenders  = 10000                  // the record of offenders, full
	benchHeavyPeers = 50
)

// fillActivity gives s (over lim, its offenders kept in kept) what an
// hour of busy traffic leaves in its record of decisions: the request log
// full (1 048 576 requests of general over
// the last hour, half from 50 heavy peers), 5 minutes of top talkers
// (5000 peers, 20 000 decisions every 10 s) and the record of offenders
// full.
func fillActivity(b *testing.B, s *web.Server, lim *limiter.Limiter, kept web.OffenseStore, t0 time.Time) {
	g, _ := lim.GroupID(limiter.GroupGeneral)
	peer := func(i int) peer.Key {
		return peer.KeyFromAddr(netip.AddrFrom4([4]byte{11, 3, byte(i >> 8), byte(i)}), 64)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	as := make([]insight.Arrival, 0, 1<<16)
	from := t0.Add(-time.Hour).UnixMilli()
	for i := range benchLogged {
		p := rng.IntN(benchTalkers)
		if i%2 == 0 {
			p = rng.IntN(benchHeavyPeers)
		}
		as = append(as, insight.Arrival{MS: from + int64(i)*time.Hour.Milliseconds()/benchLogged, Peer: peer(p), Group: g, Tag: uint32(p) * 2654435761, InSample: true})
		if len(as) == cap(as) {
			s.Activity().Log().Add(as)
			as = as[:0]
		}
	}
	s.Activity().Log().Add(as)
	tk := s.Activity().Talkers()
	for bucket := range 31 {
		at := t0.Add(time.Duration(bucket-30) * insight.TalkersBucket)
		as = as[:0]
		for range benchPerBucket {
			p := rng.IntN(benchTalkers)
			a := insight.Arrival{MS: at.UnixMilli(), Peer: peer(p), Group: g, Nth: true}
			if p < benchHeavyPeers {
				a.Reason = limiter.ReasonRateLimit
			}
			as = append(as, a)
		}
		tk.Add(at, as)
	}
	var offs []live.Offense
	for i := range benchOffenders {
		at := t0.Add(-time.Duration(i) * time.Second)
		offs = append(offs, live.Offense{Peer: peer(i), Group: limiter.GroupGeneral, Rejections: uint64(i%97 + 1), First: at, Last: at})
	}
	if err := kept.AddOffenses(context.Background(), t0, offs); err != nil {
		b.Fatal(err)
	}
}

func noRedirects(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// percentile returns the p-th percentile (0 < p ≤ 1) of sorted, nearest
// rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// BenchmarkDashboardPages1M requests every dashboard page and polled
// endpoint over real HTTP on loopback, with a session, from a Server
// tracking 1 000 000 (peer, group) entries, and reports each page's
// latency (request written to body read) as p50-ms, p95-ms and max-ms, and
// its size as KB. Each iteration is one request. Run it with a count:
//
//	go test -run XXX -bench DashboardPages1M -benchtime 50x ./web/
//
// sample-peer-history times one sample of the peer history (ns/op), what
// Run does every 10 s. The busy- variants repeat a few pages while the
// peer index is rebuilt and the peer history sampled back to back in the
// background (Run does it every 30 s and 10 s): a request that meets a
// refresh, the worst case.
func BenchmarkDashboardPages1M(b *testing.B) {
	s, base, cookie, _ := benchDashboard(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	measure := func(b *testing.B, path string) {
		lat := make([]time.Duration, 0, b.N)
		var size int64
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("Cookie", cookie)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
			}
			size = n
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.95)), "p95-ms")
		b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
		b.ReportMetric(float64(size)/1024, "KB")
	}
	for _, p := range benchPages {
		b.Run(p.name, func(b *testing.B) { measure(b, p.path) })
	}
	// The what-if of the whole form (no JavaScript): three changes and
	// all together, over the full log.
	b.Run("whatif-form", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		form := "leaky_limit=100&leaky_tick_reduction=100&sliding_window_limit=2"
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("POST", base+"/groups/general/whatif", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer bench-token")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("what-if form: %d %v", resp.StatusCode, err)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(percentile(lat, 0.50))/1e6, "p50-ms")
		b.ReportMetric(float64(percentile(lat, 0.95))/1e6, "p95-ms")
		b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
	})
	// What Run does in the background, for scale: one peer history
	// sample (insight.PeerHistoryMax peers read live, the top lists from the index).
	b.Run("sample-peer-history", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.SamplePeerHistory()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			s.RefreshPeerIndex()
			s.SamplePeerHistory()
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	for _, p := range benchPages {
		if !slices.Contains([]string{"overview", "peers", "peers-cidr-20", "peers-cidr-8", "peer", "peer-history-json", "whatif-field"}, p.name) {
			continue
		}
		b.Run("busy-"+p.name, func(b *testing.B) { measure(b, p.path) })
	}
}
