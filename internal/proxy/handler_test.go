package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// rig is a proxy Handler on a fake clock in front of a test upstream that
// answers the status named by its ?status= (200 by default) and counts
// the requests that reach it.
type rig struct {
	t      *testing.T
	h      *proxy.Handler
	lim    *limiter.Limiter
	clock  *limitertest.Clock
	hits   atomic.Int64
	base   string // the public listener's URL
	client *http.Client
}

// newRig returns a rig whose general group admits leaky requests per 30 s
// (no window), with POST /tx refunding on 200; opts adjusts the Handler's
// options, limOpts the limiter's.
func newRig(t *testing.T, leaky int64, opts func(*proxy.Options), limOpts ...limiter.Option) *rig {
	return newRigOn(t, memory.New(), leaky, opts, limOpts...)
}

// newRigOn is newRig with the limiter's state in b.
func newRigOn(t *testing.T, b limiter.Backend, leaky int64, opts func(*proxy.Options), limOpts ...limiter.Option) *rig {
	t.Helper()
	r := &rig{t: t, clock: limitertest.NewClock(time.UnixMilli(1_700_000_000_000))}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		status := http.StatusOK
		if s := req.URL.Query().Get("status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("from the node"))
	}))
	t.Cleanup(up.Close)
	groups := limiter.ArweaveGroups()
	g := groups["general"]
	g.LeakyLimit, g.LeakyTickReduction = leaky, leaky
	groups["general"] = g
	cfg := limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(b, r.clock.Now(), cfg, limOpts...)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	o := proxy.Options{Upstream: u, Now: r.clock.Now}
	if opts != nil {
		opts(&o)
	}
	r.lim, r.h = lim, proxy.New(lim, o)
	r.base = serve(t, r.h)
	r.client = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(r.client.CloseIdleConnections)
	return r
}

