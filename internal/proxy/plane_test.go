package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// seen is what the node got of one request.
type seen struct {
	method, uri, host string
	header            http.Header
	body              int64
}

// plane is a public listener on loopback in front of a test node that
// records what reaches it. Its limiter uses the Arweave groups and routes,
// with no exempt peer, so that 127.0.0.1 is limited like anyone.
type plane struct {
	t    *testing.T
	h    *proxy.Handler
	lim  *limiter.Limiter
	addr string // the public listener's host:port
	base string // its URL
	node *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	last *seen
}

// newPlane starts a plane whose node runs answer after recording the
// request (body read whole first, unless answer is given: then it reads
// the body itself); opts adjusts the options, cfg the limiter's config.
func newPlane(t *testing.T, answer http.HandlerFunc, opts func(*proxy.Options), cfg ...func(*limiter.Config)) *plane {
	t.Helper()
	p := &plane{t: t}
	p.node = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		s := &seen{method: r.Method, uri: r.RequestURI, host: r.Host, header: r.Header.Clone()}
		if answer == nil {
			s.body, _ = io.Copy(io.Discard, r.Body)
		}
		p.mu.Lock()
		p.last = s
		p.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		io.WriteString(w, "from the node")
	}))
	t.Cleanup(p.node.Close)
	c := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	for _, f := range cfg {
		f(&c)
	}
	u, _ := url.Parse(p.node.URL)
	o := proxy.Options{Upstream: u}
	if opts != nil {
		opts(&o)
	}
	// The daemon's wiring: the refusals reach the RejectLog as the
	// limiter's observer.
	var observe []limiter.Option
	if o.RejectLog != nil {
		observe = append(observe, limiter.WithObserver(o.RejectLog))
	}
	lim, err := limiter.New(memory.New(), time.Now(), c, observe...)
	if err != nil {
		t.Fatal(err)
	}
	p.lim, p.h = lim, proxy.New(lim, o)
	p.base = serve(t, p.h)
	p.addr = strings.TrimPrefix(p.base, "http://")
	return p
}

// seen returns what the node got last.
func (p *plane) seen() *seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.t.Fatal("nothing reached the node")
	}
	return p.last
}

// dial opens a raw connection to the public listener.
func (p *plane) dial() net.Conn {
	p.t.Helper()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { c.Close() })
	return c
}

