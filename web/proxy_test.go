package web

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

func TestPrefersJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                   false,
		"*/*":                                false,
		"text/plain":                         false,
		"application/json":                   true,
		"application/problem+json":           true,
		"text/html, application/json":        true,
		"application/json;q=0.5, text/plain": false,
		"text/plain;q=0.2, application/json": true,
		"application/json;q=0":               false,
		"APPLICATION/JSON":                   true,
	} {
		if got := prefersJSON(accept); got != want {
			t.Errorf("prefersJSON(%q) = %v, want %v", accept, got, want)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	h := http.Header{}
	setRateLimitHeaders(h, "general", &limiter.Quota{BucketLimit: 450, BucketRemaining: 12, BucketWindow: 30000, BucketReset: 6001})
	if got := h.Get("RateLimit-Policy"); got != `"general";q=450;w=30` {
		t.Errorf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"general";r=12;t=7` {
		t.Errorf("ratelimit %q", got)
	}
	h = http.Header{}
	setRateLimitHeaders(h, "chunk", &limiter.Quota{BucketLimit: 6000, BucketRemaining: 6000, BucketWindow: 30000, BucketReset: 1,
		WindowLimit: 100, WindowRemaining: 99, WindowDuration: 1000, WindowReset: 1000})
	if got := h.Get("RateLimit-Policy"); got != `"chunk";q=6000;w=30, "chunk-window";q=100;w=1` {
		t.Errorf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"chunk";r=6000;t=1, "chunk-window";r=99;t=1` {
		t.Errorf("ratelimit %q", got)
	}
}

func TestQueryPeersTopK(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("general")
	// Peer i sends 450+i requests: i rejections.
	for i := 0; i < 30; i++ {
		a := netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", i))
		p := limiter.Peer{Addr: a, Key: limiter.KeyFromAddr(a, 64)}
		for j := 0; j < 450+i; j++ {
			d := lim.Decide(t0, p, g)
			d.Release()
		}
	}
	page, total := QueryPeers(lim, t0, PeerQuery{Sort: "rejections", Limit: 5, Offset: 5})
	if total != 30 || len(page) != 5 {
		t.Fatalf("total %d, page %d", total, len(page))
	}
	for i, v := range page {
		if want := uint64(24 - i); v.RejectedRateLimit != want {
			t.Fatalf("row %d: %d rejections, want %d", i, v.RejectedRateLimit, want)
		}
	}
	q, err := ParsePeerQuery(map[string][]string{"q": {"192.0.2.16/30"}, "sort": {"requests"}})
	if err != nil {
		t.Fatal(err)
	}
	page, total = QueryPeers(lim, t0, q)
	if total != 4 || page[0].Peer.String() != "192.0.2.19" {
		t.Fatalf("%d %+v", total, page)
	}
	if _, err := ParsePeerQuery(map[string][]string{"sort": {"bogus"}}); err == nil {
		t.Fatal("bad sort accepted")
	}
}
