package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSmugglingThroughDaemon: requests framed two ways, or in ways a node
// might read differently, each followed on the connection by a second
// request, are refused 400 with the connection closed by the public
// listener; the node never receives the second request. The framings the
// package tests (proxy's TestAmbiguousFramingRefused) cover are here
// again end to end, with more spellings. The admin listener refuses the
// same framings.
func TestSmugglingThroughDaemon(t *testing.T) {
	node := newRecordingNode(t)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(node.URL, dir) })
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	cases := map[string]string{
		"CL.TE":                  "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE.CL":                  "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled),
		"two equal CLs":          "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n" + smuggled,
		"two CLs":                "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\n" + smuggled,
		"CL with a sign":         "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n" + smuggled,
		"CL in hex":              "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0x0\r\n\r\n" + smuggled,
		"CL two numbers":         "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0 41\r\n\r\n" + smuggled,
		"TE obs-fold":            "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: 41\r\n\r\n" + smuggled,
		"TE folded after CL":     "POST /tx HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE space before colon":  "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE tab before colon":    "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE xchunked":            "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE chunked, chunked":    "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE chunked then other":  "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" + smuggled,
		"TE vertical tab":        "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE NUL":                 "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\x00\r\n\r\n0\r\n\r\n" + smuggled,
		"bare LF line ends":      "POST /tx HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nContent-Length: 3\n\n0\n\n" + smuggled,
		"bare LF in a field":     fmt.Sprintf("GET /info HTTP/1.1\r\nHost: x\r\nX-A: a\nContent-Length: %d\r\n\r\n%s", len(smuggled), smuggled),
		"chunk size overflow":    "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\n" + smuggled,
		"chunk size negative":    "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n" + smuggled,
		"chunk without CRLF":     "POST /tx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n" + smuggled,
		"request line obs-fold":  "GET /info HTTP/1.1\r\n Host: x\r\n\r\n" + smuggled,
		"NUL in the method":      "GE\x00T /info HTTP/1.1\r\nHost: x\r\n\r\n" + smuggled,
		"HTTP/1.1 without Host":  "GET /info HTTP/1.1\r\n\r\n" + smuggled,
		"absolute and Host both": "GET http://a/info HTTP/1.1\r\nHost: b\r\nHost: c\r\n\r\n" + smuggled,
	}
	// A head with a bare LF announcing a body longer than what follows:
	// refused once the body is in (fasthttp reads up to 8 KiB of it before
	// the handler checks the head), so here 408 after read_header_timeout.
	cases["bare LF, body short"] = "GET /info HTTP/1.1\r\nHost: x\r\nX-A: a\nContent-Length: 100\r\n\r\n" + smuggled
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			got, closed := rawExchange(t, addrOf(d.PublicURL()), req, 5*time.Second)
			want := "HTTP/1.1 400 "
			if name == "bare LF, body short" {
				want = "HTTP/1.1 408 "
			}
			if st := status(got); !strings.HasPrefix(st, want) || !closed {
				t.Errorf("public: %q (closed %v), want %s and closed", got, closed, want)
			}
			if n := strings.Count(got, "HTTP/1.1 "); n != 1 {
				t.Errorf("public: %d answers on one connection", n)
			}
		})
	}
	if node.saw("/smuggled") {
		t.Errorf("the node received a smuggled request: %v", node.seen)
	}
	// The admin listener (net/http) refuses what net/http refuses: two
	// different Content-Lengths, obs-fold, a bad chunk size, NUL (400), a
	// coding other than chunked (501); each closes the connection. (It
	// takes CL+TE by the Transfer-Encoding, as RFC 9112 §6.3 lets a
	// server, and keeps the connection: it is no proxy, there is no node
	// behind it to desynchronize; docs/reliability.md.)
	for _, name := range []string{"two CLs", "TE obs-fold", "TE xchunked", "chunk size overflow", "NUL in the method"} {
		req := strings.ReplaceAll(cases[name], "/tx", "/api/v1/check")
		req = strings.Replace(req, "Host: x\r\n", "Host: x\r\nAuthorization: Bearer test-token\r\n", 1)
		got, closed := rawExchange(t, addrOf(d.AdminURL()), req, 5*time.Second)
		if st := status(got); !strings.HasPrefix(st, "HTTP/1.1 400 ") && !strings.HasPrefix(st, "HTTP/1.1 501 ") || !closed ||
			strings.Count(got, "HTTP/1.1 ") != 1 {
			t.Errorf("admin, %s: %q (closed %v), want one 400 (501 for an unknown coding) and closed", name, got, closed)
		}
	}
	// Pipelined honestly: both answered, both at the node.
	got, _ := rawExchange(t, addrOf(d.PublicURL()), "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
	if n := strings.Count(got, "HTTP/1.1 200 OK"); n != 2 || !node.saw("/a") || !node.saw("/b") {
		t.Errorf("two honest pipelined requests: %d answers: %q", n, got)
	}
	d.noPanic(t)
}

