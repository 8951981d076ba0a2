package proxy_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// headerRig is a public listener with Arweave 2.9.7's general group
// (window 3 / 2000 ms, leaky 450 per 30 s) in front of a node that sends
// rate-limit fields of its own, which limiterd's must replace.
func headerRig(t *testing.T, set ratelimit.Set) (*limitertest.Clock, string) {
	t.Helper()
	clock := limitertest.NewClock(time.UnixMilli(1_700_000_000_000))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["ratelimit-limit"] = []string{"1, 1;policy=\"node usage\", 1;policy=\"node concurrency\" "}
		w.Header().Set("RateLimit-Remaining", "0")
		w.Header().Set("X-Node", "yes")
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups297(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64,
		ArweaveVersion: limiter.Arweave297}
	lim, err := limiter.New(memory.New(), clock.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	h := proxy.New(lim, proxy.Options{Upstream: u, Now: clock.Now, RateLimitHeaders: set})
	return clock, serve(t, h)
}

// rawGet sends GET path on a connection of its own and returns the status
// line and the header lines exactly as they came.
func rawGet(t *testing.T, base, path string) (status string, lines []string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		l = strings.TrimSuffix(l, "\r\n")
		if i == 0 {
			status = l
			continue
		}
		if l == "" {
			return status, lines
		}
		lines = append(lines, l)
	}
}

// fieldsOf returns the rate-limit lines among lines, and how many lines
// carry each name (case-insensitively).
func fieldsOf(lines []string) (got map[string]string, count map[string]int) {
	got, count = map[string]string{}, map[string]int{}
	for _, l := range lines {
		name, value, _ := strings.Cut(l, ": ")
		if strings.HasPrefix(strings.ToLower(name), "ratelimit") {
			got[name] = value
			count[strings.ToLower(name)]++
		}
	}
	return got, count
}

