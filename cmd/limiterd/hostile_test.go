package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// route is one of the admin listener's routes: a method and a pattern.
type route struct{ method, pattern string }

// adminRoutes walks the admin listener's router: every route it has, so
// that a route added later is covered by the tests here without a word.
func (d *daemon) adminRoutes(t *testing.T) []route {
	t.Helper()
	d.mu.Lock()
	srv := d.srv
	d.mu.Unlock()
	mux, ok := srv.AdminHandler().(chi.Routes)
	if !ok {
		t.Fatalf("the admin handler is a %T, not a chi router", srv.AdminHandler())
	}
	var routes []route
	err := chi.Walk(mux, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, route{method, pattern})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) < 40 {
		t.Fatalf("only %d admin routes walked: %v", len(routes), routes)
	}
	slices.SortFunc(routes, func(a, b route) int { return strings.Compare(a.pattern+a.method, b.pattern+b.method) })
	return routes
}

// concrete fills a route pattern's parameters with values that exist.
func concrete(pattern string) string {
	p := strings.ReplaceAll(pattern, "{group}", "general")
	p = strings.ReplaceAll(p, "/*", "/127.0.0.1")
	return p
}

// rawExchange writes req on a new connection to addr and reads until the
// other end closes it or wait passes (closed is then false).
func rawExchange(t *testing.T, addr, req string, wait time.Duration) (got string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(c)
	var ne net.Error
	return string(b), !(errors.As(err, &ne) && ne.Timeout())
}

func addrOf(base string) string { return strings.TrimPrefix(base, "http://") }

// hugeBody sends a request with a body announced (Content-Length) or
// chunked at 64 MiB, of which it writes at most 1 MiB, and returns the
// answer's status and body: an answer proves the body was not read whole.
func hugeBody(t *testing.T, addr, method, path string, hdr string, chunked bool) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	framing := "Content-Length: 67108864\r\n"
	if chunked {
		framing = "Transfer-Encoding: chunked\r\n"
	}
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: a\r\n%sContent-Type: application/x-www-form-urlencoded\r\n%s\r\n", method, path, hdr, framing)
	go func() {
		chunk := strings.Repeat("a", 64<<10)
		if chunked {
			chunk = fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk)
		}
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		for range 16 {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufioReader(c), &http.Request{Method: method})
	if err != nil {
		t.Errorf("%s %s: no answer before the body was sent whole: %v", method, path, err)
		return 0, ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestHugeBodiesOnEveryAdminRoute: a body of 64 MiB, announced or chunked,
// on every route of the admin listener (walked from its router) and the
// login form, is refused with 413 or 400 and a message that says why,
// before it is read whole.
func TestHugeBodiesOnEveryAdminRoute(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	addr := addrOf(d.AdminURL())
	for _, r := range d.adminRoutes(t) {
		for _, chunked := range []bool{false, true} {
			name := fmt.Sprintf("%s %s chunked=%v", r.method, r.pattern, chunked)
			code, body := hugeBody(t, addr, r.method, concrete(r.pattern), "Authorization: Bearer test-token\r\n", chunked)
			if code != 413 && code != 400 {
				t.Errorf("%s: %d %q, want 413 or 400", name, code, body)
				continue
			}
			if r.method != "HEAD" && !strings.Contains(body, "the body is larger than 65536 bytes") && !strings.Contains(body, "The form is larger than 8 KiB.") {
				t.Errorf("%s: %d %q, want a message saying the body is too large", name, code, body)
			}
		}
	}
	d.noPanic(t)
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// recordingNode is a node that answers every request with its own mark
// (X-From-Node) and records the method and target of each.
type recordingNode struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecordingNode(t *testing.T) *recordingNode {
	n := &recordingNode{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.mu.Lock()
		n.seen = append(n.seen, r.Method+" "+r.RequestURI)
		n.mu.Unlock()
		w.Header().Set("X-From-Node", "1")
		io.WriteString(w, "from the node")
	}))
	t.Cleanup(n.Close)
	return n
}

func (n *recordingNode) last() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.seen) == 0 {
		return ""
	}
	return n.seen[len(n.seen)-1]
}

func (n *recordingNode) saw(target string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.seen {
		if strings.HasSuffix(s, " "+target) {
			return true
		}
	}
	return false
}

