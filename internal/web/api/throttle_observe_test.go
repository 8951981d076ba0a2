package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web/api"
)

func adaptiveThrottle(t testing.TB) *throttle.Throttle {
	return seedThrottle(t, 900, func(c *throttle.Config) { c.Mode = throttle.ModeAdaptive })
}

func observe(tapi *api.Throttle, body string) (int, map[string]any) {
	w := httptest.NewRecorder()
	tapi.HandleObserve(w, httptest.NewRequest(http.MethodPost, "/api/v1/throttle/observe", strings.NewReader(body)))
	return w.Code, decode(w)
}

// observeBody is a reply of peer p for path naming group g with the
// given remaining and reset.
func observeBody(p, path, g, remaining, reset string) string {
	return `{"peer":"` + p + `","path":"` + path + `","status":200,"headers":{` +
		`"RateLimit-Limit":"453, 453;policy=\"` + g + ` usage\", 150;policy=\"` + g + ` concurrency\" ",` +
		`"RateLimit-Remaining":"` + remaining + `","RateLimit-Reset":` + reset + `,"RateLimit-Reset-Amount":["1","2"],` +
		`"Content-Type":"application/json"}}`
}

func TestObserveAnswers(t *testing.T) {
	tapi := api.NewThrottle(adaptiveThrottle(t), nil, nil)
	code, body := observe(tapi, observeBody("p1", "/info", "general", "5", "0"))
	wantBody(t, "learned", code, body, 200, map[string]any{"mode": "adaptive", "outcome": "learned", "group": "general"})
	code, body = observe(tapi, `{"peer":"p1","path":"/info","status":200,"headers":{"server":"Cowboy"}}`)
	wantBody(t, "no fields", code, body, 200, map[string]any{"mode": "adaptive", "outcome": "incompatible", "reason": "missing_header", "header": "ratelimit-limit"})
	code, body = observe(tapi, observeBody("p1", "/tx/abc", "general", "5", "0"))
	wantBody(t, "tx", code, body, 200, map[string]any{"mode": "adaptive", "outcome": "skipped", "group": "general"})
	code, body = observe(tapi, observeBody("p1", "/info", "general", "453", "0"))
	wantBody(t, "out of range", code, body, 200, map[string]any{"mode": "adaptive", "outcome": "refused", "reason": "invalid_header_value", "header": "ratelimit-remaining"})
	for _, tc := range []struct{ body, field string }{
		{`{"path":"/x","status":200,"headers":{}}`, "peer"},
		{`{"peer":"p","status":200,"headers":{}}`, "path"},
		{`{"peer":"p","path":"/x","headers":{}}`, "status"},
		{`{"peer":"p","path":"/x","status":200}`, "headers"},
		{`{"peer":"p","path":"/x","status":200,"headers":{},"extra":1}`, "extra"},
	} {
		code, body := observe(tapi, tc.body)
		if code != 422 || body["field"] != tc.field {
			t.Errorf("%s: %d %v", tc.body, code, body)
		}
	}
	for _, b := range []string{`{`, `{"peer":"p","path":"/x","status":200,"headers":{"a":{"b":1}}}`, `{"peer":"p","path":"/x","status":200,"headers":[]}`} {
		if code, body := observe(tapi, b); code != 400 {
			t.Errorf("%s: %d %v", b, code, body)
		}
	}
}

// In the adaptive mode a call waits for its quota's refill, on the fake
// timeline, and GET /api/v1/throttle tells it beforehand.
func TestAdaptiveWaitUntilRefill(t *testing.T) {
	th := adaptiveThrottle(t)
	clock := newFakeClock()
	tapi := api.NewThrottle(th, clock.Now, clock.Sleep)
	ctx := context.Background()
	code, body := wait(ctx, tapi, `{"peer":"p1","path":"/info"}`)
	wantBody(t, "unknown route", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "", "exempt": false, "outcome": "unknown"})
	observe(tapi, observeBody("p1", "/info", "general", "1", "0"))
	code, body = wait(ctx, tapi, `{"peer":"p1","path":"/info"}`)
	wantBody(t, "the quota's call", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "general", "exempt": false, "outcome": "quota"})
	observe(tapi, observeBody("p1", "/info", "general", "0", "3"))
	code, body = check(tapi, "peer=p1&path=/info")
	wantBody(t, "check", code, body, 200, map[string]any{"would_wait": true, "wait_ms": 3000.0, "type": "general", "capacity": 0.0, "count": 0.0, "exempt": false, "outcome": "queued"})
	code, body = wait(ctx, tapi, `{"peer":"p1","path":"/info"}`)
	wantBody(t, "after the refill", code, body, 200, map[string]any{"waited_ms": 3000.0, "type": "general", "exempt": false, "outcome": "quota"})
	// No refill pending: the call gives up after AdaptiveMaxWait and goes,
	// or answers 408 at its own timeout.
	observe(tapi, observeBody("p1", "/info", "general", "0", "0"))
	code, body = wait(ctx, tapi, `{"peer":"p1","path":"/info"}`)
	wantBody(t, "gave up", code, body, 200, map[string]any{"waited_ms": float64(throttle.AdaptiveMaxWait.Milliseconds()), "type": "general", "exempt": false, "outcome": "gave_up"})
	code, body = wait(ctx, tapi, `{"peer":"p1","path":"/info","timeout":"2s"}`)
	wantBody(t, "timeout", code, body, 408, map[string]any{"error": "throttle_timeout", "waited_ms": 2000.0, "type": "general", "exempt": false})
	if s := th.AdaptiveStats(); s.Waiting != 0 {
		t.Errorf("waiters left behind: %d", s.Waiting)
	}
}

// A waiting call is woken by the reply that gives its quota calls again
// (real timers: the wait would otherwise last until its timeout).
func TestAdaptiveWaitWokenByObserve(t *testing.T) {
	th := adaptiveThrottle(t)
	tapi := api.NewThrottle(th, nil, nil)
	observe(tapi, observeBody("p1", "/info", "general", "0", "0"))
	done := make(chan int, 1)
	go func() {
		code, _ := wait(context.Background(), tapi, `{"peer":"p1","path":"/info","timeout":"60s"}`)
		done <- code
	}()
	for th.AdaptiveStats().Waiting == 0 {
		time.Sleep(time.Millisecond) // until the call waits; not a timing assertion
	}
	observe(tapi, observeBody("p1", "/info", "general", "3", "0"))
	if code := <-done; code != 200 {
		t.Errorf("the woken call answered %d", code)
	}
	// A client that goes away cancels its ticket.
	observe(tapi, observeBody("p1", "/info", "general", "0", "0"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		code, _ := wait(ctx, tapi, `{"peer":"p1","path":"/info"}`)
		done <- code
	}()
	for th.AdaptiveStats().Waiting == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if s := th.AdaptiveStats(); s.Waiting != 0 {
		t.Errorf("a canceled call still waits: %d", s.Waiting)
	}
}
