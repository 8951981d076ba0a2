package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// bigLimiter tracks n IPv4 peers in general (peer i sent 1+i%7 requests)
// plus a few IPv6 peers, enough to go through the index.
func bigLimiter(t testing.TB, n int) (*limiter.Limiter, time.Time) {
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	for i := 0; i < n; i++ {
		a := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
		p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
		for j := 0; j <= i%7; j++ {
			d := lim.Decide(t0, p, g)
			d.Release()
		}
	}
	for _, s := range []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:2::1"} {
		a := netip.MustParseAddr(s)
		d := lim.Decide(t0, peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		d.Release()
	}
	return lim, t0
}

// TestPeersAPILargeTable: GET /api/v1/peers answers through the index
// above insight.IndexFrom entries, saying it is capped and as of when; a search
// stays exact.
func TestPeersAPILargeTable(t *testing.T) {
	lim, t0 := bigLimiter(t, insight.IndexFrom+5000)
	now := func() time.Time { return t0 }
	live, err := live.New(context.Background(), lim, OpenTestStore(t), lim.Config(), now)
	if err != nil {
		t.Fatal(err)
	}
	s := MustNewServer(t, lim, live, Options{Token: "t", Now: now})
	s.peers.Refresh()
	get := func(query string) map[string]any { t.Helper(); return getPeers(t, s, query) }
	v := get("sort=requests&limit=20")
	if peers := v["peers"].([]any); len(peers) != 20 || peers[0].(map[string]any)["requests"] != 7.0 {
		t.Fatalf("%d peers, first %v", len(peers), peers[0])
	}
	if v["capped"] != true || v["as_of"] != t0.UTC().Format(time.RFC3339) || v["total"] != float64(insight.IndexTop) || v["next_cursor"] == nil {
		t.Fatalf("capped %v as_of %v total %v next %v", v["capped"], v["as_of"], v["total"], v["next_cursor"])
	}
	v = get("q=11.0.1.0/24&limit=1000")
	if v["total"] != 256.0 || len(v["peers"].([]any)) != 256 || v["capped"] != nil {
		t.Fatalf("/24: total %v, %d peers, capped %v", v["total"], len(v["peers"].([]any)), v["capped"])
	}
}

// getPeers calls GET /api/v1/peers?query on s with the token "t" and
// returns its decoded body; any status but 200 fails the test.
func getPeers(t *testing.T, s *Server, query string) map[string]any {
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
