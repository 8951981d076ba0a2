package proxy_test

import (
	"io"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestPoolSharedFairly: a peer free of limits (exempt) keeps 24 requests
// to a slow answer in flight against a pool of 4 connections; another
// peer's request does not queue behind its 20 waiting ones (1.5 s of the
// node's time, past upstream_connect_timeout) but gets the next
// connection freed, the greedy peer holding more than its share. (Its
// own requests wait for one another: many get 504.)
func TestPoolSharedFairly(t *testing.T) {
	const pool, greedy, work = 4, 24, 300 * time.Millisecond
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(work)
		}
		io.WriteString(w, "from the node")
	}, func(o *proxy.Options) {
		o.UpstreamMaxConns = pool
		o.UpstreamConnectTimeout = time.Second
	}, func(c *limiter.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.ForwardedHeader = peer.ForwardedXFF
		c.Exempt = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}
	})
	get := func(path, xff string) (int, time.Duration) {
		req, _ := http.NewRequest(http.MethodGet, p.base+path, nil)
		req.Header.Set("X-Forwarded-For", xff)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range greedy {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Its own requests wait their turn: some past
				// upstream_connect_timeout (504).
				get("/slow", "192.0.2.1")
			}
		})
	}
	eventually(t, "the pool contended", func() bool { return p.h.Counts.UpstreamWaits.Load() > 2*greedy })
	var worst time.Duration
	for i := range 5 {
		code, took := get("/info", "198.51.100.1")
		if code != http.StatusOK || took > 2*work {
			t.Errorf("the other peer's request %d: %d after %v; want 200 within one or two answers of the node (%v)", i+1, code, took, work)
		}
		worst = max(worst, took)
	}
	t.Logf("the other peer's slowest of 5 requests: %v, the node working %v on each of the greedy peer's", worst, work)
	close(stop)
	wg.Wait()
	if p.h.Counts.UpstreamWaitsOverShare.Load() == 0 {
		t.Error("no wait of the greedy peer was counted over its share")
	}
}
