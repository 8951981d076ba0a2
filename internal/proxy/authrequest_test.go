package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// newAuthServer returns a Handler on a fake clock whose general group
// admits 3 requests per 30 s with at most 1 in flight, with
// /healthcheck/** exempt and POST /special in block_index.
func newAuthServer(t *testing.T) *Handler {
	t.Helper()
	t0 := time.UnixMilli(1_700_000_000_000)
	groups := limiter.ArweaveGroups()
	g := groups["general"]
	g.LeakyLimit, g.LeakyTickReduction, g.ConcurrencyLimit = 3, 3, 1
	groups["general"] = g
	cfg := limiter.Config{
		Groups: groups,
		Routes: append([]limiter.RouteRule{{Group: "block_index", Paths: []string{"/special"}, Methods: []string{"POST"}}},
			limiter.ArweaveRoutes()...),
		ExemptPaths: []string{"/healthcheck/**"},
		IPv6Prefix:  64,
	}
	lim, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return t0 }
	return New(lim, Options{Now: now})
}

// authRequest runs one auth subrequest as nginx sends it; an empty value
// leaves that header out.
func authRequest(s *Handler, method, uri, ip string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/check/auth", nil)
	for k, v := range map[string]string{hdrOriginalMethod: method, hdrOriginalURI: uri, hdrRealIP: ip} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	s.handleAuthRequest(w, r)
	return w
}

func TestAuthRequestAdmitsThenLimits(t *testing.T) {
	s := newAuthServer(t)
	// concurrency_limit is 1: three admissions in a row pass only because
	// each releases its in-flight slot at once.
	for i, want := range []string{`"general";r=2;t=30`, `"general";r=1;t=30`, `"general";r=0;t=30`} {
		w := authRequest(s, "GET", "/info?x=1", "192.0.2.1")
		if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
			t.Fatalf("request %d: %d %q, want 204 and no body", i, w.Code, w.Body)
		}
		if got := w.Header().Get("RateLimit"); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i, got, want)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"general";q=3;w=30` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		if got := w.Header().Get(hdrLimiterdStatus); got != "" {
			t.Errorf("request %d: %s %q on an admission", i, hdrLimiterdStatus, got)
		}
	}
	w := authRequest(s, "GET", "/info", "192.0.2.1")
	if w.Code != http.StatusForbidden || w.Header().Get(hdrLimiterdStatus) != "429" {
		t.Fatalf("over the limit: %d %v, want 403 with %s: 429", w.Code, w.Header(), hdrLimiterdStatus)
	}
	if got := w.Header().Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After %q, want 30 (the next leaky tick)", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"general";r=0;t=30` {
		t.Errorf("RateLimit %q on the rejection", got)
	}
	// Another peer, IPv6, has its own allowance.
	if w := authRequest(s, "GET", "/info", "2001:db8::1"); w.Code != http.StatusNoContent {
		t.Fatalf("another peer: %d", w.Code)
	}
	g, _ := s.lim.GroupID("general")
	if _, n, _ := s.Lat.Group(g).Snapshot(); n != 5 {
		t.Errorf("%d general decisions timed, want 5", n)
	}
}

func TestAuthRequestDeniedPeer(t *testing.T) {
	s := newAuthServer(t)
	cfg := s.lim.Config()
	cfg.Deny = append(cfg.Deny, netip.MustParsePrefix("192.0.2.66/32"))
	if _, err := s.lim.Apply(s.now(), cfg); err != nil {
		t.Fatal(err)
	}
	w := authRequest(s, "GET", "/info", "192.0.2.66")
	if w.Code != http.StatusForbidden || w.Header().Get(hdrLimiterdStatus) != "403" {
		t.Fatalf("denied: %d %v, want 403 with %s: 403", w.Code, w.Header(), hdrLimiterdStatus)
	}
	if got := w.Header().Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q on a denial", got)
	}
	// On every request (docs/limiting.md, "The deny list"): an exempt path too.
	w = authRequest(s, "GET", "/healthcheck/db", "192.0.2.66")
	if w.Code != http.StatusForbidden || w.Header().Get(hdrLimiterdStatus) != "403" {
		t.Fatalf("denied on an exempt path: %d %v, want 403 with %s: 403", w.Code, w.Header(), hdrLimiterdStatus)
	}
	if n := s.Counts.ExemptPath.Load(); n != 0 {
		t.Errorf("ExemptPath = %d after a denial, want 0", n)
	}
	if st := s.lim.Stats()["general"]; st.Denied != 2 || st.Requests != 2 {
		t.Errorf("general: %d denied of %d requests, want 2 of 2", st.Denied, st.Requests)
	}
}

