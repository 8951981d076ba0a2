package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestClientTimeouts: a client slow to send its headers gets 408; one that
// stalls its body gets 408; an idle keep-alive connection is closed; every
// slot is released.
func TestClientTimeouts(t *testing.T) {
	p := newPlane(t, nil, func(o *proxy.Options) {
		o.ReadHeaderTimeout = 200 * time.Millisecond
		o.IdleTimeout = 200 * time.Millisecond
		o.ClientBodyTimeout = 200 * time.Millisecond
	})
	got, closed := p.raw("GET /info HTTP/1.1\r\nHost: a\r\nX-Slow")
	if status(got) != "HTTP/1.1 408 Request Timeout" || !closed {
		t.Errorf("headers that never end: %q (closed %v), want 408 and closed", got, closed)
	}
	// A connection that sends nothing is closed (silently, as net/http
	// does, or with a 408).
	if got, closed := p.raw(""); (got != "" && status(got) != "HTTP/1.1 408 Request Timeout") || !closed {
		t.Errorf("nothing sent: %q (closed %v), want closed", got, closed)
	}

	// A body that stalls past 8 KiB (what fasthttp reads ahead before the
	// handler) and is being passed to the node.
	got, closed = p.raw("POST /tx HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 50000))
	if status(got) != "HTTP/1.1 408 Request Timeout" || !closed {
		t.Errorf("a stalled body: %q (closed %v), want 408 and closed", got, closed)
	}
	p.settled()

	// Idle keep-alive: closed without a word after IdleTimeout.
	c := p.dial()
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /info HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponse(t, br, "GET")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Errorf("idle keep-alive connection: %q, %v; want closed, silently", b, err)
	}
}

// TestUpstreamFaults: the node refusing, resetting before a byte, too slow
// to answer, stalling mid-body, or every connection to it busy: the client
// gets 502, 504 or a cut-off answer, and every slot is released.
func TestUpstreamFaults(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/reset":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		case "/slow-head":
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		case "/stall-body":
			w.Header().Set("Content-Length", "100000")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		default:
			io.WriteString(w, "ok")
		}
	}, func(o *proxy.Options) {
		o.UpstreamHeaderTimeout = 300 * time.Millisecond
		o.UpstreamReadTimeout = 300 * time.Millisecond
		o.UpstreamConnectTimeout = 300 * time.Millisecond
		o.UpstreamMaxConns = 1
	})

	get := func(path string) (int, error) {
		resp, err := http.Get(p.base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return resp.StatusCode, err
	}
	before := p.hits.Load()
	if code, err := get("/reset"); code != 502 || err != nil {
		t.Errorf("reset before a byte: %d %v, want 502", code, err)
	}
	if n := p.hits.Load() - before; n != 1 {
		t.Errorf("a reset on a new connection was sent %d times, want once", n)
	}
	if code, err := get("/slow-head"); code != 504 || err != nil {
		t.Errorf("no answer within upstream_header_timeout: %d %v, want 504", code, err)
	}
	if code, err := get("/stall-body"); code != 200 || err == nil {
		t.Errorf("a body that stalls: %d %v, want 200 and the body cut off", code, err)
	}
	p.settled()

	// One connection to the node, held by a request the node sits on: the
	// next waits upstream_connect_timeout for it, then 504.
	let := make(chan struct{})
	one := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-head" {
			<-let
		}
	}, func(o *proxy.Options) {
		o.UpstreamConnectTimeout = 200 * time.Millisecond
		o.UpstreamMaxConns = 1
	})
	held := make(chan error, 1)
	go func() {
		resp, err := http.Get(one.base + "/slow-head")
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	eventually(t, "the first request in flight", func() bool { return one.inflight() == 1 })
	if resp, err := http.Get(one.base + "/info"); err != nil || resp.StatusCode != 504 {
		t.Errorf("no free connection to the node: %v %v, want 504", resp, err)
	}
	close(let)
	if err := <-held; err != nil {
		t.Errorf("the request that held the connection: %v", err)
	}
	one.settled()
	if code, err := get("/info"); code != 200 || err != nil {
		t.Errorf("after the faults: %d %v", code, err)
	}

	// The node refusing connections.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead, _ := url.Parse("http://" + ln.Addr().String())
	ln.Close()
	q := newPlane(t, nil, func(o *proxy.Options) { o.Upstream = dead })
	if resp, err := http.Get(q.base + "/info"); err != nil || resp.StatusCode != 502 {
		t.Fatalf("refused: %v %v, want 502", resp, err)
	}
	if n := q.h.Counts.UpstreamErrors.Load(); n != 1 {
		t.Errorf("UpstreamErrors = %d, want 1", n)
	}
	q.settled()
}