// TestPublicNeverServesAdminRoutes: every route of the admin listener
// (walked from its router), asked of the public listener with the admin
// token, is proxied to the node as an ordinary path, never answered by
// limiterd's admin handler.
func TestPublicNeverServesAdminRoutes(t *testing.T) {
	node := newRecordingNode(t)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(node.URL, dir) })
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, r := range d.adminRoutes(t) {
		if r.method == http.MethodConnect { // never proxied: 405 (TestNeverAnOpenProxy)
			continue
		}
		path := concrete(r.pattern)
		req, _ := http.NewRequest(r.method, d.PublicURL()+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-From-Node") != "1" || (r.method != "HEAD" && string(b) != "from the node") {
			t.Errorf("%s %s on the public listener: %d %q, want the node's answer", r.method, path, resp.StatusCode, b)
		}
		if got, want := node.last(), r.method+" "+path; got != want {
			t.Errorf("the node got %q, want %q", got, want)
		}
	}
	d.noPanic(t)
}

// TestAdminPathTricks: spellings of a token-protected route that a
// router might read differently from the token check (dot segments,
// doubled or encoded slashes, case, the static files' prefix) never
// answer without the token; paths with NUL, invalid UTF-8 or ".." get a
// clear 4xx and never a panic.
func TestAdminPathTricks(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	addr := addrOf(d.AdminURL())
	for _, target := range []string{
		"/api/v1/groups", "/api/v1/./groups", "/api/v1/x/../groups", "//api/v1/groups", "/api/v1//groups",
		"/api/v1/groups/", "/API/V1/GROUPS", "/api/v1/%67roups", "/api/v1%2fgroups", "/api/v1/groups%00",
		"/api/v1/groups;x", "/static/../api/v1/groups", "/static/..%2f..%2fapi/v1/groups", "/api/v1/peers/..%2f..%2fgroups",
		"/api/v1/backup", "/api/v1/./backup", "/static/%2e%2e/api/v1/backup", "/metrics/../api/v1/backup",
		"/groups", "/./groups", "//groups", "/static/../groups", "/login/../groups",
	} {
		got, _ := rawExchange(t, addr, "GET "+target+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		st := status(got)
		code := 0
		fmt.Sscanf(st, "HTTP/1.1 %d", &code)
		if code < 300 || code >= 500 {
			t.Errorf("GET %s without a token: %q, want a redirect or a 4xx", target, st)
		}
		if code >= 300 && code < 400 && !strings.Contains(got, "\r\nLocation: /login") && !strings.Contains(got, "\r\nLocation: /api/") &&
			!strings.Contains(got, "\r\nLocation: /groups") {
			t.Errorf("GET %s without a token: redirected elsewhere: %q", target, got)
		}
	}
	for _, target := range []string{"/api/v1/\xff\xfe", "/\xc0\xaf", "/api/v1/groups/%ff", "/api/v1/peers/%00", "/a%00b",
		"/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/go.mod", "/static/..\\..\\go.mod", "/api/v1/peers/\x00"} {
		got, _ := rawExchange(t, addr, "GET "+target+" HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer test-token\r\nConnection: close\r\n\r\n", 5*time.Second)
		code := 0
		fmt.Sscanf(status(got), "HTTP/1.1 %d", &code)
		if code < 400 || code >= 500 {
			t.Errorf("GET %q: %q, want a 4xx", target, status(got))
		}
		if strings.Contains(got, "module github.com") || strings.Contains(got, "root:") {
			t.Errorf("GET %q served a file outside the static assets", target)
		}
	}
	// Headers with NUL, invalid UTF-8 or a bare LF on the admin listener.
	for _, h := range []string{"X-A: a\x00b", "X-A: \xff\xfe", "X-A: a\nX-B: b", "X-A: a\r\n b"} {
		got, _ := rawExchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: a\r\n"+h+"\r\nConnection: close\r\n\r\n", 5*time.Second)
		if st := status(got); st != "HTTP/1.1 400 Bad Request" && st != "HTTP/1.1 200 OK" {
			t.Errorf("header %q: %q, want 400 (or 200 for a value net/http accepts)", h, st)
		}
	}
	d.noPanic(t)
}

// status returns the status line of a raw answer.
func status(answer string) string {
	line, _, _ := strings.Cut(answer, "\r\n")
	return line
}
