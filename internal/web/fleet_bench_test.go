package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
)

// fullSummary is instance id's summary at its bound: every group of
// groups busy, 20 offenders with IPv6 keys (the longest peers), health
// with errors of a few hundred bytes.
func fullSummary(id string, at time.Time, groups []string) fleet.Summary {
	s := fleet.Summary{Schema: fleet.Schema, Instance: id, Version: "v1.2.0-rc.1+0123456789ab", Config: "5f0c1e9a2b7d",
		At: at.UnixMilli(), Started: at.Add(-72 * time.Hour).UnixMilli(), Window: 27,
		Node: fleet.Node{Up: true, Requests: 5321.5, Errors5xx: 12.25, P50: 3.1, P99: 480.5,
			LastError: "dial tcp 10.1.2.3:1984: connect: connection refused (after 3 attempts, the node restarting)", LastErrorAt: at.UnixMilli()},
		Daemon: fleet.Daemon{ReloadAt: at.UnixMilli(), ReloadError: "config: http_api.limiter.general.leaky_limit: must be an integer ≥ 0, got -1",
			SnapshotAt: at.UnixMilli(), SnapshotEvery: 5000, DBBytes: 1 << 30, Backend: "redis", BackendUp: true, BackendSince: at.UnixMilli()}}
	for i, g := range groups {
		s.Groups = append(s.Groups, fleet.Group{Name: g, Requests: 1234.5 * float64(i+1), Rejected: 321.25, Denied: 1.5, Inflight: 42})
	}
	for i := range fleet.MaxTop {
		s.Top = append(s.Top, fleet.Offender{Peer: fmt.Sprintf("2001:db8:%x:%x::/64", i*7919, i), Group: groups[i%len(groups)], Requests: 3093.25 - float64(i), Rejected: 3000.5 - float64(i)})
	}
	return s
}

// BenchmarkOverviewFleet renders the overview (GET /, and its poll GET
// /stats) and GET /api/v1/overview of an instance in cluster mode with 8
// instances' summaries in a real Redis (its own and 7 others at their
// bound, republished every 2 s as the daemons do) and 100 000 tracked
// peers, over HTTP on loopback; it reports p50-ms, p95-ms, max-ms and KB.
// The "cached" variants read Redis as the daemon does, at most once per
// 2 s of real time whoever asks; the "cold" ones read it for every page.
// summary-bytes is the size of each of the summaries, this instance's as
// it publishes it.
//
//	go test -run XXX -bench OverviewFleet -benchtime 200x ./internal/web/
func BenchmarkOverviewFleet(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { rdb.Close() })
	board := fleet.NewRedisBoard(rdb)

	lim, t0 := limitertest.Filled(b, 100_000)
	now := func() time.Time { return t0 }
	db := webtest.OpenStore(b)
	lv, err := live.New(context.Background(), lim, db, lim.Config(), now)
	if err != nil {
		b.Fatal(err)
	}
	s := webtest.MustNewServer(b, lim, lv, web.Options{Token: "bench-token", Now: now, Offenses: db, Fleet: board, Instance: "gw-0"})
	fillActivity(b, s, lim, db, t0)
	stats := lim.Stats()
	for i := range insight.HistorySeconds {
		for g, st := range stats {
			st.Requests += uint64(i * 7)
			st.RejectedRateLimit += uint64(i * 2)
			stats[g] = st
		}
		s.History().Sample(t0.Add(time.Duration(i-insight.HistorySeconds+1)*time.Second), stats)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	publish := func() {
		if err := s.PublishSummary(ctx); err != nil {
			b.Error(err)
		}
		for i := 1; i < 8; i++ {
			id := fmt.Sprintf("gw-%d", i)
			sum := fullSummary(id, time.Now(), lim.Groups())
			enc, err := fleet.Encode(sum)
			if err != nil {
				b.Error(err)
			}
			if _, err := board.Put(ctx, id, enc); err != nil {
				b.Error(err)
			}
		}
	}
	publish()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(fleet.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				publish()
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	enc, _ := fleet.Encode(fullSummary("gw-1", time.Now(), lim.Groups()))
	var many []string
	for i := range fleet.MaxGroups {
		many = append(many, fmt.Sprintf("group_with_a_long_name_%02d", i))
	}
	most, _ := fleet.Encode(fullSummary("gw-1", time.Now(), many))
	b.Logf("summaries: %d bytes with the %d Arweave groups and 20 offenders, %d with %d groups; this instance's: %d bytes", len(enc), len(lim.Groups()), len(most), fleet.MaxGroups, s.FleetSummaryBytes())

	hs := httptest.NewServer(s.AdminHandler())
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(hs.URL+"/login", url.Values{"token": {"bench-token"}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, ck := range resp.Cookies() {
		if ck.Name == "limiterd_session" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	measure := func(b *testing.B, path string) {
		lat := make([]time.Duration, 0, b.N)
		var size int64
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("GET", hs.URL+path, nil)
			req.Header.Set("Cookie", cookie)
			req.Header.Set("Authorization", "Bearer bench-token")
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
	pages := []struct{ name, path string }{{"overview", "/"}, {"stats", "/stats"}, {"api", "/api/v1/overview"}}
	for _, clock := range []struct {
		name string
		now  func() time.Time
	}{
		{"cached", time.Now},
		{"cold", func() func() time.Time {
			var mu sync.Mutex
			t := time.Now()
			return func() time.Time { mu.Lock(); defer mu.Unlock(); t = t.Add(fleet.Every); return t }
		}()},
	} {
		s.SetFleetClock(clock.now)
		for _, p := range pages {
			b.Run(clock.name+"-"+p.name, func(b *testing.B) {
				if p.path == "/" {
					// The view holds all 8.
					if v := s.FleetView(context.Background(), true); len(v.Instances) != 8 || len(v.Skipped) != 0 {
						b.Fatalf("%d instances, skipped %v, error %q", len(v.Instances), v.Skipped, v.Error)
					}
				}
				measure(b, p.path)
			})
		}
	}
	b.Run("publish-summary", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := s.PublishSummary(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.FleetSummaryBytes()), "summary-bytes")
	})
}
