package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/live"
)

// bigLimiter tracks n IPv4 peers in general (peer i sent 1+i%7 requests)
// plus a few IPv6 peers, enough to go through the index.
func bigLimiter(t testing.TB, n int) (*limiter.Limiter, time.Time) {
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	for i := 0; i < n; i++ {
		a := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
		p := limiter.Peer{Addr: a, Key: limiter.KeyFromAddr(a, 64)}
		for j := 0; j <= i%7; j++ {
			d := lim.Decide(t0, p, g)
			d.Release()
		}
	}
	for _, s := range []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:2::1"} {
		a := netip.MustParseAddr(s)
		d := lim.Decide(t0, limiter.Peer{Addr: a, Key: limiter.KeyFromAddr(a, 64)}, g)
		d.Release()
	}
	return lim, t0
}

func TestPeerIndexLargeTable(t *testing.T) {
	lim, t0 := bigLimiter(t, indexFrom+5000)
	x := NewPeerIndex(lim, func() time.Time { return t0 })
	// Top by requests: 7 requests is the most any peer sent.
	page := x.Query(PeerQuery{Sort: "requests", Limit: 50})
	if len(page.Rows) != 50 || page.Rows[0].Requests != 7 || !page.Capped {
		t.Fatalf("%d rows, first %+v, capped %v", len(page.Rows), page.Rows[0], page.Capped)
	}
	// A CIDR search reads exactly its peers, live.
	page = x.Query(PeerQuery{Sort: "requests", Limit: 1000, Prefix: netip.MustParsePrefix("11.0.1.0/24")})
	if page.Total != 256 || len(page.Rows) != 256 || page.Capped {
		t.Fatalf("/24: total %d rows %d capped %v", page.Total, len(page.Rows), page.Capped)
	}
	for _, v := range page.Rows {
		if p, _ := v.Peer.Prefix(); !netip.MustParsePrefix("11.0.1.0/24").Contains(p.Addr()) {
			t.Fatalf("%s outside the search", v.Peer)
		}
	}
	// One address.
	page = x.Query(PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("11.0.0.9/32")})
	if page.Total != 1 || page.Rows[0].Requests != 1+9%7 {
		t.Fatalf("%+v", page)
	}
	// IPv6 peers are keyed by /64: a /128 search finds its /64's entry, a
	// /48 search both /64s inside it.
	page = x.Query(PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("2001:db8:1::2/128")})
	if page.Total != 1 || page.Rows[0].Requests != 2 || page.Rows[0].Peer.String() != "2001:db8:1::/64" {
		t.Fatalf("%+v", page)
	}
	page = x.Query(PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("2001:db8::/32")})
	if page.Total != 2 {
		t.Fatalf("/32: %+v", page)
	}
}

func TestPeerIndexSmallTableIsLive(t *testing.T) {
	lim, t0 := bigLimiter(t, 100)
	x := NewPeerIndex(lim, func() time.Time { return t0 })
	page := x.Query(PeerQuery{Sort: "requests", Limit: 10})
	if page.Total != 102 || page.Capped || !page.AsOf.Equal(t0) {
		t.Fatalf("%+v", page)
	}
}

// BenchmarkDashboardQueries1M: the peer queries of the dashboard at
// 1 000 000 tracked entries, through the index (refreshed once before the
// timer: the refresh runs every 10 s off the request path's hot loop).
func BenchmarkDashboardQueries1M(b *testing.B) {
	lim, t0 := bigLimiter(b, 1_000_000)
	now := t0
	x := NewPeerIndex(lim, func() time.Time { return now })
	b.Run("refresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			x.Refresh()
		}
	})
	for _, q := range []struct {
		name string
		q    PeerQuery
	}{
		{"top-rejections", PeerQuery{Sort: "rejections", Limit: 10}},
		{"sort-requests-page-5", PeerQuery{Sort: "requests", Limit: 50, Offset: 200}},
		{"search-/20", PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.0/20")}},
		{"search-/8", PeerQuery{Sort: "requests", Limit: 50, Prefix: netip.MustParsePrefix("11.0.0.0/8")}},
		{"search-ip", PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.7/32")}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if p := x.Query(q.q); len(p.Rows) == 0 {
					b.Fatal(fmt.Sprint("no rows: ", p.Total))
				}
			}
		})
	}
}

// TestPeersAPILargeTable: GET /api/v1/peers answers through the index
// above indexFrom entries, saying it is capped and as of when; a search
// stays exact.
func TestPeersAPILargeTable(t *testing.T) {
	lim, t0 := bigLimiter(t, indexFrom+5000)
	now := func() time.Time { return t0 }
	live, err := live.New(context.Background(), lim, OpenTestStore(t), lim.Config(), now)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(lim, live, Options{Token: "t", Now: now})
	s.peers.Refresh()
	get := func(query string) map[string]any {
		t.Helper()
		req := httptest.NewRequest("GET", "/api/v1/peers?"+query, nil)
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		s.AdminHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		var v map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := get("sort=requests&limit=20")
	if peers := v["peers"].([]any); len(peers) != 20 || peers[0].(map[string]any)["requests"] != 7.0 {
		t.Fatalf("%d peers, first %v", len(peers), peers[0])
	}
	if v["capped"] != true || v["as_of"] != t0.UTC().Format(time.RFC3339) || v["total"] != float64(indexTop) || v["next_cursor"] == nil {
		t.Fatalf("capped %v as_of %v total %v next %v", v["capped"], v["as_of"], v["total"], v["next_cursor"])
	}
	v = get("q=11.0.1.0/24&limit=1000")
	if v["total"] != 256.0 || len(v["peers"].([]any)) != 256 || v["capped"] != nil {
		t.Fatalf("/24: total %v, %d peers, capped %v", v["total"], len(v["peers"].([]any)), v["capped"])
	}
}