// TestHostileTargetsPublic: request targets with invalid UTF-8, NUL
// (raw or encoded), dot segments or backslashes: a clear 400 for what
// cannot be proxied safely, the raw path as sent for what can (the node
// decides), never a panic, the limiter's slots all released.
func TestHostileTargetsPublic(t *testing.T) {
	node := newRecordingNode(t)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(node.URL, dir) })
	for _, c := range []struct {
		target string
		want   int // 0: proxied as sent
	}{
		{"/\xff\xfe", 0},
		{"/chunk/\xc0\xaf", 0},
		{"/%ff%fe", 0},
		{"/tx/%c0%af", 0},
		{"/a%00b", 400},
		{"/a\x00b", 400},
		{"/%zz", 400},
		{"/../../etc/passwd", 0},
		{"/chunk/..%2f..%2finfo", 0},
		{"/a\\..\\b", 0},
		{"/a\tb", 400},
		{"*", 400},
	} {
		got, _ := rawExchange(t, addrOf(d.PublicURL()), "GET "+c.target+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		st := status(got)
		switch {
		case c.want == 0 && (st != "HTTP/1.1 200 OK" || node.last() != "GET "+c.target):
			t.Errorf("GET %q: %q, the node got %q; want it proxied as sent", c.target, st, node.last())
		case c.want != 0 && !strings.HasPrefix(st, fmt.Sprintf("HTTP/1.1 %d ", c.want)):
			t.Errorf("GET %q: %q, want %d", c.target, st, c.want)
		}
	}
	// Headers: invalid UTF-8 passes (a field value is octets), NUL and
	// control characters do not.
	for _, c := range []struct {
		field string
		want  int
	}{{"X-A: \xff\xfe", http.StatusOK}, {"X-A: a\x00b", 400}, {"X-A: a\x01b", 400}, {"X\xffA: a", 400}, {"X A: a", 400}} {
		got, _ := rawExchange(t, addrOf(d.PublicURL()), "GET /info HTTP/1.1\r\nHost: a\r\n"+c.field+"\r\nConnection: close\r\n\r\n", 5*time.Second)
		if st := status(got); !strings.HasPrefix(st, fmt.Sprintf("HTTP/1.1 %d ", c.want)) {
			t.Errorf("field %q: %q, want %d", c.field, st, c.want)
		}
	}
	// Released once each exchange's node side ended, which may be just
	// after the client read its answer.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, p := d.inflightAll()
		if m == 0 && p == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight after: %v (metric) %v (peer API)", m, p)
		}
	}
	d.noPanic(t)
}

// TestMalformedXForwardedFor extends TestForwardedBypassClosed to
// X-Forwarded-For: behind a trusted proxy on 127.0.0.1 (exempt by
// default) that writes X-Forwarded-For, hops that name no address —
// garbage, invalid UTF-8, zones, numbers that are not
// addresses, ports out of range, a thousand elements — are one shared,
// limited bucket: never the exempt proxy, never a fresh bucket per text.
func TestMalformedXForwardedFor(t *testing.T) {
	up, hits := countingUpstream(t, nil)
	d := startDaemonWith(t, func(dataDir string) string {
		return proxiedConfig(up.URL, dataDir, `forwarded_header = "x-forwarded-for"`)
	})
	bad := []string{
		"unknown", "garbage", "_hidden", "1.2.3", "999.1.1.1", "1.2.3.4.5", "127.1", "2130706433", "0x7f.0.0.1",
		"localhost", "-1.2.3.4", "1.2.3.4/24", "1.2.3.4:99999", "[::1]:80x", "::ffff:zz", "\xff\xfe", "1.2.3.4%eth0",
		"for=1.2.3.4", "1.2.3.4;", `"1.2.3.4"`, "198.51.100.1 198.51.100.2", "203.0.113.9, nonsense",
		strings.Repeat("198.51.100.3, ", 1000) + "x", "12345678901234567890", "[1.2.3.4]",
	}
	rejected := 0
	for _, v := range bad {
		resp := d.get("/info", "X-Forwarded-For", v)
		switch resp.StatusCode {
		case 429:
			rejected++
		case 200:
		default:
			t.Errorf("X-Forwarded-For %.40q: %d", v, resp.StatusCode)
		}
	}
	// 25 requests, one bucket of 20.
	if len(bad) != 25 || rejected != 5 {
		t.Errorf("%d malformed hops: %d rejected, want 5 (one shared bucket of 20)", len(bad), rejected)
	}
	if got := hits.Load(); got != 20 {
		t.Errorf("the node got %d requests, want 20", got)
	}
	_, v := d.admin("GET", "/api/v1/peers?limit=100", "")
	if peers := v["peers"].([]any); len(peers) != 1 || peers[0].(map[string]any)["peer"] == "127.0.0.1" {
		t.Errorf("tracked peers %v, want the one malformed bucket", peers)
	}
	d.noPanic(t)
}