// TestClientGoneReleases: a client that goes away while the node thinks
// does not end the exchange: its slot is held until the node answers, on
// the connection the node does not watch (docs/limiting.md, "In-flight
// release"). One that goes away in the middle of an answer, or of its
// upload, has its connection to the node closed and its slot freed.
func TestClientGoneReleases(t *testing.T) {
	nodeGone := make(chan string, 4)
	answer := make(chan struct{})
	release := make(chan struct{})
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/wait":
			// A node that does not notice a disconnect while it thinks.
			select {
			case <-answer:
			case <-release:
			}
			io.WriteString(w, "thought")
			nodeGone <- "wait"
		case "/big":
			for {
				if _, err := w.Write(make([]byte, 64<<10)); err != nil {
					nodeGone <- "big"
					return
				}
			}
		case "/upload":
			io.Copy(io.Discard, r.Body)
			nodeGone <- "upload"
		}
	}, nil)
	// After newPlane's: cleanups run last first, and the node's Close
	// waits for a held request, which only this ends.
	t.Cleanup(func() { close(release) })

	for _, c := range []struct{ path, req string }{
		{"wait", "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"big", "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"upload", "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n" + strings.Repeat("x", 100000)},
	} {
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, c.req)
		eventually(t, c.path+" in flight", func() bool { return p.inflight() == 1 })
		conn.Close()
		if c.path == "wait" {
			// Longer than limiterd ever looked at a client before it held
			// the slot to the node's answer.
			time.Sleep(time.Second)
			if n := p.inflight(); n != 1 {
				t.Fatalf("%d in flight while the node thinks for a client gone, want 1", n)
			}
			close(answer)
		}
		p.settled()
		select {
		case what := <-nodeGone:
			if what != c.path {
				t.Errorf("the node saw %s end, want %s", what, c.path)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the node's connection was not closed", c.path)
		}
	}
}

// TestPanicInRelay: a panic of limiterd's own while an answer's body is
// relayed (one too large to be taken whole with the head) is counted and
// its slot released (the client's answer is cut).
func TestPanicInRelay(t *testing.T) {
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 1<<20)) }, proxy.PanicInRelay)
	for range 3 {
		if resp, err := http.Get(p.base + "/info"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	p.settled()
	if n := p.h.Counts.InternalErrors.Load(); n != 3 {
		t.Errorf("InternalErrors = %d, want 3", n)
	}
}

// TestConnectionCaps: beyond max_conns_per_ip connections from one
// address get 429 and are closed at once, beyond max_conns any get 503;
// closing one makes room; a trusted proxy is not capped per address.
func TestConnectionCaps(t *testing.T) {
	p := newPlane(t, nil, func(o *proxy.Options) { o.MaxConnsPerIP = 2 })
	open := func(p *plane) (net.Conn, *bufio.Reader) {
		c := p.dial()
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /info HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c, br
	}
	c1, br1 := open(p)
	readResponse(t, br1, "GET")
	_, br2 := open(p)
	readResponse(t, br2, "GET")
	_, br3 := open(p)
	if resp, _ := readResponse(t, br3, "GET"); resp.StatusCode != 429 || !resp.Close {
		t.Fatalf("a third connection from one address: %s, want 429 and closed", resp.Status)
	}
	c1.Close()
	eventually(t, "room for one more", func() bool { return p.h.OpenConns() == 1 })
	_, br4 := open(p)
	if resp, _ := readResponse(t, br4, "GET"); resp.StatusCode != 200 {
		t.Fatalf("after one closed: %s", resp.Status)
	}
	if n := p.h.Counts.ConnsRefusedPerIP.Load(); n != 1 {
		t.Errorf("ConnsRefusedPerIP = %d", n)
	}

	q := newPlane(t, nil, func(o *proxy.Options) { o.MaxConns = 2; o.MaxConnsPerIP = -1 })
	for range 2 {
		_, br := open(q)
		readResponse(t, br, "GET")
	}
	if _, br := open(q); true {
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 503 {
			t.Fatalf("beyond max_conns: %s, want 503", resp.Status)
		}
	}

	trusted := newPlane(t, nil, func(o *proxy.Options) { o.MaxConnsPerIP = 1 }, func(c *limiter.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.ForwardedHeader = peer.ForwardedXFF
	})
	for i := range 3 {
		_, br := open(trusted)
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("connection %d from a trusted proxy: %s", i+1, resp.Status)
		}
	}
}

