package web

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestPeersAPISinceRebuild: above insight.IndexFrom entries, a peer first
// seen after the index's rebuild is found by an address or /24 search, and
// a wider search says it may miss it ("may_miss_newer_peers", "as_of" the
// rebuild).
func TestPeersAPISinceRebuild(t *testing.T) {
	lim, t0 := bigLimiter(t, insight.IndexFrom+5000)
	now := t0
	clock := func() time.Time { return now }
	lv, err := live.New(context.Background(), lim, OpenTestStore(t), lim.Config(), clock)
	if err != nil {
		t.Fatal(err)
	}
	s := MustNewServer(t, lim, lv, Options{Token: "t", Now: clock})
	s.peers.Refresh()
	now = t0.Add(20 * time.Second)
	g, _ := lim.GroupID("general")
	a := netip.MustParseAddr("12.0.0.5")
	d := lim.Decide(now, peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
	d.Release()
	get := func(query string) map[string]any { t.Helper(); return getPeers(t, s, query) }
	for _, q := range []string{"q=12.0.0.5", "q=12.0.0.0/24", "q=12.0.0.5&group=general"} {
		v := get(q)
		if v["total"] != 1.0 || v["may_miss_newer_peers"] != nil || v["as_of"] != nil {
			t.Errorf("%s: %v", q, v)
		}
	}
	v := get("q=12.0.0.0/16")
	if v["total"] != 0.0 || v["may_miss_newer_peers"] != true || v["as_of"] != t0.UTC().Format(time.RFC3339) ||
		!strings.Contains(v["note"].(string), "peers first seen since may be missing") {
		t.Errorf("/16: %v", v)
	}
	if v := get("sort=requests&limit=5"); v["may_miss_newer_peers"] != true || v["as_of"] != t0.UTC().Format(time.RFC3339) {
		t.Errorf("top list: %v", v)
	}
	s.peers.Refresh()
	if v := get("q=12.0.0.0/16"); v["total"] != 1.0 || v["as_of"] != now.UTC().Format(time.RFC3339) {
		t.Errorf("/16 after the rebuild: %v", v)
	}
}
