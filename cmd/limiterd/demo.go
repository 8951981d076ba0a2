package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/ticker"
)

// demoPeer is one synthetic client: its address (sent in X-Forwarded-For
// through a trusted loopback proxy), what it asks for and how fast.
type demoPeer struct {
	name   string
	addr   string
	method string
	path   string
	rate   float64 // requests per second
	sent   atomic.Int64
	ok     atomic.Int64
	limits atomic.Int64
	other  atomic.Int64
}

func demoPeers() []*demoPeer {
	return []*demoPeer{
		{name: "polite-1", addr: "198.51.100.1", method: "GET", path: "/info", rate: 2},
		{name: "polite-2", addr: "198.51.100.2", method: "GET", path: "/tx/pending", rate: 3},
		{name: "miner", addr: "198.51.100.3", method: "POST", path: "/tx", rate: 5},
		{name: "chunk-sync", addr: "2001:db8:1::7", method: "GET", path: "/chunk/123456", rate: 40},
		{name: "ABUSIVE", addr: "203.0.113.66", method: "GET", path: "/info", rate: 60},
	}
}

// demo serves with a built-in node as the upstream and drives synthetic
// peers through the proxy, printing what the limiter did every 5 s.
func (m *Main) demo(ctx context.Context, args []string) int {
	var duration time.Duration
	src, err := m.commonFlags("demo", args, func(fs *flag.FlagSet) {
		fs.DurationVar(&duration, "duration", 0, "stop after this long (0: run until interrupted)")
	})
	if err != nil {
		return flagExit(err)
	}
	node, nodeURL, err := startDemoNode()
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd demo:", err)
		return exitRuntime
	}
	defer node.Close()
	dir, err := os.MkdirTemp("", "limiterd-demo-")
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd demo:", err)
		return exitRuntime
	}
	defer os.RemoveAll(dir)
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	peers := demoPeers()
	go func() {
		select {
		case <-m.ready:
		case <-ctx.Done():
			return
		}
		m.demoTraffic(ctx, peers)
	}()
	adj := func(c *config.Config) {
		c.Server.Upstream = nodeURL
		c.Server.DataDir = dir
		// The demo stays on loopback, and its synthetic peers reach the
		// proxy from 127.0.0.1 naming themselves in X-Forwarded-For.
		c.Server.Listen = loopback(c.Server.Listen)
		c.Admin.Listen = loopback(c.Admin.Listen)
		c.Peers.TrustedProxies = []string{"127.0.0.1/32"}
		c.Peers.ForwardedHeader = "x-forwarded-for"
	}
	return m.start(ctx, src, adj)
}

func loopback(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// startDemoNode serves a tiny stand-in for an Arweave node on loopback.
func startDemoNode() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"network":"demo","path":%q}`, r.URL.Path)
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.Serve(ln)
	return s, "http://" + ln.Addr().String(), nil
}

func (m *Main) demoTraffic(ctx context.Context, peers []*demoPeer) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	base := m.PublicURL()
	fmt.Fprintf(m.Stdout, `
limiterd demo: a built-in node at the upstream, limiterd in front of it at %s,
and %d synthetic peers. The abusive one sends 60 requests/s to the general group
(leaky_limit 450 per 30 s): after ~8 s it gets 429 until the next leaky tick.

  admin API:  curl -H 'Authorization: Bearer %s' %s/api/v1/peers?sort=rejections
  metrics:    curl %s/metrics | grep ar_limiter_rejected_total
  try it:     curl -i -H 'X-Forwarded-For: 203.0.113.66' %s/info

`, base, len(peers), m.Token(), m.AdminURL(), m.AdminURL(), base)
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ticker.Every(ctx, time.Duration(float64(time.Second)/p.rate), func() {
				req, _ := http.NewRequestWithContext(ctx, p.method, base+p.path, strings.NewReader(""))
				req.Header.Set("X-Forwarded-For", p.addr)
				p.sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					p.other.Add(1)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					p.ok.Add(1)
				case http.StatusTooManyRequests:
					p.limits.Add(1)
				default:
					p.other.Add(1)
				}
			})
		}()
	}
	start := time.Now()
	ticker.Every(ctx, 5*time.Second, func() { m.demoReport(peers, time.Since(start)) })
	wg.Wait()
	m.demoReport(peers, time.Since(start))
}

func (m *Main) demoReport(peers []*demoPeer, elapsed time.Duration) {
	sorted := append([]*demoPeer(nil), peers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].limits.Load() > sorted[j].limits.Load() })
	var b strings.Builder
	fmt.Fprintf(&b, "after %s:\n  %-11s %-16s %-20s %6s %6s %6s %6s\n", elapsed.Round(time.Second), "peer", "address", "request", "sent", "200", "429", "other")
	for _, p := range sorted {
		fmt.Fprintf(&b, "  %-11s %-16s %-20s %6d %6d %6d %6d\n", p.name, p.addr, p.method+" "+p.path, p.sent.Load(), p.ok.Load(), p.limits.Load(), p.other.Load())
	}
	fmt.Fprintln(m.Stdout, b.String())
}
