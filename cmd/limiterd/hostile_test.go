package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
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
			if r.method != "HEAD" && !strings.Contains(body, "the body is larger than") {
				t.Errorf("%s: %d %q, want a message saying the body is too large", name, code, body)
			}
		}
	}
	d.noPanic(t)
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
