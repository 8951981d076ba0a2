package proxy_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
)

// TestHopByHopRemovedBothWays: the hop-by-hop fields, and those a
// Connection field nominates (in any case), go neither up nor down; the
// client's forwarding fields are replaced by the address limiterd saw;
// Host is passed on as sent.
func TestHopByHopRemovedBothWays(t *testing.T) {
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Connection", "X-Resp-Drop, keep-alive")
		h.Set("X-Resp-Drop", "1")
		h.Set("Keep-Alive", "timeout=9")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("Upgrade", "h2c")
		h.Set("X-Resp-Keep", "1")
		h.Set("Set-Cookie", "a=1; Path=/")
		h.Add("Set-Cookie", "b=2")
		io.WriteString(w, "ok")
	}, nil)
	got, _ := p.raw("GET /info HTTP/1.1\r\nHost: Node.Example:1984\r\n" +
		"connection: close, x-drop, X-Drop-Too\r\nX-Drop: 1\r\nx-drop-too: 2\r\nKeep-Alive: timeout=5\r\n" +
		"TE: trailers\r\nUpgrade: websocket\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n" +
		"X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nForwarded: for=6.6.6.6\r\n" +
		"Trailer: X-T\r\nX-Keep: yes\r\nCookie: a=1;b=2\r\nUser-Agent: arweave\r\n\r\n")
	s := p.seen()
	for _, name := range []string{"X-Drop", "X-Drop-Too", "Keep-Alive", "Te", "Upgrade", "Proxy-Authorization",
		"Proxy-Connection", "Forwarded", "Trailer", "Expect", "Connection"} {
		if v, ok := s.header[name]; ok {
			t.Errorf("the node got %s: %q", name, v)
		}
	}
	for name, want := range map[string]string{
		"X-Keep": "yes", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "Node.Example:1984",
		"X-Forwarded-Proto": "http", "User-Agent": "arweave",
	} {
		if v := s.header.Values(name); len(v) != 1 || v[0] != want {
			t.Errorf("the node got %s %q, want %q", name, v, want)
		}
	}
	if s.host != "Node.Example:1984" {
		t.Errorf("the node got Host %q", s.host)
	}
	if c := s.header.Get("Cookie"); c != "a=1; b=2" && c != "a=1;b=2" {
		t.Errorf("the node got Cookie %q", c)
	}

	resp, body := readResponse(t, bufio.NewReader(strings.NewReader(got)), "GET")
	for _, name := range []string{"X-Resp-Drop", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "Connection"} {
		if v, ok := resp.Header[name]; ok {
			t.Errorf("the client got %s: %q", name, v)
		}
	}
	if resp.Header.Get("X-Resp-Keep") != "1" || body != "ok" || len(resp.Header.Values("Set-Cookie")) != 2 {
		t.Errorf("the client got %v %q", resp.Header, body)
	}
}

// TestHTTP10Clients: an HTTP/1.0 client gets answers it can read: a
// streamed answer of unknown length is delimited by closing the
// connection, never chunked; a request without Host reaches the node with
// the node's own; keep-alive works when asked for.
func TestHTTP10Clients(t *testing.T) {
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			for i := range 3 {
				fmt.Fprintf(w, "part %d;", i)
				w.(http.Flusher).Flush() // chunked on the node's side
			}
			return
		}
		io.WriteString(w, "fixed")
	}, nil)

	got, closed := p.raw("GET /stream HTTP/1.0\r\nHost: a\r\n\r\n")
	head, body, _ := strings.Cut(got, "\r\n\r\n")
	if status(got) != "HTTP/1.1 200 OK" || !closed || body != "part 0;part 1;part 2;" ||
		strings.Contains(strings.ToLower(head), "transfer-encoding") || !strings.Contains(head, "\r\nConnection: close") {
		t.Fatalf("a streamed answer to HTTP/1.0: %q (closed %v)", got, closed)
	}

	got, _ = p.raw("GET /info HTTP/1.0\r\n\r\n")
	if !strings.HasSuffix(got, "fixed") || p.seen().host != strings.TrimPrefix(p.node.URL, "http://") {
		t.Fatalf("HTTP/1.0 without Host: %q, the node got Host %q", got, p.seen().host)
	}

	c := p.dial()
	br := bufio.NewReader(c)
	for range 2 {
		io.WriteString(c, "GET /info HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if body != "fixed" || resp.Close {
			t.Fatalf("keep-alive HTTP/1.0: %q, close %v", body, resp.Close)
		}
	}
	p.settled()
}

