package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
)

// adaptiveGeneral turns the general group's adaptive concurrency on with
// a.
func adaptiveGeneral(a limitertest.Adaptive) func(*limiter.Config) {
	return func(c *limiter.Config) {
		g := c.Groups[limiter.GroupGeneral]
		g.Adaptive = a.Settings()
		c.Groups[limiter.GroupGeneral] = g
	}
}

// startAt makes the general group's adaptive limit limit, the node's
// unloaded latency 1 ms, as a restart would (no measurement pending).
func startAt(t *testing.T, lim *limiter.Limiter, limit int64) limiter.GroupID {
	t.Helper()
	snap := lim.Snapshot(time.Now())
	for i := range snap.Groups {
		if snap.Groups[i].Name == limiter.GroupGeneral {
			snap.Groups[i].Adaptive = &limiter.AdaptiveSnapshot{Limit: limit, UnloadedUS: 1000}
		}
	}
	if _, err := lim.Restore(time.Now(), snap); err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID(limiter.GroupGeneral)
	if v, _ := lim.Adaptive(g); v.Limit != limit || v.Probing {
		t.Fatalf("restored: %+v", v)
	}
	return g
}

// A request the adaptive limit sheds is answered 503 with Retry-After,
// no-store and the rate-limit fields, its body the problem type
// temporary-reduced-capacity, the 429s' JSON or text, by its Accept, over
// HTTP/1.1 and HTTP/2; it never reaches the node.
func TestShedReply(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(arrived)
			<-release
		}
		io.WriteString(w, "from the node")
	}, nil, adaptiveGeneral(limitertest.Adaptive{Min: 1, Max: 1}))
	// After newPlane's: cleanups run last first, and the node's Close waits
	// for the held request, which only free ends.
	t.Cleanup(free)
	g := startAt(t, p.lim, 1)
	held := make(chan int, 1)
	go func() {
		resp, err := http.Get(p.base + "/hold")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	eventually(t, "the held request in flight", func() bool { v, _ := p.lim.Adaptive(g); return v.Inflight == 1 })
	// The node's count is read once the held request has reached it: it is
	// counted in flight when decided, a moment before it is sent.
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the held request never reached the node")
	}
	hits := p.hits.Load()

	// Over HTTP/1.1 and over HTTP/2 alike.
	h2 := h2Client(t)
	for _, tc := range []struct {
		accept, ctype string
		check         func(body string) bool
	}{
		{"", "text/plain; charset=utf-8", func(b string) bool { return b == "Service Unavailable\n" }},
		{"application/json", "application/json", func(b string) bool {
			return b == `{"error":"service_unavailable","group":"general","reason":"adaptive","retry_after":1}`+"\n"
		}},
		{"application/problem+json, application/json;q=0.9", "application/problem+json", func(b string) bool {
			var doc map[string]any
			if err := json.Unmarshal([]byte(b), &doc); err != nil {
				return false
			}
			return doc["type"] == "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity" &&
				doc["status"] == 503.0 && doc["group"] == "general" && doc["retry_after"] == 1.0 && doc["title"] != nil
		}},
		{"text/plain, application/problem+json;q=0.5", "text/plain; charset=utf-8", func(b string) bool { return b == "Service Unavailable\n" }},
	} {
		for _, c := range []*http.Client{http.DefaultClient, h2} {
			req, _ := http.NewRequest(http.MethodGet, p.base+"/info", nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			h := resp.Header
			if resp.StatusCode != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || h.Get("Cache-Control") != "no-store" ||
				h.Get("Content-Type") != tc.ctype || h.Get("RateLimit-Policy") == "" || h.Get("ratelimit-limit") == "" || !tc.check(string(b)) {
				t.Errorf("%s, Accept %q: %d %v\n%s", resp.Proto, tc.accept, resp.StatusCode, h, b)
			}
		}
	}
	if p.hits.Load() != hits {
		t.Fatal("a shed request reached the node")
	}
	if st := p.lim.Stats()["general"]; st.RejectedAdaptive != 8 || st.RejectedConcurrency != 0 {
		t.Fatalf("stats: %+v", st)
	}
	free()
	if s := <-held; s != 200 {
		t.Fatalf("the held request: %d", s)
	}
	p.settled()
}

