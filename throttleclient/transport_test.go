package throttleclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/throttleclient"
)

// serveAdaptive starts a limiterd-like admin server whose throttle is in
// the adaptive mode.
func serveAdaptive(t *testing.T) (*httptest.Server, *throttle.Throttle) {
	t.Helper()
	cfg := arweaveThrottle()
	cfg.Mode = throttle.ModeAdaptive
	th, err := throttle.New(time.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tapi := api.NewThrottle(th, nil, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/throttle", tapi.HandleWait)
	mux.HandleFunc("POST /api/v1/throttle/observe", tapi.HandleObserve)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { tapi.Close(); srv.Close() })
	return srv, th
}

// peerNode answers like a 2.9.7 node whose general quota is total calls,
// refilled every reset seconds (remaining counts down from total−1); with
// total 0 it sends no ratelimit field at all.
func peerNode(t *testing.T, total, reset int64) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		if total > 0 {
			h := w.Header()
			h.Set("RateLimit-Limit", strconv.FormatInt(total, 10)+`, 453;policy="general usage", 150;policy="general concurrency" `)
			h.Set("RateLimit-Remaining", strconv.FormatInt(max(0, total-i), 10))
			h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
			h.Set("RateLimit-Reset-Amount", strconv.FormatInt(total, 10))
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestTransportPacesByLearnedQuota(t *testing.T) {
	lim, th := serveAdaptive(t)
	node, calls := peerNode(t, 3, 1)
	var errs atomic.Int64
	hc := &http.Client{Transport: &throttleclient.Transport{
		Client: throttleclient.New(lim.URL, ""),
		Errors: func(error) { errs.Add(1) },
	}}
	get := func() {
		resp, err := hc.Get(node.URL + "/info")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// 1st: no quota known yet; the replies then say 2, 1, 0 left.
	for range 3 {
		get()
	}
	s := th.AdaptiveStats()
	if s.Learned != 3 || s.Admitted != 2 || s.Passed != 1 || s.Queued != 0 {
		t.Fatalf("after 3 calls: %+v", s)
	}
	// The 4th waits for the refill, a second after the reply that spent
	// the quota, then goes.
	get()
	if s := th.AdaptiveStats(); s.Queued != 1 || s.Waiting != 0 || calls.Load() != 4 || errs.Load() != 0 {
		t.Errorf("after the 4th call: %+v, node calls %d, errors %d", s, calls.Load(), errs.Load())
	}
}

// A peer whose replies carry no field is never throttled; limiterd down
// stops nothing; the end of the request's context does.
func TestTransportNeverInTheWay(t *testing.T) {
	lim, th := serveAdaptive(t)
	node, calls := peerNode(t, 0, 0)
	hc := &http.Client{Transport: &throttleclient.Transport{Client: throttleclient.New(lim.URL, "")}}
	for range 20 {
		resp, err := hc.Get(node.URL + "/chunk/1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if s := th.AdaptiveStats(); calls.Load() != 20 || s.Queued != 0 || s.Refused["missing_header"] != 20 {
		t.Errorf("incompatible peer: %d calls, %+v", calls.Load(), s)
	}
	// limiterd not running: the request goes.
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	hc = &http.Client{Transport: &throttleclient.Transport{Client: throttleclient.New(downURL, "")}}
	resp, err := hc.Get(node.URL + "/x")
	if err != nil {
		t.Fatalf("limiterd down: %v", err)
	}
	resp.Body.Close()
	// A spent quota and a context that ends: the request does not go.
	hc = &http.Client{Transport: &throttleclient.Transport{Client: throttleclient.New(lim.URL, "")}}
	spent, _ := peerNode(t, 1, 60)
	resp, err = hc.Get(spent.URL + "/info") // learns 0 left, refill in 60 s
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, spent.URL+"/info", nil)
	go func() {
		for th.AdaptiveStats().Waiting == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := hc.Do(req); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled wait: %v", err)
	}
}

// arweaveThrottle is the shipped outbound throttle table, its patterns
// compiled by the core (throttle.Config.Compile).
func arweaveThrottle() throttle.Config {
	c := throttle.ArweaveConfig()
	c.Compile = limiter.ThrottleMatcher
	return c
}
