package insight_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// logBuf is a JSON log whose lines a test reads back.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the lines written since the last take.
func (l *logBuf) take(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(&l.b)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	l.b.Reset()
	return out
}

func key(s string) peer.Key { return peer.KeyFromAddr(netip.MustParseAddr(s), 64) }

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func newRejectLog(buf *logBuf, mode insight.RejectLogMode, maxKeys int) *insight.RejectLog {
	names := map[limiter.GroupID]string{1: "general", 2: "chunk"}
	return insight.NewRejectLog(slog.New(slog.NewJSONHandler(buf, nil)), insight.RejectLogOptions{
		Mode: mode, MaxKeys: maxKeys, GroupName: func(g limiter.GroupID) string { return names[g] },
	})
}

func lineOf(msg string, kv ...any) map[string]any {
	m := map[string]any{"level": "INFO", "msg": msg}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func sameLines(t *testing.T, what string, got []map[string]any, want ...map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if len(want) == 0 {
		w = []byte("null")
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func TestRejectLogSampled(t *testing.T) {
	var buf logBuf
	l := newRejectLog(&buf, insight.RejectLogSampled, 0)
	a, b := key("203.0.113.66"), key("2001:db8:1::7")

	// The first refusal of a pair: a line at once.
	l.Rejected(t0, a, 1, limiter.ReasonRateLimit)
	sameLines(t, "first refusal", buf.take(t), lineOf("rejected", "peer", "203.0.113.66", "group", "general", "rate_limit", 1.0))

	// Within the minute: counted, not written; other pairs have their own.
	for i := range 100 {
		l.Rejected(t0.Add(time.Duration(i)*500*time.Millisecond), a, 1, limiter.ReasonRateLimit)
	}
	l.Rejected(t0.Add(time.Second), a, 1, limiter.ReasonConcurrency)
	l.Denied(t0.Add(2*time.Second), b, 2)
	l.Rejected(t0.Add(3*time.Second), a, 2, limiter.ReasonRateLimit)
	sameLines(t, "within the minute", buf.take(t),
		lineOf("denied", "peer", "2001:db8:1::/64", "group", "chunk", "denied", 1.0),
		lineOf("rejected", "peer", "203.0.113.66", "group", "chunk", "rate_limit", 1.0))

	// A minute after its line, the next refusal writes the counts since.
	l.Rejected(t0.Add(61*time.Second), a, 1, limiter.ReasonRateLimit)
	sameLines(t, "a minute later", buf.take(t), lineOf("rejected", "peer", "203.0.113.66", "group", "general",
		"rate_limit", 101.0, "concurrency", 1.0, "over", float64(61*time.Second)))

	// A pair that stopped: its counts come from a flush a minute after
	// its line; then, idle, it is forgotten.
	l.Rejected(t0.Add(62*time.Second), a, 1, limiter.ReasonRateLimit)
	l.Flush(t0.Add(90 * time.Second))
	sameLines(t, "flush before the minute", buf.take(t))
	l.Flush(t0.Add(125 * time.Second))
	sameLines(t, "flush after it", buf.take(t), lineOf("rejected", "peer", "203.0.113.66", "group", "general",
		"rate_limit", 1.0, "over", float64(64*time.Second)))
	// The other two pairs were idle for a minute: forgotten.
	if n := l.Tracked(); n != 1 {
		t.Errorf("%d pairs tracked, want 1", n)
	}
	l.Flush(t0.Add(10 * time.Minute))
	sameLines(t, "idle flush", buf.take(t))
	if n := l.Tracked(); n != 0 {
		t.Errorf("%d pairs tracked after they went idle, want 0", n)
	}
}

func TestRejectLogModes(t *testing.T) {
	var buf logBuf
	l := newRejectLog(&buf, insight.RejectLogOff, 0)
	a := key("192.0.2.1")
	for range 5 {
		l.Rejected(t0, a, 1, limiter.ReasonRateLimit)
		l.Denied(t0, a, 1)
	}
	l.Flush(t0.Add(time.Hour))
	sameLines(t, "off", buf.take(t))

	l.SetMode(insight.RejectLogAll)
	l.Rejected(t0, a, 1, limiter.ReasonConcurrency)
	l.Rejected(t0, a, 1, limiter.ReasonConcurrency)
	one := lineOf("rejected", "peer", "192.0.2.1", "group", "general", "concurrency", 1.0)
	sameLines(t, "all", buf.take(t), one, one)

	var nilLog *insight.RejectLog // what the proxy has when logging is not wired
	nilLog.Rejected(t0, a, 1, limiter.ReasonRateLimit)
	nilLog.UpstreamError(t0, false, nil)
	nilLog.Flush(t0)
}

// TestRejectLogBounded: a flood of distinct peers fills the table to its
// bound; the rest are counted in one line a flush.
func TestRejectLogBounded(t *testing.T) {
	var buf logBuf
	l := newRejectLog(&buf, insight.RejectLogSampled, 64)
	for i := range 5000 {
		l.Rejected(t0, key(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)), 1, limiter.ReasonRateLimit)
	}
	tracked := l.Tracked()
	if tracked > 64 || tracked < 16 {
		t.Fatalf("%d pairs tracked, want at most 64 (and the shards used)", tracked)
	}
	if n := len(buf.take(t)); n != tracked {
		t.Errorf("%d lines for %d pairs tracked", n, tracked)
	}
	l.Flush(t0.Add(time.Second))
	sameLines(t, "overflow", buf.take(t), lineOf("rejected (peers beyond the log's table, not logged one by one)", "count", float64(5000-tracked)))
}

// TestRejectLogNoAllocation: a refusal within the period (the flood case)
// allocates nothing.
func TestRejectLogNoAllocation(t *testing.T) {
	var buf logBuf
	l := newRejectLog(&buf, insight.RejectLogSampled, 0)
	a := key("203.0.113.66")
	l.Rejected(t0, a, 1, limiter.ReasonRateLimit)
	n := testing.AllocsPerRun(1000, func() { l.Rejected(t0.Add(time.Second), a, 1, limiter.ReasonRateLimit) })
	if n != 0 {
		t.Errorf("%v allocations per sampled-away refusal, want 0", n)
	}
}

func TestRejectLogUpstream(t *testing.T) {
	var buf logBuf
	l := newRejectLog(&buf, insight.RejectLogOff, 0)
	refused := errors.New("dial tcp 127.0.0.1:1984: connect: connection refused")
	l.UpstreamError(t0, false, refused)
	for range 9 {
		l.UpstreamError(t0.Add(time.Second), false, refused)
	}
	l.UpstreamError(t0.Add(2*time.Second), true, errors.New("timeout awaiting response headers"))
	warn := func(kv ...any) map[string]any {
		m := lineOf("upstream error", kv...)
		m["level"] = "WARN"
		return m
	}
	sameLines(t, "first of each kind", buf.take(t),
		warn("kind", "unreachable", "count", 1.0, "err", refused.Error()),
		warn("kind", "timeout", "count", 1.0, "err", "timeout awaiting response headers"))
	l.Flush(t0.Add(30 * time.Second))
	sameLines(t, "flush within the minute", buf.take(t))
	l.Flush(t0.Add(61 * time.Second))
	sameLines(t, "flush after it", buf.take(t), warn("kind", "unreachable", "count", 9.0, "over", float64(61*time.Second)))
	l.UpstreamError(t0.Add(200*time.Second), false, refused)
	sameLines(t, "after a quiet while", buf.take(t), warn("kind", "unreachable", "count", 1.0, "over", float64(139*time.Second), "err", refused.Error()))
}
