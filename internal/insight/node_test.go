package insight_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
)

// TestNodeWindow: the node's traffic over the last minute: its rate, its
// 5xx, its latency quantiles, and not limiterd's own 429s, 403s and 503s.
func TestNodeWindow(t *testing.T) {
	var e insight.Exchanges
	var w insight.NodeWindow
	at := r0
	if m := w.Minute(); m.Requests != 0 || m.P50 >= 0 {
		t.Fatalf("empty: %+v", m)
	}
	w.Sample(at, &e)
	// 90 s of traffic: each second 9 answers of 4 ms, 1 of 2 s (a 502),
	// and 100 rejections that take nothing.
	for range 90 {
		at = at.Add(time.Second)
		for range 9 {
			e.Observe(3, 200, 4*time.Millisecond)
		}
		e.Observe(3, 502, 2*time.Second)
		for range 100 {
			e.Observe(3, 429, time.Microsecond)
		}
		for range 50 { // shed by the adaptive limit: the node never asked
			e.ObserveOwn(3, 503, time.Microsecond)
		}
		w.Sample(at, &e)
	}
	m := w.Minute()
	if m.Seconds != 60 || m.Requests != 10 || m.Errors5xx != 1 {
		t.Fatalf("minute: %+v", m)
	}
	// The median is within (2.5 ms, 5 ms], the 99th within (1 s, 2.5 s].
	if m.P50 <= 2500*time.Microsecond || m.P50 > 5*time.Millisecond || m.P99 <= time.Second || m.P99 > 2500*time.Millisecond {
		t.Fatalf("quantiles %v %v", m.P50, m.P99)
	}
	// limiterd's own 503s are in the metric all the same.
	if _, n, _ := e.Histogram(3, 4).Snapshot(); n != 90+90*50 {
		t.Fatalf("the metric's 5xx: %d", n)
	}
	// A quiet minute: no exchange, no quantile.
	for range 61 {
		at = at.Add(time.Second)
		w.Sample(at, &e)
	}
	if m := w.Minute(); m.Requests != 0 || m.P50 >= 0 || m.P99 >= 0 {
		t.Fatalf("quiet: %+v", m)
	}
}

// TestLastUpstreamError: the newest upstream error is kept, sampled log or
// not.
func TestLastUpstreamError(t *testing.T) {
	l := insight.NewRejectLog(slog.New(slog.DiscardHandler), insight.RejectLogOptions{})
	if _, ok := l.LastUpstreamError(); ok {
		t.Fatal("an error before any")
	}
	l.UpstreamError(r0, false, errors.New("dial tcp: connection refused"))
	l.UpstreamError(r0.Add(time.Second), true, errors.New("timeout"))
	l.UpstreamError(r0.Add(2*time.Second), false, errors.New("connection reset"))
	f, ok := l.LastUpstreamError()
	if !ok || f.Err != "connection reset" || f.Timeout || !f.At.Equal(r0.Add(2*time.Second)) {
		t.Fatalf("last %+v", f)
	}
	l.UpstreamError(r0.Add(3*time.Second), true, errors.New("timeout again"))
	if f, _ := l.LastUpstreamError(); f.Err != "timeout again" || !f.Timeout {
		t.Fatalf("last %+v", f)
	}
}
