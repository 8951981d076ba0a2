package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultConfig is a daemon in front of upstream with short upstream
// timeouts (300 ms), a short read_header_timeout (1 s) and limits no
// test here reaches, 127.0.0.1 limited like any peer.
func faultConfig(upstream, dataDir string) string {
	return fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
upstream = %q
data_dir = %q
shutdown_timeout = "5s"
read_header_timeout = "1s"
client_body_timeout = "1s"
upstream_connect_timeout = "300ms"
upstream_header_timeout = "300ms"
upstream_read_timeout = "300ms"

[admin]
listen = "127.0.0.1:0"
token = "test-token"

[peers]
exempt = []

[http_api.limiter.general]
leaky_limit = 100000
leaky_tick_reduction = 100000
concurrency_limit = 1000
`, upstream, dataDir)
}

// faultNode is a node on loopback that misbehaves as the path of each
// request asks: it speaks raw TCP, so that it can reset, stall, or send
// what no HTTP server library would. It answers "/ok" with a 200 and
// closes every connection after one exchange (no idle connection stays
// pooled, so the daemon's goroutines can be counted back to idle).
type faultNode struct {
	t  *testing.T
	ln net.Listener
	// refuse closes every connection as soon as it is accepted.
	refuse bool
	// cut is closed by the test to let "/reset-after" reset its
	// connection, once the client has the head of the answer.
	cut chan struct{}
	// gone receives the path of an exchange whose connection the daemon
	// closed while the node was still writing or waiting.
	gone chan string

	// extra counts the bytes received on a connection after its request
	// (a request on a connection the daemon should have discarded).
	extra atomic.Int64

	mu    sync.Mutex
	paths []string // the request targets received, in order
	wg    sync.WaitGroup
}

func newFaultNode(t *testing.T, refuse bool) *faultNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &faultNode{t: t, ln: ln, refuse: refuse, cut: make(chan struct{}, 1), gone: make(chan string, 16)}
	n.wg.Add(1)
	go n.accept()
	t.Cleanup(func() { ln.Close(); n.wg.Wait() })
	return n
}

func (n *faultNode) url() string { return "http://" + n.ln.Addr().String() }

func (n *faultNode) received() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.paths...)
}

func (n *faultNode) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		if n.refuse {
			c.Close()
			continue
		}
		n.wg.Add(1)
		go func() { defer n.wg.Done(); defer c.Close(); n.serve(c.(*net.TCPConn)) }()
	}
}

// untilClosed reads c until the daemon closes it (or resets it): false
// when 10 s pass first. Anything the daemon sends meanwhile is a request
// written on a connection whose exchange had not ended: counted in extra.
func (n *faultNode) untilClosed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, c)
	n.extra.Add(got)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (n *faultNode) serve(c *net.TCPConn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	io.Copy(io.Discard, req.Body)
	n.mu.Lock()
	n.paths = append(n.paths, req.RequestURI)
	n.mu.Unlock()
	switch req.URL.Path {
	case "/reset-before":
		c.SetLinger(0)
	case "/reset-after":
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 1000))
		select {
		case <-n.cut:
		case <-time.After(10 * time.Second):
		}
		c.SetLinger(0)
	case "/slow-head":
		if n.untilClosed(c) {
			n.gone <- "slow-head"
		}
	case "/stall-body":
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 1000))
		if n.untilClosed(c) {
			n.gone <- "stall-body"
		}
	case "/huge-header":
		go io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 1<<20)+"\r\n\r\n")
		if n.untilClosed(c) {
			n.gone <- "huge-header"
		}
	case "/endless":
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := fmt.Sprintf("%x\r\n%s\r\n", 32<<10, strings.Repeat("y", 32<<10))
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, err := io.WriteString(c, chunk); err != nil {
				var ne net.Error
				if !(errors.As(err, &ne) && ne.Timeout()) {
					n.gone <- "endless"
				}
				return
			}
		}
	default:
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	}
}

// closedFor waits for the daemon to close the node's connection of the
// exchange named what.
func (n *faultNode) closedFor(t *testing.T, what string) {
	t.Helper()
	select {
	case got := <-n.gone:
		if got != what {
			t.Errorf("the node's connection closed for %s, want %s", got, what)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("%s: the daemon never closed the node's connection", what)
	}
}

// adminClient asks the admin API without keeping connections open, so
// that the goroutines it counts are the same on every scrape.
var adminClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// metrics scrapes the admin listener's /metrics into series → value.
func (d *daemon) metrics() map[string]float64 {
	d.t.Helper()
	resp, err := adminClient.Get(d.AdminURL() + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// inflightAll is the requests in flight over every group, as /metrics
// says, and as GET /api/v1/peers/127.0.0.1 says of the one peer here.
func (d *daemon) inflightAll() (metric, peer float64) {
	for k, v := range d.metrics() {
		if strings.HasPrefix(k, "ar_limiter_tracked_items_total{") && strings.Contains(k, `limiting_type="concurrency"`) {
			metric += v
		}
	}
	req, _ := http.NewRequest("GET", d.AdminURL()+"/api/v1/peers/127.0.0.1", nil)
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := adminClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Groups []struct {
			Inflight float64 `json:"inflight"`
		} `json:"groups"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	for _, g := range v.Groups {
		peer += g.Inflight
	}
	return metric, peer
}

