package proxy_test

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// TestServing: Serving is closed once Serve accepts, and a request then
// gets its answer; a Handler shut down before Serve never says it serves,
// and its Serve returns at once.
func TestServing(t *testing.T) {
	p := newPlane(t, nil, nil)
	select {
	case <-p.h.Serving():
	case <-time.After(10 * time.Second):
		t.Fatal("Serving not closed while Serve runs")
	}
	if s := p.get("/info"); s != 200 {
		t.Fatalf("GET /info once serving: %d", s)
	}

	lim, err := limiter.New(memory.New(), time.Now(), limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.New(lim, proxy.Options{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}})
	select {
	case <-h.Serving():
		t.Fatal("Serving closed before Serve")
	default:
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	select {
	case <-h.Serving():
		t.Fatal("Serving closed by a Serve after Shutdown")
	default:
	}
}