// raw writes req on a new connection and returns everything read until
// the listener closes it (or 5 s pass: then closed is false).
func (p *plane) raw(req string) (got string, closed bool) {
	p.t.Helper()
	c := p.dial()
	if _, err := io.WriteString(c, req); err != nil {
		p.t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	return string(b), err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// inflight returns the requests in flight over every group.
func (p *plane) inflight() int64 {
	var n int64
	for _, st := range p.lim.Stats() {
		n += st.ItemsConcurrency
	}
	return n
}

// settled waits until nothing is in flight.
func (p *plane) settled() {
	p.t.Helper()
	eventually(p.t, "in-flight back to 0", func() bool { return p.inflight() == 0 })
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// status returns the status line of a raw answer.
func status(answer string) string {
	line, _, _ := strings.Cut(answer, "\r\n")
	return line
}

// readResponse reads one answer from br for a request of method.
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestAmbiguousFramingRefused: a request framed two ways, or framed in a
// way the node might read differently (the ways requests are smuggled),
// is a 400 with the connection closed; whatever followed it on the
// connection is never read as a request, and nothing reaches the node.
func TestAmbiguousFramingRefused(t *testing.T) {
	p := newPlane(t, nil, nil)
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, req := range map[string]string{
		"CL.TE": "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE.CL": "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled),
		"TE identity":           "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello" + smuggled,
		"TE identity alone":     "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n" + smuggled,
		"TE gzip, chunked":      "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE twice":              "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE on HTTP/1.0":        "POST /tx HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"two Content-Lengths":   "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\n" + smuggled,
		"Content-Length list":   "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 41\r\n\r\n" + smuggled,
		"space before colon":    "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length : 41\r\n\r\n" + smuggled,
		"obs-fold":              "GET /info HTTP/1.1\r\nHost: x\r\nX-A: a\r\n Content-Length: 41\r\n\r\n" + smuggled,
		"bare LF":               "GET /info HTTP/1.1\r\nHost: x\r\nX-A: a\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"bare CR":               "GET /info HTTP/1.1\r\nHost: x\r\nX-A: a\rTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"bad chunk size":        "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + smuggled,
		"LF in chunk extension": "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0;a\nb\r\n\r\n" + smuggled,
	} {
		t.Run(name, func(t *testing.T) {
			before := p.hits.Load()
			got, closed := p.raw(req)
			if status(got) != "HTTP/1.1 400 Bad Request" || !closed {
				t.Fatalf("got %q (closed %v), want 400 and the connection closed", got, closed)
			}
			if n := strings.Count(got, "HTTP/1.1 "); n != 1 {
				t.Errorf("%d answers on the connection, want 1: %q", n, got)
			}
			if !strings.Contains(got, "\r\nConnection: close\r\n") {
				t.Errorf("no Connection: close: %q", got)
			}
			if n := p.hits.Load() - before; n != 0 && name != "bad chunk size" && name != "LF in chunk extension" {
				t.Errorf("%d requests reached the node", n)
			}
			if n := p.hits.Load() - before; n > 1 {
				t.Errorf("%d requests reached the node: smuggled", n)
			}
		})
	}
	p.settled()
	// Requests pipelined honestly are two requests, both answered.
	got, _ := p.raw("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if n := strings.Count(got, "HTTP/1.1 200 OK"); n != 2 {
		t.Fatalf("two pipelined requests: %d answers: %q", n, got)
	}
	if s := p.seen(); s.uri != "/b" {
		t.Errorf("the node got %q last, want /b", s.uri)
	}
}

// TestMalformedRequests: requests fasthttp cannot parse, paths that do not
// decode, and headers over the limit are refused before any decision.
func TestMalformedRequests(t *testing.T) {
	p := newPlane(t, nil, nil)
	big := strings.Repeat("a", proxy.MaxHeaderBytes)
	for name, c := range map[string]struct{ req, status string }{
		"no target":             {"GET\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"no version":            {"GET /info\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"junk after version":    {"GET /info HTTP/1.1 x\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"space in target":       {"GET /in fo HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"NUL in target":         {"GET /in\x00fo HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"NUL in a header":       {"GET /info HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"%00 in path":           {"GET /info%00 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"%zz in path":           {"GET /chunk/%zz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"% at the end":          {"GET /info% HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"no Host on HTTP/1.1":   {"GET /info HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"two Hosts":             {"GET /info HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"OPTIONS *":             {"OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"authority-form GET":    {"GET evil.example:80 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"credentials in target": {"GET http://u:p@evil.example/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		"headers over the limit": {"GET /info HTTP/1.1\r\nHost: a\r\nX-Big: " + big + "\r\n\r\n",
			"HTTP/1.1 431 Request Header Fields Too Large"},
	} {
		t.Run(name, func(t *testing.T) {
			got, closed := p.raw(c.req)
			if status(got) != c.status || !closed {
				t.Fatalf("got %q (closed %v), want %s", got, closed, c.status)
			}
		})
	}
	if n := p.hits.Load(); n != 0 {
		t.Errorf("%d malformed requests reached the node", n)
	}
	if n := p.lim.Stats()["general"].Requests + p.lim.Stats()["chunk"].Requests; n != 0 {
		t.Errorf("%d malformed requests were decided", n)
	}
}

// TestNeverAnOpenProxy: whatever a request names — an absolute-form
// target, CONNECT, a Host naming the admin listener — it goes to the node
// or nowhere.
func TestNeverAnOpenProxy(t *testing.T) {
	p := newPlane(t, nil, nil)
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer adminLn.Close()
	go func() { // an admin listener that must never be reached
		for {
			c, err := adminLn.Accept()
			if err != nil {
				return
			}
			t.Errorf("the admin listener was reached")
			c.Close()
		}
	}()

	got, closed := p.raw("CONNECT " + adminLn.Addr().String() + " HTTP/1.1\r\nHost: " + adminLn.Addr().String() + "\r\n\r\n")
	if status(got) != "HTTP/1.1 405 Method Not Allowed" || !closed {
		t.Fatalf("CONNECT: %q (closed %v), want 405 and closed", got, closed)
	}
	if p.hits.Load() != 0 {
		t.Fatal("CONNECT reached the node")
	}

	for _, c := range []struct{ target, host, uri, nodeHost string }{
		{"http://" + adminLn.Addr().String() + "/api/v1/limiter?x=1", "a", "/api/v1/limiter?x=1", adminLn.Addr().String()},
		{"HTTPS://evil.example:8443", "a", "/", "evil.example:8443"},
		{"http://evil.example?q=1", "a", "/?q=1", "evil.example"},
		{"/info", adminLn.Addr().String(), "/info", adminLn.Addr().String()},
		{"//evil.example/x?y", "a", "//evil.example/x?y", "a"},
	} {
		got, _ := p.raw("GET " + c.target + " HTTP/1.1\r\nHost: " + c.host + "\r\nConnection: close\r\n\r\n")
		if status(got) != "HTTP/1.1 200 OK" || !strings.HasSuffix(got, "from the node") {
			t.Fatalf("GET %s (Host %s): %q, want the node's answer", c.target, c.host, got)
		}
		// The authority of an absolute-form target is the Host (RFC 9112
		// §3.2.2), as net/http took it.
		if s := p.seen(); s.uri != c.uri || s.host != c.nodeHost {
			t.Errorf("GET %s (Host %s): the node got %s with Host %s, want %s with Host %s",
				c.target, c.host, s.uri, s.host, c.uri, c.nodeHost)
		}
	}
}

// TestDotSegmentsClassifiedRaw: "." and ".." are segments like any other,
// as Arweave's router takes them; the node gets the path as sent.
func TestDotSegmentsClassifiedRaw(t *testing.T) {
	p := newPlane(t, nil, nil)
	for _, c := range []struct{ path, policy string }{
		{"/chunk/../info", `"chunk";q=6000;w=30, "chunk-window";q=100;w=1`},
		{"/info/../chunk/1", `"general";q=450;w=30`},
		{"/./chunk/1", `"general";q=450;w=30`},
		{"/%63hunk/abc", `"chunk";q=6000;w=30, "chunk-window";q=100;w=1`}, // decoded, as net/http's URL.Path
		{"//chunk//1", `"chunk";q=6000;w=30, "chunk-window";q=100;w=1`},   // empty segments dropped (docs/limiting.md)
	} {
		got, _ := p.raw("GET " + c.path + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		resp, _ := readResponse(t, bufio.NewReader(strings.NewReader(got)), "GET")
		if pol := resp.Header.Get("RateLimit-Policy"); resp.StatusCode != 200 || pol != c.policy {
			t.Errorf("GET %s: %d, RateLimit-Policy %q, want %q", c.path, resp.StatusCode, pol, c.policy)
		}
		if s := p.seen(); s.uri != c.path {
			t.Errorf("GET %s: the node got %s", c.path, s.uri)
		}
	}
}

// TestHTTP2PrefaceRefused: with server.http2 off, a client that opens
// with the HTTP/2 preface (prior knowledge, as newer Arweave nodes try
// first) gets an HTTP/1.1 400 and a closed connection at once, and then
// talks HTTP/1.1.
func TestHTTP2PrefaceRefused(t *testing.T) {
	p := newPlane(t, nil, func(o *proxy.Options) { o.HTTP2.Off = true })
	settings := "\x00\x00\x00\x04\x00\x00\x00\x00\x00" // an empty SETTINGS frame
	got, closed := p.raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings)
	if status(got) != "HTTP/1.1 400 Bad Request" || !closed {
		t.Fatalf("preface: %q (closed %v)", got, closed)
	}
	// Go's own prior-knowledge client fails at once, without waiting for
	// a timeout…
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{Protocols: &protos}, Timeout: 30 * time.Second}
	resp, err := h2.Get(p.base + "/info")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("an HTTP/2 client got %s", resp.Status)
	}
	// …and HTTP/1.1 works.
	resp, err = http.Get(p.base + "/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || p.hits.Load() != 1 {
		t.Fatalf("HTTP/1.1 after the refusal: %s, %d at the node", resp.Status, p.hits.Load())
	}
}
