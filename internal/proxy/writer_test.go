package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// proxyOver serves s's public handler on loopback with the send timeout
// given, and returns its URL. writeTimeout was the net/http server's
// write timeout, a bound on the whole answer; the fasthttp listener has
// none (each write has the send timeout), and the tests below still show
// that an answer may outlast it.
func proxyOver(t *testing.T, upstream http.HandlerFunc, writeTimeout, sendTimeout time.Duration) string {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), time.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := New(lim, Options{Upstream: u, SendTimeout: sendTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = writeTimeout
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// TestProxyNoTotalDeadline: a response that keeps flowing outlasts the
// server's write timeout; one the client stops reading is cut off about
// the send timeout later.
func TestProxyNoTotalDeadline(t *testing.T) {
	base := proxyOver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			// 2 s of trickle, 4 times the server's write timeout.
			for range 20 {
				io.WriteString(w, strings.Repeat("x", 100))
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
			return
		}
		// /big: far more than the socket buffers hold.
		chunk := make([]byte, 1<<20)
		for range 256 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}, 500*time.Millisecond, 300*time.Millisecond)

	resp, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 2000 {
		t.Fatalf("a trickle longer than WriteTimeout: %d bytes, %v; want 2000", len(b), err)
	}

	resp, err = http.Get(base + "/big")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 1<<20))
	time.Sleep(1500 * time.Millisecond) // stop reading
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a client that stopped reading got the whole response (%d more bytes)", n)
	}
}