// do sends one request through the public listener over loopback, and
// returns what the client got as a recorder holds it.
func (r *rig) do(method, target string, hdr ...string) *httptest.ResponseRecorder {
	r.t.Helper()
	req, err := http.NewRequest(method, r.base+target, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	w := httptest.NewRecorder()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	w.Body.Write(b)
	return w
}

// serve serves h's public listener on a loopback port until the test
// ends, and returns its base URL.
func serve(t *testing.T, h *proxy.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// inflight returns the requests in flight in general.
func (r *rig) inflight() int64 { return r.lim.Stats()["general"].ItemsConcurrency }

func TestProxy429BodyAndRetryAfter(t *testing.T) {
	r := newRig(t, 3, nil)
	for i := range 3 {
		w := r.do("GET", "/info")
		if w.Code != http.StatusOK || w.Body.String() != "from the node" {
			t.Fatalf("request %d: %d %q", i+1, w.Code, w.Body)
		}
		if got, want := w.Header().Get("Ratelimit"), `"general";r=`+strconv.Itoa(2-i)+`;t=30`; got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
	}
	w := r.do("GET", "/info")
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "Too Many Requests" ||
		w.Header().Get("Retry-After") != "30" || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("4th: %d %q Retry-After %q Content-Type %q", w.Code, w.Body, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
	}
	// Ten seconds on, the next tick is 20 s away; JSON when preferred.
	r.clock.Add(10 * time.Second)
	w = r.do("GET", "/info", "Accept", "application/json")
	var body struct {
		Error, Group, Reason string
		RetryAfter           int64 `json:"retry_after"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusTooManyRequests {
		t.Fatalf("JSON 429: %d %q: %v", w.Code, w.Body, err)
	}
	if body.Error != "too_many_requests" || body.Group != "general" || body.Reason != "rate_limit" || body.RetryAfter != 20 ||
		w.Header().Get("Retry-After") != "20" {
		t.Errorf("JSON 429: %+v, Retry-After %q", body, w.Header().Get("Retry-After"))
	}
	if n := r.hits.Load(); n != 3 {
		t.Errorf("the node got %d requests, want 3", n)
	}
	// The tick refills the bucket.
	r.clock.Add(20 * time.Second)
	if w := r.do("GET", "/info"); w.Code != http.StatusOK {
		t.Errorf("after the tick: %d", w.Code)
	}
	if n := r.inflight(); n != 0 {
		t.Errorf("%d in flight after every exchange ended", n)
	}
}

func TestProxyReduceOnStatus(t *testing.T) {
	r := newRig(t, 3, nil)
	// POST /tx answered 200 gives its token back: any number pass.
	for i := range 10 {
		if w := r.do("POST", "/tx"); w.Code != http.StatusOK {
			t.Fatalf("POST /tx %d answered 200: %d", i+1, w.Code)
		}
	}
	// Answered 400, it keeps its token; so does a GET of /tx.
	for i := range 3 {
		if w := r.do("POST", "/tx?status=400"); w.Code != http.StatusBadRequest {
			t.Fatalf("POST /tx?status=400 %d: %d", i+1, w.Code)
		}
	}
	if w := r.do("POST", "/tx"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("bucket used up by three 400s: %d, want 429", w.Code)
	}
	if st := r.lim.Stats()["general"]; st.ReduceRequests != 10 {
		t.Errorf("%d reductions, want 10", st.ReduceRequests)
	}
}

func TestProxyReleasesOnPanic(t *testing.T) {
	r := newRig(t, 10, proxy.PanicBeforeUpstream) // a bug of limiterd's own on the request's way
	for range 5 {
		if w := r.do("GET", "/info"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("a panic: %d, want 503", w.Code)
		}
	}
	if n := r.inflight(); n != 0 {
		t.Errorf("%d in flight after the panics, want 0", n)
	}
	if n := r.h.Counts.InternalErrors.Load(); n != 5 {
		t.Errorf("InternalErrors = %d, want 5", n)
	}
}

func TestProxyUpstreamErrors(t *testing.T) {
	// Unreachable: a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	r := newRig(t, 10, func(o *proxy.Options) { o.Upstream, _ = url.Parse(dead) })
	if w := r.do("GET", "/info"); w.Code != http.StatusBadGateway {
		t.Errorf("unreachable upstream: %d, want 502", w.Code)
	}
	if n := r.h.Counts.UpstreamErrors.Load(); n != 1 {
		t.Errorf("UpstreamErrors = %d, want 1", n)
	}
	// Too slow to answer: 504.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	r = newRig(t, 10, func(o *proxy.Options) {
		o.Upstream, _ = url.Parse(slow.URL)
		o.UpstreamHeaderTimeout = 50 * time.Millisecond
	})
	if w := r.do("GET", "/info"); w.Code != http.StatusGatewayTimeout {
		t.Errorf("slow upstream: %d, want 504", w.Code)
	}
	if n := r.h.Counts.UpstreamTimeouts.Load(); n != 1 {
		t.Errorf("UpstreamTimeouts = %d, want 1", n)
	}
	if n := r.inflight(); n != 0 {
		t.Errorf("%d in flight after the upstream errors, want 0", n)
	}
}

// downBackend is a Backend that cannot decide: Redis unreachable.
type downBackend struct{}

func (downBackend) Admit(int64, limiter.Key, *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle) {
	return limiter.Outcome{Reason: limiter.ReasonUnavailable}, limiter.Usage{}, limiter.Handle{}
}
func (downBackend) Release(limiter.Handle) {}
func (downBackend) Reduce(int64, limiter.Key, *limiter.Group) limiter.ReduceResult {
	return limiter.ReduceNoop
}
func (downBackend) Forget(limiter.Key, *limiter.Group) bool { return false }

func TestProxyBackendUnavailable(t *testing.T) {
	r := newRigOn(t, downBackend{}, 3, nil)
	w := r.do("GET", "/info")
	if w.Code != http.StatusServiceUnavailable || !strings.HasPrefix(w.Body.String(), "Service Unavailable") {
		t.Fatalf("backend down: %d %q, want 503", w.Code, w.Body)
	}
	if w.Header().Get("Ratelimit") != "" || w.Header().Get("Ratelimit-Policy") != "" {
		t.Errorf("a 503 with rate-limit fields: %v", w.Header())
	}
	if n := r.hits.Load(); n != 0 {
		t.Errorf("the node got %d requests while the limiter could not decide", n)
	}
}
