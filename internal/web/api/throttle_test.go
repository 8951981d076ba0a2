package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/limiter"
)

// newFakeClock returns a timeline that only moves when a waiter sleeps on
// it.
func newFakeClock() *limitertest.Clock { return limitertest.NewClock(limitertest.T0) }

// seedThrottle is the seed's setup: every path of type "api" at rpm, a
// 30 s period, 1 s retries.
func seedThrottle(t testing.TB, rpm int, edit ...func(*throttle.Config)) *throttle.Throttle {
	t.Helper()
	cfg := throttle.Config{
		Period: 30 * time.Second, RetryInterval: time.Second,
		DefaultType: "api", DefaultRPM: rpm, Compile: limiter.ThrottleMatcher,
	}
	for _, e := range edit {
		e(&cfg)
	}
	th, err := throttle.New(time.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// wait runs HandleWait for body with ctx and returns the status and the
// decoded JSON body.
func wait(ctx context.Context, tapi *api.Throttle, body string) (int, map[string]any) {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/throttle", strings.NewReader(body)).WithContext(ctx)
	w := httptest.NewRecorder()
	tapi.HandleWait(w, r)
	return w.Code, decode(w)
}

func check(tapi *api.Throttle, query string) (int, map[string]any) {
	w := httptest.NewRecorder()
	tapi.HandleCheck(w, httptest.NewRequest(http.MethodGet, "/api/v1/throttle?"+query, nil))
	return w.Code, decode(w)
}

func decode(w *httptest.ResponseRecorder) map[string]any {
	m := map[string]any{}
	if w.Body.Len() > 0 {
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			m = map[string]any{"undecodable": w.Body.String()}
		}
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		m["content-type"] = ct
	}
	return m
}

func wantBody(t *testing.T, what string, gotCode int, got map[string]any, wantCode int, want map[string]any) {
	t.Helper()
	if gotCode != wantCode || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %d %v, want %d %v", what, gotCode, got, wantCode, want)
	}
}

