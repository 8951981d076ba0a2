package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
)

// lockedBuffer is a log's output, written by the listener's goroutines and
// read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// lines returns the JSON lines written so far.
func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(b.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// get sends GET target on a new connection and returns the status.
func (p *plane) get(target string) int {
	p.t.Helper()
	c := p.dial()
	if _, err := c.Write([]byte("GET " + target + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
		p.t.Fatal(err)
	}
	resp, _ := readResponse(p.t, bufio.NewReader(c), "GET")
	return resp.StatusCode
}

// exchanges returns the count and the sum of the durations the plane's
// Handler recorded for group g and status class c ("2xx"…).
func exchanges(h *proxy.Handler, g limiter.GroupID, class string) (uint64, time.Duration) {
	for i, name := range insight.StatusClasses {
		if name == class {
			_, n, sum := h.Exchanges.Histogram(g, i).Snapshot()
			return n, time.Duration(sum * float64(time.Second))
		}
	}
	panic("no status class " + class)
}

// TestExchangesTimed: the public listener times every exchange it answers
// (limiterd_proxy_request_duration_seconds) from the request to the end of
// the answer's body, per group and status class — 429s, exempt paths and
// the node's failures included — one whose client went away while the node
// thought once the node has answered, and none refused before it was
// classified.
func TestExchangesTimed(t *testing.T) {
	// Ahead of the limiter's start (time.Now() in newPlane), in its first tick.
	clock := limitertest.NewClock(time.Now().Add(time.Minute))
	release := make(chan struct{})
	waiting := make(chan struct{}, 1)
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/info", "/health":
			clock.Add(2 * time.Second)
			w.Write([]byte("ok"))
		case "/chunk/big":
			// The head first, then the clock moves, then the body: the
			// time counts until the body's end.
			w.Header().Set("Content-Length", "200000")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			clock.Add(5 * time.Second)
			w.Write(make([]byte, 200000))
		case "/chunk/wait":
			waiting <- struct{}{}
			<-release
			w.Write([]byte("late"))
		case "/chunk/reset":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}
	}, func(o *proxy.Options) { o.Now = clock.Now }, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction, g.LeakyTickInterval = 1, 1, 3_600_000
		c.Groups["general"] = g
		c.ExemptPaths = []string{"/health"}
	})
	// After newPlane's: cleanups run last first, and the node's Close
	// waits for a held request, which only this ends.
	t.Cleanup(func() { close(release) })
	general, _ := p.lim.GroupID("general")
	chunk, _ := p.lim.GroupID("chunk")

	for _, c := range []struct {
		target string
		status int
	}{{"/info", 200}, {"/info", 429}, {"/health", 200}, {"/chunk/big", 200}, {"/chunk/reset", 502}} {
		if s := p.get(c.target); s != c.status {
			t.Fatalf("GET %s: %d, want %d", c.target, s, c.status)
		}
	}
	// A client that goes away while the node thinks: the exchange ends
	// when the node answers.
	conn := p.dial()
	conn.Write([]byte("GET /chunk/wait HTTP/1.1\r\nHost: a\r\n\r\n"))
	<-waiting
	conn.Close()
	release <- struct{}{}
	p.settled()
	// Refused before it was classified.
	if got, _ := p.raw("GET /info HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Fatalf("ambiguous framing: %q", got)
	}

	for _, w := range []struct {
		g     limiter.GroupID
		class string
		n     uint64
		sum   time.Duration
	}{
		{general, "2xx", 1, 2 * time.Second},
		{general, "4xx", 1, 0},
		{limiter.ExemptPathGroup, "2xx", 1, 2 * time.Second},
		{chunk, "2xx", 2, 5 * time.Second},
		{chunk, "5xx", 1, 0},
	} {
		// The relay's end is the client's read of the last byte, which
		// may come before the listener's goroutine has recorded it.
		eventually(t, "the exchange recorded", func() bool { n, _ := exchanges(p.h, w.g, w.class); return n >= w.n })
		if n, sum := exchanges(p.h, w.g, w.class); n != w.n || sum != w.sum {
			t.Errorf("group %d %s: %d exchanges taking %v, want %d taking %v", w.g, w.class, n, sum, w.n, w.sum)
		}
	}
	var total uint64
	for g := range limiter.GroupID(limiter.MaxGroups + 1) {
		for _, c := range insight.StatusClasses {
			n, _ := exchanges(p.h, g, c)
			total += n
		}
	}
	if total != 6 {
		t.Errorf("%d exchanges recorded, want the 6 answered", total)
	}
}

// TestRejectLogHooks: the public listener reports its refusals (429 by
// reason, 403 of the deny list, on an exempt path too) and the node's
// failures (502) to the RejectLog, as the check API and auth_request do.
func TestRejectLogHooks(t *testing.T) {
	var out lockedBuffer
	var p *plane
	rl := insight.NewRejectLog(slog.New(slog.NewJSONHandler(&out, nil)), insight.RejectLogOptions{
		Mode: insight.RejectLogAll, GroupName: func(g limiter.GroupID) string { return p.lim.GroupName(g) },
	})
	p = newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}, func(o *proxy.Options) { o.RejectLog = rl }, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction, g.LeakyTickInterval = 1, 1, 3_600_000
		c.Groups["general"] = g
		c.ExemptPaths = []string{"/health"}
	})
	for _, want := range []int{502, 429} {
		if s := p.get("/info"); s != want {
			t.Fatalf("GET /info: %d, want %d", s, want)
		}
	}
	cfg := p.lim.Config()
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if _, err := p.lim.Apply(time.Now(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/info", "/health"} {
		if s := p.get(target); s != 403 {
			t.Fatalf("GET %s from a denied peer: %d", target, s)
		}
	}

	type line struct{ msg, group, count string }
	var got []line
	for _, l := range out.lines(t) {
		x := line{msg: l["msg"].(string)}
		x.group, _ = l["group"].(string)
		for _, k := range []string{"rate_limit", "denied", "kind"} {
			if v, ok := l[k]; ok {
				x.count = k + "=" + strings.TrimSuffix(jsonText(v), ".0")
			}
		}
		got = append(got, x)
	}
	want := []line{
		{"upstream error", "", "kind=\"unreachable\""},
		{"rejected", "general", "rate_limit=1"},
		{"denied", "general", "denied=1"},
		{"denied", "exempt_path", "denied=1"},
	}
	if len(got) != len(want) {
		t.Fatalf("log lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