func TestAuthRequestClassifies(t *testing.T) {
	s := newAuthServer(t)
	for i, c := range []struct{ method, uri, policy string }{
		{"GET", "/chunk/abc?offset=1", `"chunk";q=6000;w=30, "chunk-window";q=100;w=1`},
		// Percent-decoded as net/http decodes URL.Path for the proxy.
		{"GET", "/%63hunk/abc", `"chunk";q=6000;w=30, "chunk-window";q=100;w=1`},
		{"GET", "/block_index?x=/chunk/1", `"block_index";q=1;w=30`},
		// The method counts.
		{"POST", "/special", `"block_index";q=1;w=30`},
		{"GET", "/special", `"general";q=3;w=30`},
	} {
		// block_index allows 1 request per peer: one peer per case.
		w := authRequest(s, c.method, c.uri, fmt.Sprintf("192.0.2.%d", 10+i))
		if w.Code != http.StatusNoContent {
			t.Fatalf("%s %s: %d", c.method, c.uri, w.Code)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != c.policy {
			t.Errorf("%s %s: RateLimit-Policy %q, want %q", c.method, c.uri, got, c.policy)
		}
	}
	// An exempt path (the query stripped first) is admitted unlimited,
	// untracked, counted.
	for range 10 {
		w := authRequest(s, "GET", "/healthcheck/db?verbose=1", "192.0.2.8")
		if w.Code != http.StatusNoContent || w.Header().Get("RateLimit") != "" {
			t.Fatalf("exempt path: %d %v", w.Code, w.Header())
		}
	}
	if n := s.Counts.ExemptPath.Load(); n != 10 {
		t.Errorf("ExemptPath = %d, want 10", n)
	}
	if w := authRequest(s, "GET", "/info", "192.0.2.8"); w.Header().Get("RateLimit") != `"general";r=2;t=30` {
		t.Errorf("after exempt requests: RateLimit %q, want r=2", w.Header().Get("RateLimit"))
	}
}

func TestAuthRequestBadHeaders(t *testing.T) {
	s := newAuthServer(t)
	for _, c := range []struct{ method, uri, ip, field string }{
		{"", "/info", "192.0.2.1", hdrOriginalMethod},
		{"GE T", "/info", "192.0.2.1", hdrOriginalMethod},
		{"GET", "", "192.0.2.1", hdrOriginalURI},
		{"GET", "info", "192.0.2.1", hdrOriginalURI},
		{"GET", "http://example.com/info", "192.0.2.1", hdrOriginalURI},
		{"GET", "/in%zzfo", "192.0.2.1", hdrOriginalURI},
		{"GET", "/info", "", hdrRealIP},
		{"GET", "/info", "not an ip", hdrRealIP},
		{"GET", "/info", "unix:", hdrRealIP},
	} {
		w := authRequest(s, c.method, c.uri, c.ip)
		var body jsonbody.Error
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%+v: body %q: %v", c, w.Body, err)
		}
		if w.Code != http.StatusBadRequest || body.Field != c.field {
			t.Errorf("%+v: %d %+v, want 400 naming %s", c, w.Code, body, c.field)
		}
	}
	// None of them was decided: the peer still has its whole allowance.
	if w := authRequest(s, "GET", "/info", "192.0.2.1"); w.Header().Get("RateLimit") != `"general";r=2;t=30` {
		t.Errorf("RateLimit %q, want r=2", w.Header().Get("RateLimit"))
	}
}