// TestRateLimitFieldsOnTheWire: the four Arweave fields go out lower-case,
// byte for byte as a 2.9.7 node writes them (the trailing space of
// ratelimit-limit included), with the worked values of docs/replies.md
// as the node computes them; the IETF pair as limiterd always wrote it;
// each set of server.ratelimit_headers writes its fields only, and the
// node's own fields of a written set are replaced, not repeated.
func TestRateLimitFieldsOnTheWire(t *testing.T) {
	const limit = `453, 453;policy="general usage", 150;policy="general concurrency" `
	type step struct {
		advance                     time.Duration
		remaining, reset, amount    string
		ietfRemaining, windowRemain string
	}
	// The next leaky tick 20 s away from the first request; the 4th is
	// the bucket's: 449 / 1 / 450, as the node computes it (decision 89;
	// docs/replies.md, "The Arweave fields").
	steps := []step{
		{10 * time.Second, "452", "0", "1", `"general";r=450;t=20`, `"general-window";r=2;t=2`},
		{time.Second, "451", "1", "2", `"general";r=450;t=19`, `"general-window";r=1;t=1`},
		{0, "450", "1", "3", `"general";r=450;t=19`, `"general-window";r=0;t=1`},
		{0, "449", "1", "450", `"general";r=449;t=19`, `"general-window";r=0;t=1`},
	}
	for _, set := range []ratelimit.Set{ratelimit.SetBoth, ratelimit.SetArweave, ratelimit.SetIETF, ratelimit.SetNone} {
		t.Run(set.String(), func(t *testing.T) {
			clock, base := headerRig(t, set)
			for i, s := range steps {
				clock.Add(s.advance)
				status, lines := rawGet(t, base, "/info")
				if status != "HTTP/1.1 200 OK" {
					t.Fatalf("request %d: %s", i+1, status)
				}
				got, count := fieldsOf(lines)
				for name, n := range count {
					if n != 1 {
						t.Errorf("request %d: %d lines of %s: %q", i+1, n, name, lines)
					}
				}
				want := map[string]string{}
				if set.Arweave() {
					want["ratelimit-limit"] = limit
					want["ratelimit-remaining"] = s.remaining
					want["ratelimit-reset"] = s.reset
					want["ratelimit-reset-amount"] = s.amount
				} else {
					// The node's own, passed on (its trailing space is
					// optional whitespace, which no parser keeps).
					want["Ratelimit-Limit"] = `1, 1;policy="node usage", 1;policy="node concurrency"`
					want["Ratelimit-Remaining"] = "0"
				}
				if set.IETF() {
					want["Ratelimit-Policy"] = `"general";q=450;w=30, "general-window";q=3;w=2`
					want["Ratelimit"] = s.ietfRemaining + ", " + s.windowRemain
				}
				for name, v := range want {
					if got[name] != v {
						t.Errorf("request %d: %s = %q, want %q (all: %q)", i+1, name, got[name], v, lines)
					}
				}
				if len(got) != len(want) {
					t.Errorf("request %d: fields %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

// TestRateLimitFieldsOfTheChecks: /api/v1/check answers the fields the
// set asks for as header fields and in its JSON (headers, by name, for a
// proxy to copy), and /api/v1/check/auth as header fields, the same values
// as the public listener's.
func TestRateLimitFieldsOfTheChecks(t *testing.T) {
	for _, set := range []ratelimit.Set{ratelimit.SetBoth, ratelimit.SetArweave, ratelimit.SetIETF, ratelimit.SetNone} {
		t.Run(set.String(), func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(1_700_000_000_000))
			cfg := limiter.Config{Groups: limiter.ArweaveGroups297(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64,
				ArweaveVersion: limiter.Arweave297}
			lim, err := limiter.New(memory.New(), clock.Now(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := proxy.New(lim, proxy.Options{Now: clock.Now})
			h.SetRateLimitHeaders(set) // as a reload does
			clock.Add(10 * time.Second)

			w := httptest.NewRecorder()
			h.HandleCheck(w, httptest.NewRequest(http.MethodPost, "/api/v1/check",
				strings.NewReader(`{"peer":"192.0.2.1","path":"/info"}`)))
			var resp struct {
				Status    int               `json:"status"`
				RateLimit string            `json:"ratelimit"`
				Headers   map[string]string `json:"headers"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Status != 200 {
				t.Fatalf("check: %d %s (%v)", w.Code, w.Body, err)
			}
			wantRemaining, wantIETF := "", ""
			if set.Arweave() {
				wantRemaining = "452"
			}
			if set.IETF() {
				wantIETF = `"general";r=450;t=20, "general-window";r=2;t=2`
			}
			if resp.Headers["Ratelimit-Remaining"] != wantRemaining || w.Header().Get("Ratelimit-Remaining") != wantRemaining {
				t.Errorf("check: ratelimit-remaining %q in JSON, %q as a field; want %q", resp.Headers["Ratelimit-Remaining"], w.Header().Get("Ratelimit-Remaining"), wantRemaining)
			}
			if set.Arweave() && resp.Headers["Ratelimit-Limit"] != `453, 453;policy="general usage", 150;policy="general concurrency" ` {
				t.Errorf("check: ratelimit-limit %q", resp.Headers["Ratelimit-Limit"])
			}
			if resp.RateLimit != wantIETF || resp.Headers["Ratelimit"] != wantIETF || w.Header().Get("Ratelimit") != wantIETF {
				t.Errorf("check: RateLimit %q in JSON, %q in headers, %q as a field; want %q", resp.RateLimit, resp.Headers["Ratelimit"], w.Header().Get("Ratelimit"), wantIETF)
			}

			clock.Add(time.Second)
			r := httptest.NewRequest(http.MethodGet, "/api/v1/check/auth", nil)
			r.Header.Set("X-Original-Method", "GET")
			r.Header.Set("X-Original-URI", "/info")
			r.Header.Set("X-Real-IP", "192.0.2.1")
			w = httptest.NewRecorder()
			h.HandleAuthRequest(w, r)
			if set.Arweave() {
				wantRemaining = "451"
			}
			if w.Code != http.StatusNoContent || w.Header().Get("Ratelimit-Remaining") != wantRemaining ||
				(set.Arweave() && w.Header().Get("Ratelimit-Reset-Amount") != "2") {
				t.Errorf("check/auth: %d %v; want ratelimit-remaining %q", w.Code, w.Header(), wantRemaining)
			}
		})
	}
}