// TestHEADAndBodiless: HEAD keeps the GET's Content-Length; 204 and 304
// have no body.
func TestHEADAndBodiless(t *testing.T) {
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.WriteHeader(304)
		default:
			w.Header().Set("Content-Length", "12345")
			if r.Method != "HEAD" {
				w.Write(make([]byte, 12345))
			}
		}
	}, nil)
	c := p.dial()
	br := bufio.NewReader(c)
	for _, x := range []struct {
		method, path string
		code         int
		length       int64
	}{{"HEAD", "/info", 200, 12345}, {"GET", "/204", 204, 0}, {"GET", "/304", 304, 0}, {"GET", "/info", 200, 12345}} {
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: a\r\n\r\n", x.method, x.path)
		resp, body := readResponse(t, br, x.method)
		if resp.StatusCode != x.code || (x.method == "HEAD" && resp.ContentLength != x.length) || int64(len(body)) != min(x.length, int64(len(body))) {
			t.Errorf("%s %s: %d, Content-Length %d, %d bytes", x.method, x.path, resp.StatusCode, resp.ContentLength, len(body))
		}
		if x.method == "GET" && int64(len(body)) != x.length {
			t.Errorf("%s %s: %d bytes, want %d", x.method, x.path, len(body), x.length)
		}
	}
	p.settled()
}

// pattern is a reader of n bytes of a repeating pattern (no memory).
type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	m := min(int64(len(b)), p.n-p.off)
	for i := range b[:m] {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += m
	return int(m), nil
}

func digest(r io.Reader) (int64, [32]byte) {
	h := sha256.New()
	n, _ := io.Copy(h, r)
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return n, d
}

// heapGrowth runs f and returns what the process allocated meanwhile.
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBodiesStream: a 64 MiB download and a 64 MiB upload (with
// Content-Length and chunked) pass whole, and the process (the node and
// the client in it too) allocates far less than either: nothing holds a
// body. LIMITERD_BIG_BODIES=1 makes the download 256 MiB (bench/proxy.sh
// measures the daemon's RSS during one).
func TestBodiesStream(t *testing.T) {
	const upl = 64 << 20
	down := int64(64 << 20)
	if os.Getenv("LIMITERD_BIG_BODIES") != "" {
		down = 256 << 20
	}
	var gotUp int64
	var upDigest [32]byte
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			gotUp, upDigest = digest(r.Body)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(down))
		io.CopyBuffer(w, &pattern{n: down}, make([]byte, 64<<10))
	}, func(o *proxy.Options) { o.MaxRequestBody = upl })
	_, wantDown := digest(&pattern{n: down})
	_, wantUp := digest(&pattern{n: upl})

	alloc := heapGrowth(func() {
		resp, err := http.Get(p.base + "/chunk/big")
		if err != nil {
			t.Fatal(err)
		}
		n, d := digest(resp.Body)
		resp.Body.Close()
		if n != down || d != wantDown {
			t.Fatalf("download: %d bytes, digest ok %v", n, d == wantDown)
		}
	})
	if alloc > 32<<20 {
		t.Errorf("a %d MiB download allocated %d MiB", down>>20, alloc>>20)
	}
	t.Logf("%d MiB download: %d KiB allocated", down>>20, alloc>>10)

	for _, chunked := range []bool{false, true} {
		gotUp = 0
		alloc := heapGrowth(func() {
			req, _ := http.NewRequest("POST", p.base+"/tx", &pattern{n: upl})
			if !chunked {
				req.ContentLength = upl
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || gotUp != upl || upDigest != wantUp {
				t.Fatalf("upload (chunked %v): %s, the node got %d bytes, digest ok %v", chunked, resp.Status, gotUp, upDigest == wantUp)
			}
		})
		if alloc > 16<<20 {
			t.Errorf("a 64 MiB upload (chunked %v) allocated %d MiB", chunked, alloc>>20)
		}
		t.Logf("64 MiB upload (chunked %v): %d KiB allocated", chunked, alloc>>10)
	}
	p.settled()
}

// TestBodyOverLimit: a body over max_request_body is a 413 the client
// reads (not a reset), whether announced (Content-Length, or Expect
// before sending it) or found out while streaming (chunked).
func TestBodyOverLimit(t *testing.T) {
	const limit = 1 << 20
	p := newPlane(t, nil, func(o *proxy.Options) { o.MaxRequestBody = limit })
	for _, c := range []struct {
		name    string
		length  int64
		chunked bool
		expect  bool
	}{
		{"Content-Length", 8 << 20, false, false},
		{"chunked", 8 << 20, true, false},
		{"Expect: 100-continue", 8 << 20, false, true},
	} {
		req, _ := http.NewRequest("POST", p.base+"/tx", &pattern{n: c.length})
		if !c.chunked {
			req.ContentLength = c.length
		}
		if c.expect {
			req.Header.Set("Expect", "100-continue")
		}
		resp, err := (&http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v, want a 413", c.name, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %s, want 413", c.name, resp.Status)
		}
	}
	// At the limit exactly, it passes.
	resp, err := http.Post(p.base+"/tx", "application/octet-stream", io.LimitReader(&pattern{n: limit}, limit))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || p.seen().body != limit {
		t.Errorf("a body at the limit: %s, the node got %d bytes", resp.Status, p.seen().body)
	}
	p.settled()
}