// The seed's throttle_over_limit_test through HTTP: four calls go at once,
// the fifth waits, re-evaluated every second, until the oldest timestamp
// has left the window at 31 s.
func TestThrottleWaitBlocksUntilTheWindowFrees(t *testing.T) {
	th := seedThrottle(t, 10) // capacity 4
	clock := newFakeClock()
	tapi := api.NewThrottle(th, clock.Now, clock.Sleep)
	ctx := context.Background()
	for range 4 {
		code, body := wait(ctx, tapi, `{"peer":"peer1","path":"/api/data"}`)
		wantBody(t, "under the limit", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": false})
	}
	code, body := wait(ctx, tapi, `{"peer":"peer1","path":"/api/data"}`)
	wantBody(t, "over the limit", code, body, 200, map[string]any{"waited_ms": 31000.0, "type": "api", "exempt": false})
	sleeps := clock.Sleeps()
	if len(sleeps) != 31 {
		t.Errorf("%d sleeps, want 31", len(sleeps))
	}
	for i, d := range sleeps {
		if d != time.Second {
			t.Errorf("sleep %d: %v, want the retry interval (1s)", i, d)
		}
	}
	st := th.Stats()
	if st.Admitted != 5 || st.Refused != 31 || st.Delayed != 1 || st.Waiters != 0 {
		t.Errorf("stats %+v", st)
	}
	// Another peer is independent.
	code, body = wait(ctx, tapi, `{"peer":"peer2","path":"/api/data"}`)
	wantBody(t, "another peer", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": false})
}

func TestThrottleWaitExemptAndOff(t *testing.T) {
	th := seedThrottle(t, 2, func(c *throttle.Config) {
		c.ExemptPeers = []string{"trusted-peer"}
		c.ExemptPaths = []string{"re:^/health"}
	})
	clock := newFakeClock()
	tapi := api.NewThrottle(th, clock.Now, clock.Sleep)
	ctx := context.Background()
	for range 3 {
		code, body := wait(ctx, tapi, `{"peer":"trusted-peer","path":"/api/data"}`)
		wantBody(t, "exempt peer", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": true})
		code, body = wait(ctx, tapi, `{"peer":"p","path":"/HEALTH"}`)
		wantBody(t, "exempt path", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": true})
	}
	th.SetEnabled(false)
	for range 100 {
		code, body := wait(ctx, tapi, `{"peer":"p","path":"/api/data"}`)
		wantBody(t, "off", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": false, "off": true})
	}
	if len(clock.Sleeps()) != 0 || th.Stats().Timestamps != 0 {
		t.Errorf("slept %v, recorded %d", clock.Sleeps(), th.Stats().Timestamps)
	}
}

func TestThrottleWaitTimeout(t *testing.T) {
	th := seedThrottle(t, 2) // capacity 1
	clock := newFakeClock()
	tapi := api.NewThrottle(th, clock.Now, clock.Sleep)
	ctx := context.Background()
	wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
	code, body := wait(ctx, tapi, `{"peer":"p","path":"/x","timeout":"2500ms"}`)
	wantBody(t, "timeout", code, body, 408, map[string]any{"error": "throttle_timeout", "waited_ms": 2500.0, "type": "api", "exempt": false})
	if got, want := clock.Sleeps(), []time.Duration{time.Second, time.Second, 500 * time.Millisecond}; !reflect.DeepEqual(got, want) {
		t.Errorf("sleeps %v, want %v", got, want)
	}
	// A timeout on a retry: evaluated at the deadline, then 408.
	code, body = wait(ctx, tapi, `{"peer":"p","path":"/x","timeout":"2s"}`)
	wantBody(t, "timeout", code, body, 408, map[string]any{"error": "throttle_timeout", "waited_ms": 2000.0, "type": "api", "exempt": false})
	// A timeout long enough: admitted.
	code, body = wait(ctx, tapi, `{"peer":"p","path":"/x","timeout":"1m"}`)
	wantBody(t, "long timeout", code, body, 200, map[string]any{"waited_ms": 26000.0, "type": "api", "exempt": false})
	if st := th.Stats(); st.Waiters != 0 || st.Delayed != 3 {
		t.Errorf("stats %+v", st)
	}
}

// blockingSleep parks every sleep until released (or its context ends),
// announcing it on sleeping.
type blockingSleep struct {
	sleeping chan time.Duration
	release  chan struct{}
}

func newBlockingSleep() *blockingSleep {
	return &blockingSleep{sleeping: make(chan time.Duration, 100), release: make(chan struct{})}
}

func (b *blockingSleep) Sleep(ctx context.Context, d time.Duration) error {
	b.sleeping <- d
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.release:
		return nil
	}
}

func TestThrottleWaitClientGoesAway(t *testing.T) {
	th := seedThrottle(t, 2)
	bs := newBlockingSleep()
	tapi := api.NewThrottle(th, time.Now, bs.Sleep)
	wait(context.Background(), tapi, `{"peer":"p","path":"/x"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		code, _ := wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
		done <- code
	}()
	<-bs.sleeping
	if got := th.Keys(time.Now(), 0); len(got) != 1 || got[0].Waiters != 1 {
		t.Errorf("while waiting: keys %+v", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end when the client went away")
	}
	if st := th.Stats(); st.Waiters != 0 || st.Admitted != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Switching the throttle off does not release a call already waiting
// (ar_rate_limiter: the delayed re-check skips the off test); new calls go
// at once.
func TestThrottleOffDoesNotReleaseWaiters(t *testing.T) {
	th := seedThrottle(t, 2)
	bs := newBlockingSleep()
	tapi := api.NewThrottle(th, time.Now, bs.Sleep)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
	done := make(chan int, 1)
	go func() {
		code, _ := wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
		done <- code
	}()
	<-bs.sleeping
	th.SetEnabled(false)
	code, body := wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
	wantBody(t, "a new call while off", code, body, 200, map[string]any{"waited_ms": 0.0, "type": "api", "exempt": false, "off": true})
	bs.release <- struct{}{} // one retry: still refused
	<-bs.sleeping
	select {
	case code := <-done:
		t.Fatalf("the waiting call ended (%d) when the throttle went off", code)
	default:
	}
	if st := th.Stats(); st.Waiters != 1 || st.Refused != 2 {
		t.Errorf("stats %+v", st)
	}
	cancel()
	<-done
}

func TestThrottleClose(t *testing.T) {
	th := seedThrottle(t, 2)
	bs := newBlockingSleep()
	tapi := api.NewThrottle(th, time.Now, bs.Sleep)
	ctx := context.Background()
	wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
	type result struct {
		code int
		body map[string]any
	}
	done := make(chan result, 1)
	go func() {
		code, body := wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
		done <- result{code, body}
	}()
	<-bs.sleeping
	tapi.Close()
	r := <-done
	wantBody(t, "waiting at Close", r.code, r.body, 503, map[string]any{"error": "throttle_unavailable"})
	code, body := wait(ctx, tapi, `{"peer":"q","path":"/x"}`)
	wantBody(t, "after Close", code, body, 503, map[string]any{"error": "throttle_unavailable"})
	if st := th.Stats(); st.Waiters != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestThrottleWaitBadBodies(t *testing.T) {
	tapi := api.NewThrottle(seedThrottle(t, 60), nil, nil)
	for _, r := range []struct {
		body  string
		code  int
		field string
	}{
		{`{}`, 422, "peer"},
		{`{"peer":"p"}`, 422, "path"},
		{`{"path":"/x"}`, 422, "peer"},
		{`{"peer":"","path":"/x"}`, 422, "peer"},
		{`{"peer":"p","path":"/x","method":"GET"}`, 422, "method"},
		{`{"peer":"p","path":"/x","timeout":"soon"}`, 422, "timeout"},
		{`{"peer":"p","path":"/x","timeout":"-1s"}`, 422, "timeout"},
		{`{"peer":"p","path":"/x","timeout":"0s"}`, 422, "timeout"},
		{`{"peer":"p","path":"/x","timeout":5}`, 400, ""},
		{`{"peer":1,"path":"/x"}`, 400, ""},
		{`not json`, 400, ""},
		{``, 400, ""},
		{`{"peer":"p","path":"/x"` + strings.Repeat(" ", 70<<10) + `}`, 400, ""},
	} {
		code, body := wait(context.Background(), tapi, r.body)
		msg, _ := body["error"].(string)
		field, _ := body["field"].(string)
		if code != r.code || msg == "" || field != r.field || len(body) != map[bool]int{true: 1, false: 2}[r.field == ""] {
			t.Errorf("body %.40q: %d %v, want %d with field %q", r.body, code, body, r.code, r.field)
		}
	}
}

func TestThrottleCheck(t *testing.T) {
	th := seedThrottle(t, 10, func(c *throttle.Config) { // capacity 4
		c.ExemptPeers = []string{"trusted"}
	})
	clock := newFakeClock()
	tapi := api.NewThrottle(th, clock.Now, clock.Sleep)
	for range 3 {
		code, body := check(tapi, "peer=p&path=/x")
		wantBody(t, "fresh", code, body, 200, map[string]any{
			"would_wait": false, "wait_ms": 0.0, "type": "api", "capacity": 4.0, "count": 0.0, "exempt": false,
		})
	}
	for range 4 {
		wait(context.Background(), tapi, `{"peer":"p","path":"/x"}`)
	}
	clock.Sleep(context.Background(), 1500*time.Millisecond)
	code, body := check(tapi, "peer=p&path=%2Fx%3Fa%3Db")
	wantBody(t, "full", code, body, 200, map[string]any{
		"would_wait": true, "wait_ms": 28501.0, "type": "api", "capacity": 4.0, "count": 4.0, "exempt": false,
	})
	code, body = check(tapi, "peer=trusted&path=/x")
	wantBody(t, "exempt", code, body, 200, map[string]any{
		"would_wait": false, "wait_ms": 0.0, "type": "api", "capacity": 4.0, "count": 0.0, "exempt": true,
	})
	th.SetEnabled(false)
	code, body = check(tapi, "peer=p&path=/x")
	wantBody(t, "off", code, body, 200, map[string]any{
		"would_wait": false, "wait_ms": 0.0, "type": "api", "capacity": 4.0, "count": 0.0, "exempt": false, "off": true,
	})
	if st := th.Stats(); st.Admitted != 4 || st.Refused != 0 || st.Timestamps != 4 {
		t.Errorf("GET recorded something: %+v", st)
	}

	for _, r := range []struct {
		query string
		code  int
		field string
	}{
		{"", 422, "peer"},
		{"peer=p", 422, "path"},
		{"path=/x", 422, "peer"},
		{"peer=p&path=/x&limit=3", 422, "limit"},
		{"peer=p&path=%zz", 400, ""},
	} {
		code, body := check(tapi, r.query)
		field, _ := body["field"].(string)
		if code != r.code || body["error"] == nil || field != r.field {
			t.Errorf("query %q: %d %v, want %d with field %q", r.query, code, body, r.code, r.field)
		}
	}
}

// The one real-time test: with a 100 ms retry interval a blocked call is
// re-evaluated about ten times a second, never more often.
func TestThrottleRetryIntervalHonoured(t *testing.T) {
	th := seedThrottle(t, 2, func(c *throttle.Config) {
		c.Period = time.Hour
		c.RetryInterval = 100 * time.Millisecond
	})
	tapi := api.NewThrottle(th, nil, nil)
	ctx := context.Background()
	wait(ctx, tapi, `{"peer":"p","path":"/x"}`)
	start := time.Now()
	code, body := wait(ctx, tapi, `{"peer":"p","path":"/x","timeout":"1s"}`)
	elapsed := time.Since(start)
	if code != 408 || body["error"] != "throttle_timeout" {
		t.Fatalf("%d %v, want 408 throttle_timeout", code, body)
	}
	evals := int(th.Stats().Refused) // the Try, then each Retry
	if elapsed < time.Second || elapsed > 3*time.Second {
		t.Errorf("the wait took %v, want about 1s", elapsed)
	}
	// At most one evaluation per interval; at least a few, though a loaded
	// host may fire a timer late (a lower bound of 8 failed there).
	most := int(elapsed/(100*time.Millisecond)) + 1
	if evals > most || evals < 3 {
		t.Errorf("%d evaluations in %v, want 3 to %d (one per 100 ms at most)", evals, elapsed, most)
	}
}

// The shipped config.toml and the core agree on the throttle defaults (the
// limiter package cannot import config to check it itself).
func TestShippedThrottleConfigMatchesCore(t *testing.T) {
	cfg, _, err := config.Load(config.Source{})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.ThrottleConfig()
	if len(got.ExemptPeers) == 0 {
		got.ExemptPeers = nil
	}
	if len(got.ExemptPaths) == 0 {
		got.ExemptPaths = nil
	}
	if got.Compile == nil {
		t.Error("the config's throttle compiles no pattern")
	}
	if _, err := throttle.New(time.Now(), got); err != nil {
		t.Error(err)
	}
	got.Compile = nil // a func is never DeepEqual
	if want := throttle.ArweaveConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("config.toml's [throttle]:\n%+v\nthrottle.ArweaveConfig():\n%+v", got, want)
	}
}

// BenchmarkThrottleWaiters parks 10 000 callers on one hot key through
// HandleWait (real timers, retry_interval 1 s, no sockets) and reports the
// process CPU time used while they wait, as a percentage of one core
// (%cpu), and the evaluations per second (evals/s). One op is one
// millisecond of waiting, so -benchtime sets the measured period:
//
//	go test -run '^$' -bench BenchmarkThrottleWaiters -benchtime 10000x ./internal/web/api/
//
// measures 10 s (also what -benchtime 10s converges to).
func BenchmarkThrottleWaiters(b *testing.B) {
	const waiters = 10000
	th := seedThrottle(b, 2, func(c *throttle.Config) { c.Period = 24 * time.Hour })
	tapi := api.NewThrottle(th, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	wait(ctx, tapi, `{"peer":"hot","path":"/x"}`) // the key is full from now on
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() { wait(ctx, tapi, `{"peer":"hot","path":"/x"}`) })
	}
	for th.Stats().Waiters < waiters {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // let the first retries spread out

	evals0 := th.Stats().Refused
	cpu0 := cpuTime(b)
	b.ResetTimer()
	start := time.Now()
	time.Sleep(time.Duration(b.N) * time.Millisecond)
	elapsed := time.Since(start)
	cpu := cpuTime(b) - cpu0
	evals := th.Stats().Refused - evals0
	b.StopTimer()

	b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "%cpu")
	b.ReportMetric(float64(evals)/elapsed.Seconds(), "evals/s")
	cancel()
	wg.Wait()
	if elapsed >= 3*time.Second && float64(evals)/elapsed.Seconds() > 1.05*waiters {
		b.Errorf("%d evaluations in %v: more than one per waiter per retry interval", evals, elapsed)
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
