package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestPeersAPILargeTable: GET /api/v1/peers answers through the index
// above insight.IndexFrom entries, saying it is capped and as of when; a search
// stays exact.
func TestPeersAPILargeTable(t *testing.T) {
	lim, t0 := limitertest.Filled(t, insight.IndexFrom+5000)
	now := func() time.Time { return t0 }
	live, err := live.New(context.Background(), lim, webtest.OpenStore(t), lim.Config(), now)
	if err != nil {
		t.Fatal(err)
	}
	s := webtest.MustNewServer(t, lim, live, web.Options{Token: "t", Now: now})
	s.RefreshPeerIndex()
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
func getPeers(t *testing.T, s *web.Server, query string) map[string]any {
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

// TestPeersAPISinceRebuild: above insight.IndexFrom entries, a peer first
// seen after the index's rebuild is found by an address or /24 search, and
// a wider search says it may miss it ("may_miss_newer_peers", "as_of" the
// rebuild).
func TestPeersAPISinceRebuild(t *testing.T) {
	lim, t0 := limitertest.Filled(t, insight.IndexFrom+5000)
	now := t0
	clock := func() time.Time { return now }
	lv, err := live.New(context.Background(), lim, webtest.OpenStore(t), lim.Config(), clock)
	if err != nil {
		t.Fatal(err)
	}
	s := webtest.MustNewServer(t, lim, lv, web.Options{Token: "t", Now: clock})
	s.RefreshPeerIndex()
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
	s.RefreshPeerIndex()
	if v := get("q=12.0.0.0/16"); v["total"] != 1.0 || v["as_of"] != now.UTC().Format(time.RFC3339) {
		t.Errorf("/16 after the rebuild: %v", v)
	}
}
