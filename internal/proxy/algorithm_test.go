package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
)

// algoRig is a rig whose general group runs a GCRA of 2 per 10 s, burst 2.
func algoRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, 450, nil)
	cfg := r.lim.Config()
	g := cfg.Groups["general"]
	g.Algorithm, g.Limit, g.Period = algo.GCRA, 2, 10_000
	cfg.Groups["general"] = g
	if _, err := r.lim.Apply(r.clock.Now(), cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

// The RateLimit fields of another algorithm than the hybrid: one policy,
// q = limit, w = period (s), r = what is left, t = until the next
// admission possible (docs/replies.md, "Other algorithms"); Retry-After from
// the algorithm.
func TestAlgorithmHeaders(t *testing.T) {
	r := algoRig(t)
	for i, want := range []string{`"general";r=1;t=0`, `"general";r=0;t=5`} {
		w := r.do("GET", "/info")
		if w.Code != http.StatusOK || w.Header().Get("Ratelimit") != want || w.Header().Get("Ratelimit-Policy") != `"general";q=2;w=10` {
			t.Fatalf("request %d: %d RateLimit %q Policy %q", i+1, w.Code, w.Header().Get("Ratelimit"), w.Header().Get("Ratelimit-Policy"))
		}
	}
	r.clock.Add(1500 * time.Millisecond)
	w := r.do("GET", "/info")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "4" || w.Header().Get("Ratelimit") != `"general";r=0;t=4` {
		t.Fatalf("3rd: %d Retry-After %q RateLimit %q", w.Code, w.Header().Get("Retry-After"), w.Header().Get("Ratelimit"))
	}
	r.clock.Add(3500 * time.Millisecond)
	if w := r.do("GET", "/info"); w.Code != http.StatusOK {
		t.Fatalf("one emission interval later: %d", w.Code)
	}
	if n := r.inflight(); n != 0 {
		t.Errorf("%d in flight", n)
	}
}

// /api/v1/check holds an admission of another algorithm under a lease too,
// released by /api/v1/release: concurrency is still checked first.
func TestAlgorithmCheckLease(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:1")
	clock := limitertest.NewClock(time.UnixMilli(1_700_000_000_000))
	groups := limiter.ArweaveGroups()
	g := groups["general"]
	g.Algorithm, g.Limit, g.Period, g.ConcurrencyLimit = algo.FixedWindow, 10, 60_000, 1
	groups["general"] = g
	lim, err := limiter.New(memory.New(), clock.Now(), limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.New(lim, proxy.Options{Upstream: up, Now: clock.Now, CheckLease: time.Minute})
	check := func() map[string]any {
		w := httptest.NewRecorder()
		h.HandleCheck(w, httptest.NewRequest("POST", "/api/v1/check", strings.NewReader(`{"peer":"192.0.2.1","path":"/info"}`)))
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%d %q: %v", w.Code, w.Body, err)
		}
		return out
	}
	first := check()
	if first["allowed"] != true || first["via"] != "algorithm" || first["id"] == nil {
		t.Fatalf("first check %v", first)
	}
	if second := check(); second["allowed"] != false || second["reason"] != "concurrency" {
		t.Fatalf("second check (one in flight, limit 1) %v", second)
	}
	w := httptest.NewRecorder()
	h.HandleRelease(w, httptest.NewRequest("POST", "/api/v1/release", strings.NewReader(`{"id":"`+first["id"].(string)+`"}`)))
	if w.Code != http.StatusOK {
		t.Fatalf("release %d %q", w.Code, w.Body)
	}
	if third := check(); third["allowed"] != true {
		t.Fatalf("after the release %v", third)
	}
}
