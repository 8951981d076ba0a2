package insight_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

func TestQueryPeersTopK(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	// Peer i sends 450+i requests: i rejections.
	for i := 0; i < 30; i++ {
		a := netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", i))
		p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
		for j := 0; j < 450+i; j++ {
			d := lim.Decide(t0, p, g)
			d.Release()
		}
	}
	page, total := insight.QueryPeers(lim, t0, insight.PeerQuery{Sort: "rejections", Limit: 5, Offset: 5})
	if total != 30 || len(page) != 5 {
		t.Fatalf("total %d, page %d", total, len(page))
	}
	for i, v := range page {
		if want := uint64(24 - i); v.RejectedRateLimit != want {
			t.Fatalf("row %d: %d rejections, want %d", i, v.RejectedRateLimit, want)
		}
	}
	q, err := insight.ParsePeerQuery(map[string][]string{"q": {"192.0.2.16/30"}, "sort": {"requests"}})
	if err != nil {
		t.Fatal(err)
	}
	page, total = insight.QueryPeers(lim, t0, q)
	if total != 4 || page[0].Peer.String() != "192.0.2.19" {
		t.Fatalf("%d %+v", total, page)
	}
	if _, err := insight.ParsePeerQuery(map[string][]string{"sort": {"bogus"}}); err == nil {
		t.Fatal("bad sort accepted")
	}
}