// dataPlaneGoroutines counts the goroutines running the data plane's code
// (package proxy or fasthttp) in this process: its accept loop, clock and
// parker, and one per connection or exchange under way. The in-process
// daemon shares the process with the test, whose HTTP clients' goroutines
// (and the admin listener's, serving them) come and go: they are left out.
func dataPlaneGoroutines() (int, string) {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	var stacks []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "limiterd/proxy.") || strings.Contains(g, "valyala/fasthttp") {
			n++
			stacks = append(stacks, g)
		}
	}
	return n, strings.Join(stacks, "\n\n")
}

// idle waits until nothing is in flight (through the admin API: the
// groups' in-flight gauges on /metrics, and the peer's entries) and the
// data plane's goroutines are back to at most base.
func (d *daemon) idle(t *testing.T, what string, base int) {
	t.Helper()
	var m, p float64
	var g int
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, p = d.inflightAll()
		g, stacks = dataPlaneGoroutines()
		if m == 0 && p == 0 && g <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: in flight %v (metric) %v (peer API), data-plane goroutines %v (idle %v): not back to idle\n%s", what, m, p, g, base, stacks)
		}
	}
}

// noPanic fails the test if the daemon logged a panic.
func (d *daemon) noPanic(t *testing.T) {
	t.Helper()
	if log := d.stderr.String(); strings.Contains(strings.ToLower(log), "panic") {
		t.Errorf("the daemon logged a panic:\n%s", log)
	}
}