// TestShutdownDrains: Shutdown lets the exchange in flight finish, then
// returns; one that outlasts the drain has its connection closed.
func TestShutdownDrains(t *testing.T) {
	finish := make(chan struct{})
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/forever" {
			<-r.Context().Done()
			return
		}
		<-finish
		io.WriteString(w, "finished")
	}, nil)
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get(p.base + "/info")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && !resp.Close {
			err = errors.New("the answer of a drain does not say Connection: close")
		}
		res <- result{string(b), err}
	}()
	eventually(t, "the request in flight", func() bool { return p.inflight() == 1 })
	// A connection that never sends a request (read_header_timeout is
	// 10 s): the drain closes it rather than wait.
	silent := p.dial()
	eventually(t, "the silent connection open", func() bool { return p.h.OpenConns() == 2 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- p.h.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	close(finish)
	if r := <-res; r.err != nil || r.body != "finished" {
		t.Fatalf("the request in flight during the drain: %+v", r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the silent connection after the drain: %d bytes, %v; want closed", n, err)
	}

	q := newPlane(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, nil)
	go http.Get(q.base + "/forever")
	eventually(t, "the request in flight", func() bool { return q.inflight() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := q.h.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a drain that runs out: %v", err)
	}
	q.settled()
	if n := q.h.OpenConns(); n != 0 {
		t.Errorf("%d connections open after the drain ran out", n)
	}
	_ = fmt.Sprint
}

// TestDrainServesTalkers: during a drain, a keep-alive connection that
// sends its next request soon is answered (Connection: close, then
// closed), not closed under the request; one that stays silent, parked
// or not, is closed once it has waited a quarter of a second, and the
// drain ends then, long before its deadline.
func TestDrainServesTalkers(t *testing.T) {
	p := newPlane(t, nil, proxy.ParkAfter(50*time.Millisecond))
	get := "GET /info HTTP/1.1\r\nHost: node\r\n\r\n"
	open := func() (net.Conn, *bufio.Reader) {
		c := p.dial()
		br := bufio.NewReader(c)
		io.WriteString(c, get)
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("before the drain: %s, close %v", resp.Status, resp.Close)
		}
		return c, br
	}
	talker, tbr := open()
	silent, sbr := open()
	time.Sleep(100 * time.Millisecond) // both parked
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- p.h.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	io.WriteString(talker, get)
	resp, body := readResponse(t, tbr, "GET")
	if resp.StatusCode != 200 || body != "from the node" || !resp.Close {
		t.Fatalf("the talker during the drain: %s %q, close %v", resp.Status, body, resp.Close)
	}
	for _, br := range []*bufio.Reader{tbr, sbr} {
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("a connection still open after the drain")
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the drain took %v with no request in flight", d)
	}
	_ = silent
	if n := p.h.OpenConns(); n != 0 {
		t.Errorf("%d connections open after the drain", n)
	}
}

// TestIdleConnectionsParked: a keep-alive connection idle past the
// server's short wait is parked, still open, and served again when its
// next request comes; it is closed once idle_timeout has passed.
func TestIdleConnectionsParked(t *testing.T) {
	t.Run("epoll", func(t *testing.T) { testParked(t, false) })
	t.Run("alone", func(t *testing.T) { testParked(t, true) })
}

func testParked(t *testing.T, alone bool) {
	p := newPlane(t, nil, func(o *proxy.Options) {
		proxy.ParkAfter(50 * time.Millisecond)(o)
		o.IdleTimeout = 700 * time.Millisecond
		if alone {
			proxy.ParkAlone(o)
		}
	})
	c := p.dial()
	br := bufio.NewReader(c)
	for i := range 3 {
		io.WriteString(c, "GET /info HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "from the node" {
			t.Fatalf("request %d: %s %q", i+1, resp.Status, body)
		}
		time.Sleep(200 * time.Millisecond) // parked meanwhile
		if n := p.h.OpenConns(); n != 1 {
			t.Fatalf("%d connections open while parked, want 1", n)
		}
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Fatalf("idle past idle_timeout: %q %v, want closed", b, err)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("closed %v after the last request, idle_timeout is 700ms", waited)
	}
	eventually(t, "no connection open", func() bool { return p.h.OpenConns() == 0 })
}
