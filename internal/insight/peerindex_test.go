package insight_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
)

func TestPeerIndexLargeTable(t *testing.T) {
	lim, t0 := limitertest.Filled(t, insight.IndexFrom+5000)
	x := insight.NewPeerIndex(lim, func() time.Time { return t0 })
	// Top by requests: 7 requests is the most any peer sent.
	page := x.Query(insight.PeerQuery{Sort: "requests", Limit: 50})
	if len(page.Rows) != 50 || page.Rows[0].Requests != 7 || !page.Capped {
		t.Fatalf("%d rows, first %+v, capped %v", len(page.Rows), page.Rows[0], page.Capped)
	}
	// A CIDR search reads exactly its peers, live.
	page = x.Query(insight.PeerQuery{Sort: "requests", Limit: 1000, Prefix: netip.MustParsePrefix("11.0.1.0/24")})
	if page.Total != 256 || len(page.Rows) != 256 || page.Capped {
		t.Fatalf("/24: total %d rows %d capped %v", page.Total, len(page.Rows), page.Capped)
	}
	for _, v := range page.Rows {
		if p, _ := v.Peer.Prefix(); !netip.MustParsePrefix("11.0.1.0/24").Contains(p.Addr()) {
			t.Fatalf("%s outside the search", v.Peer)
		}
	}
	// One address.
	page = x.Query(insight.PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("11.0.0.9/32")})
	if page.Total != 1 || page.Rows[0].Requests != 1+9%7 {
		t.Fatalf("%+v", page)
	}
	// IPv6 peers are keyed by /64: a /128 search finds its /64's entry, a
	// /48 search both /64s inside it.
	page = x.Query(insight.PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("2001:db8:1::2/128")})
	if page.Total != 1 || page.Rows[0].Requests != 2 || page.Rows[0].Peer.String() != "2001:db8:1::/64" {
		t.Fatalf("%+v", page)
	}
	page = x.Query(insight.PeerQuery{Sort: "requests", Limit: 10, Prefix: netip.MustParsePrefix("2001:db8::/32")})
	if page.Total != 2 {
		t.Fatalf("/32: %+v", page)
	}
}

func TestPeerIndexSmallTableIsLive(t *testing.T) {
	lim, t0 := limitertest.Filled(t, 100)
	x := insight.NewPeerIndex(lim, func() time.Time { return t0 })
	page := x.Query(insight.PeerQuery{Sort: "requests", Limit: 10})
	if page.Total != 102 || page.Capped || !page.AsOf.Equal(t0) {
		t.Fatalf("%+v", page)
	}
}

// BenchmarkDashboardQueries1M: the peer queries of the dashboard at
// 1 000 000 tracked entries, through the index (refreshed once before the
// timer: the refresh runs every 10 s off the request path's hot loop).
func BenchmarkDashboardQueries1M(b *testing.B) {
	lim, t0 := limitertest.Filled(b, 1_000_000)
	now := t0
	x := insight.NewPeerIndex(lim, func() time.Time { return now })
	b.Run("refresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			x.Refresh()
		}
	})
	for _, q := range []struct {
		name string
		q    insight.PeerQuery
	}{
		{"top-rejections", insight.PeerQuery{Sort: "rejections", Limit: 10}},
		{"sort-requests-page-5", insight.PeerQuery{Sort: "requests", Limit: 50, Offset: 200}},
		{"search-/20", insight.PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.0/20")}},
		{"search-/8", insight.PeerQuery{Sort: "requests", Limit: 50, Prefix: netip.MustParsePrefix("11.0.0.0/8")}},
		{"search-ip", insight.PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.7/32")}},
		{"search-/24", insight.PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.0/24")}},
		{"search-/23", insight.PeerQuery{Sort: "tokens", Limit: 50, Prefix: netip.MustParsePrefix("11.3.16.0/23")}},
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