// The node's answers feed the controller, over HTTP/1.1 and HTTP/2: their
// latency to the head, and 5xx and broken exchanges as failures, which
// drive the limit down.
func TestNodeAnswersSampled(t *testing.T) {
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(20 * time.Millisecond)
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/reset":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		io.WriteString(w, "from the node")
	}, nil, adaptiveGeneral(limitertest.Adaptive{Min: 3, Max: 100, WindowMS: 10, Smoothing: 100}))
	h2 := h2Client(t)
	for _, c := range []*http.Client{http.DefaultClient, h2} {
		g := startAt(t, p.lim, 100)
		get := func(path string) int {
			resp, err := c.Get(p.base + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		// A window of 10 answers over 20 ms: its latency is the node's.
		for range 10 {
			get("/slow")
		}
		v, _ := p.lim.Adaptive(g)
		if v.Latency < 19*time.Millisecond || v.Latency > time.Second || v.Limit >= 100 {
			t.Fatalf("HTTP/2 %v: after answers in 20 ms, 20 times the unloaded latency: %+v", c == h2, v)
		}
		// Instant 500s and resets: congestion, though faster than the node's
		// unloaded latency.
		for _, path := range []string{"/fail", "/reset"} {
			startAt(t, p.lim, 100)
			before, _ := p.lim.Adaptive(g)
			deadline := time.Now().Add(5 * time.Second)
			for {
				if s := get(path); s != 500 && s != 502 {
					t.Fatalf("HTTP/2 %v, %s: %d", c == h2, path, s)
				}
				if v, _ = p.lim.Adaptive(g); v.Limit < before.Limit || time.Now().After(deadline) {
					break
				}
			}
			if v.Limit >= before.Limit {
				t.Fatalf("HTTP/2 %v, %s for 5 s: the limit stayed at %d", c == h2, path, v.Limit)
			}
		}
	}
	p.settled()
}

// The check API sheds with 503, Retry-After and the reason, auth_request
// with its 403 standing for a 503; a release that says what the node
// answered feeds the controller.
func TestCheckShedAndRelease(t *testing.T) {
	groups := limiter.ArweaveGroups()
	gs := groups[limiter.GroupGeneral]
	gs.Adaptive = limitertest.Adaptive{Min: 1, Max: 1, ProbeSamples: 1}.Settings()
	groups[limiter.GroupGeneral] = gs
	lim := limitertest.New(t, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	h := proxy.New(lim, proxy.Options{CheckLease: time.Minute})
	check := func() (int, map[string]any, http.Header) {
		w := httptest.NewRecorder()
		h.HandleCheck(w, httptest.NewRequest(http.MethodPost, "/api/v1/check", strings.NewReader(`{"peer":"192.0.2.1","path":"/info"}`)))
		var v map[string]any
		json.Unmarshal(w.Body.Bytes(), &v)
		return w.Code, v, w.Header()
	}
	code, first, _ := check()
	if code != 200 || first["id"] == nil {
		t.Fatalf("first: %d %v", code, first)
	}
	code, v, hd := check()
	if code != 503 || v["status"] != 503.0 || v["reason"] != "adaptive" || v["retry_after"] != 1.0 || hd.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d %v %v", code, v, hd)
	}
	// auth_request holds nothing, but sheds alike while a check's lease
	// holds the limit: a 403 that X-Limiterd-Status says is a 503.
	r := httptest.NewRequest(http.MethodGet, "/api/v1/check/auth", nil)
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set("X-Original-URI", "/info")
	r.Header.Set("X-Real-IP", "192.0.2.9")
	w := httptest.NewRecorder()
	h.HandleAuthRequest(w, r)
	if w.Code != 403 || w.Header().Get("X-Limiterd-Status") != "503" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("auth_request over the limit: %d %v", w.Code, w.Header())
	}
	release := func(body string) int {
		w := httptest.NewRecorder()
		h.HandleRelease(w, httptest.NewRequest(http.MethodPost, "/api/v1/release", strings.NewReader(body)))
		return w.Code
	}
	for _, bad := range []string{`{"id":"x","status":42}`, `{"id":"x","status":600}`, `{"id":"x","status":200,"latency_ms":-1}`} {
		if c := release(bad); c != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", bad, c)
		}
	}
	id := first["id"].(string)
	if c := release(`{"id":` + strconv.Quote(id) + `,"status":200,"latency_ms":7}`); c != 200 {
		t.Fatalf("release: %d", c)
	}
	g, _ := lim.GroupID(limiter.GroupGeneral)
	if v, _ := lim.Adaptive(g); v.Probing || v.Unloaded < 6*time.Millisecond || v.Unloaded > 8*time.Millisecond || v.Inflight != 0 {
		t.Fatalf("after a release reporting a 7 ms answer: %+v", v)
	}
}