// baseline warms the daemon up with a few plain exchanges and returns
// its data plane's goroutines once idle.
func (d *daemon) baseline(t *testing.T, client *http.Client) int {
	t.Helper()
	for range 3 {
		resp, err := client.Get(d.PublicURL() + "/ok")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	// The count once it has stopped falling.
	last := -1
	for range 100 {
		g, _ := dataPlaneGoroutines()
		if g == last {
			return g
		}
		last = g
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

// TestUpstreamFaultsThroughDaemon: every way the node can fail (down,
// refusing, reset before and after its first byte, silent past
// upstream_header_timeout, stalled mid-body past upstream_read_timeout, a
// head over the limit, an endless body the client walks away from) gets
// the status of docs/replies.md ("Other statuses"), or a cut connection when
// the answer had begun; after each the admin API says nothing is in flight and
// the goroutines are back to their idle count.
func TestUpstreamFaultsThroughDaemon(t *testing.T) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	get := func(d *daemon, path string) (int, time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(d.PublicURL() + path)
		if err != nil {
			return 0, time.Since(start), err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return resp.StatusCode, time.Since(start), err
	}

	t.Run("down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		d := startDaemonWith(t, func(dir string) string { return faultConfig("http://"+addr, dir) })
		base := d.baseline(t, client)
		if code, _, err := get(d, "/info"); code != 502 || err != nil {
			t.Errorf("nothing listening: %d %v, want 502", code, err)
		}
		d.idle(t, "down", base)
		d.noPanic(t)
	})
	t.Run("refusing", func(t *testing.T) {
		n := newFaultNode(t, true)
		d := startDaemonWith(t, func(dir string) string { return faultConfig(n.url(), dir) })
		base := d.baseline(t, client)
		errs := d.metrics()[`limiterd_upstream_errors_total{kind="unreachable"}`]
		if code, _, err := get(d, "/info"); code != 502 || err != nil {
			t.Errorf("accepted then closed: %d %v, want 502", code, err)
		}
		d.idle(t, "refusing", base)
		if v := d.metrics()[`limiterd_upstream_errors_total{kind="unreachable"}`] - errs; v != 1 {
			t.Errorf("limiterd_upstream_errors_total{kind=unreachable} rose by %v, want 1", v)
		}
		d.noPanic(t)
	})

	n := newFaultNode(t, false)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(n.url(), dir) })
	base := d.baseline(t, client)

	t.Run("reset before the first byte", func(t *testing.T) {
		if code, _, err := get(d, "/reset-before"); code != 502 || err != nil {
			t.Errorf("%d %v, want 502", code, err)
		}
		sent := 0
		for _, p := range n.received() {
			if p == "/reset-before" {
				sent++
			}
		}
		if sent != 1 {
			t.Errorf("the node got the request %d times, want once (a new connection is never retried)", sent)
		}
		d.idle(t, "reset before", base)
	})
	t.Run("reset after the first byte", func(t *testing.T) {
		resp, err := client.Get(d.PublicURL() + "/reset-after")
		if err != nil {
			t.Fatal(err)
		}
		n.cut <- struct{}{}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil || len(b) >= 100000 {
			t.Errorf("%d, %d bytes, %v; want 200 and the body cut short", resp.StatusCode, len(b), err)
		}
		d.idle(t, "reset after", base)
	})
	t.Run("slow first byte", func(t *testing.T) {
		code, took, err := get(d, "/slow-head")
		if code != 504 || err != nil {
			t.Errorf("%d %v, want 504", code, err)
		}
		// The deadline is on a clock read every 5 ms (proxy's coarseClock).
		if took < 270*time.Millisecond {
			t.Errorf("504 after %v, well before upstream_header_timeout (300ms)", took)
		}
		n.closedFor(t, "slow-head")
		d.idle(t, "slow first byte", base)
	})
	t.Run("stalled body", func(t *testing.T) {
		code, took, err := get(d, "/stall-body")
		if code != 200 || err == nil {
			t.Errorf("%d %v, want 200 and the body cut off", code, err)
		}
		if took < 300*time.Millisecond {
			t.Errorf("cut after %v, before upstream_read_timeout (300ms)", took)
		}
		n.closedFor(t, "stall-body")
		d.idle(t, "stalled body", base)
	})
	t.Run("huge header", func(t *testing.T) {
		if code, _, err := get(d, "/huge-header"); code != 502 || err != nil {
			t.Errorf("%d %v, want 502", code, err)
		}
		n.closedFor(t, "huge-header")
		d.idle(t, "huge header", base)
	})
	t.Run("endless body, the client goes away", func(t *testing.T) {
		c, err := net.Dial("tcp", strings.TrimPrefix(d.PublicURL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /endless HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
			t.Fatalf("reading the first MiB: %v", err)
		}
		c.Close()
		n.closedFor(t, "endless")
		d.idle(t, "endless body", base)
	})
	t.Run("after the faults", func(t *testing.T) {
		if code, _, err := get(d, "/ok"); code != 200 || err != nil {
			t.Errorf("%d %v, want 200", code, err)
		}
		d.idle(t, "after", base)
	})
	if b := n.extra.Load(); b != 0 {
		t.Errorf("the node got %d bytes after a request on connections that should have been closed", b)
	}
	m := d.metrics()
	if v := m[`limiterd_upstream_errors_total{kind="unreachable"}`]; v < 2 { // reset before, huge header
		t.Errorf("limiterd_upstream_errors_total{kind=unreachable} = %v, want ≥ 2", v)
	}
	if v := m[`limiterd_upstream_errors_total{kind="timeout"}`]; v < 1 {
		t.Errorf("limiterd_upstream_errors_total{kind=timeout} = %v, want ≥ 1", v)
	}
	d.noPanic(t)
}
