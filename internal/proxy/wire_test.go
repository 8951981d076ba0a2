package proxy_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
)

// wire sends req on a new connection to base and returns the answer's
// status line, its fields sorted (Date, which changes, and Connection,
// which says how the connection goes on, aside) and its body.
func wire(t *testing.T, base, req string) (statusLine string, fields []string, body string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	head, body, _ := strings.Cut(string(b), "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "Date: ") && !strings.HasPrefix(l, "Connection: ") {
			fields = append(fields, l)
		}
	}
	slices.Sort(fields)
	return lines[0], fields, body
}

// TestRepliesByteForByte: the replies of docs/replies.md are those the net/http
// proxy wrote, field by field and byte by byte (captured from it before
// the move to fasthttp; fields sorted, as net/http writes them): the 429
// in text and JSON, 403, 502, 503, 504.
func TestRepliesByteForByte(t *testing.T) {
	const get = "GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	const getJSON = "GET /info HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
	// The IETF pair as the net/http proxy wrote it, and the four Arweave
	// 2.9.7 fields that server.ratelimit_headers = "both" (the default)
	// adds, lower-case as the node writes them.
	rl := []string{`Ratelimit: "general";r=0;t=30`, `Ratelimit-Policy: "general";q=1;w=30`,
		`ratelimit-limit: 1, 1;policy="general usage", 150;policy="general concurrency" `,
		`ratelimit-remaining: 0`, `ratelimit-reset: 30`, `ratelimit-reset-amount: 1`}
	type reply struct {
		status string
		fields []string
		body   string
	}
	check := func(name, base, req string, want reply) {
		t.Helper()
		st, fields, body := wire(t, base, req)
		slices.Sort(want.fields)
		if st != want.status || !slices.Equal(fields, want.fields) || body != want.body {
			t.Errorf("%s:\n got %s %q %q\nwant %s %q %q", name, st, fields, body, want.status, want.fields, want.body)
		}
	}

	r := newRig(t, 1, nil)
	wire(t, r.base, get) // the one token
	check("429", r.base, get, reply{"HTTP/1.1 429 Too Many Requests", append([]string{
		"Cache-Control: no-store", "Content-Length: 17", "Content-Type: text/plain; charset=utf-8", "Retry-After: 30"}, rl...),
		"Too Many Requests"})
	check("429 JSON", r.base, getJSON, reply{"HTTP/1.1 429 Too Many Requests", append([]string{
		"Cache-Control: no-store", "Content-Length: 87", "Content-Type: application/json", "Retry-After: 30"}, rl...),
		`{"error":"too_many_requests","group":"general","reason":"rate_limit","retry_after":30}` + "\n"})

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	r = newRig(t, 1, func(o *proxy.Options) { o.Upstream, _ = url.Parse(dead) })
	check("502", r.base, get, reply{"HTTP/1.1 502 Bad Gateway", append([]string{
		"Content-Length: 12", "Content-Type: text/plain; charset=utf-8", "X-Content-Type-Options: nosniff"}, rl...),
		"Bad Gateway\n"})

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	r = newRig(t, 1, func(o *proxy.Options) {
		o.Upstream, _ = url.Parse(slow.URL)
		o.UpstreamHeaderTimeout = 50 * time.Millisecond
	})
	check("504", r.base, get, reply{"HTTP/1.1 504 Gateway Timeout", append([]string{
		"Content-Length: 16", "Content-Type: text/plain; charset=utf-8", "X-Content-Type-Options: nosniff"}, rl...),
		"Gateway Timeout\n"})

	r = newRigOn(t, downBackend{}, 1, nil)
	check("503", r.base, get, reply{"HTTP/1.1 503 Service Unavailable", []string{
		"Content-Length: 20", "Content-Type: text/plain; charset=utf-8", "Retry-After: 1", "X-Content-Type-Options: nosniff"},
		"Service Unavailable\n"})

	p := newPlane(t, nil, nil, func(c *limiter.Config) { c.Deny = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	check("403", p.base, get, reply{"HTTP/1.1 403 Forbidden", []string{
		"Content-Length: 10", "Content-Type: text/plain; charset=utf-8", "X-Content-Type-Options: nosniff"},
		"Forbidden\n"})
	if p.hits.Load() != 0 {
		t.Error("a denied request reached the node")
	}
}
