package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
)

// admin.max_conns on a real listener: at the cap a new connection takes
// the slot of the keep-alive connection idle the longest (closed), and
// with every connection in a request it is answered 503 and closed; the
// counts come back to 0 once the clients leave.
func TestAdminMaxConns(t *testing.T) {
	_, s := webtest.NewDashWith(t, nil, func(o *web.Options) { o.MaxConns = 2 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer()
	go hs.Serve(s.Listener(ln))
	defer hs.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(webtest.NewOps(t).Lim, nil, nil, s.DaemonMetrics))
	counts := func(open, refused, idleClosed string) {
		t.Helper()
		want := `# HELP limiterd_admin_connections Connections open to the admin listener (at most admin.max_conns).
# TYPE limiterd_admin_connections gauge
limiterd_admin_connections ` + open + `
# HELP limiterd_admin_connections_refused_total Connections to the admin listener answered 503 and closed: admin.max_conns were open and none idle.
# TYPE limiterd_admin_connections_refused_total counter
limiterd_admin_connections_refused_total ` + refused + `
# HELP limiterd_admin_idle_connections_closed_total Idle keep-alive connections to the admin listener closed to make room for a new one at admin.max_conns.
# TYPE limiterd_admin_idle_connections_closed_total counter
limiterd_admin_idle_connections_closed_total ` + idleClosed + "\n"
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err = testutil.GatherAndCompare(reg, strings.NewReader(want), "limiterd_admin_connections",
				"limiterd_admin_connections_refused_total", "limiterd_admin_idle_connections_closed_total"); err == nil {
				return
			}
		}
		t.Fatal(err)
	}
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	healthz := func(c net.Conn, r *bufio.Reader) int {
		t.Helper()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// Two keep-alive connections, idle after a request each: the first
	// has been idle the longest.
	c1, r1 := dial()
	if code := healthz(c1, r1); code != 200 {
		t.Fatalf("first connection: %d", code)
	}
	time.Sleep(20 * time.Millisecond)
	c2, r2 := dial()
	if code := healthz(c2, r2); code != 200 {
		t.Fatalf("second connection: %d", code)
	}
	counts("2", "0", "0")
	c3, r3 := dial()
	if code := healthz(c3, r3); code != 200 {
		t.Fatalf("a third connection at the cap, two idle: %d, want 200", code)
	}
	if _, err := r1.ReadByte(); err != io.EOF {
		t.Fatalf("the connection idle the longest is still open: %v", err)
	}
	if code := healthz(c2, r2); code != 200 {
		t.Fatalf("the other idle connection: %d", code)
	}
	counts("2", "0", "1")

	// Both open connections in the middle of a request (the login form's
	// body half sent; net/http counts a connection still reading its
	// header as idle, so a slowloris is displaced too): a new one is
	// answered 503 and closed.
	for _, c := range []net.Conn{c2, c3} {
		io.WriteString(c, "POST /login HTTP/1.1\r\nHost: admin\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken=")
	}
	time.Sleep(50 * time.Millisecond)
	c4, r4 := dial()
	resp, err := http.ReadResponse(r4, nil)
	if err != nil {
		t.Fatalf("a connection over the cap: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "admin.max_conns") || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a connection over the cap: %d %q", resp.StatusCode, body)
	}
	if _, err := r4.ReadByte(); err != io.EOF {
		t.Fatalf("the refused connection is still open: %v", err)
	}
	c4.Close()
	counts("2", "1", "1")
	c2.Close()
	c3.Close()
	counts("0", "1", "1")
}
