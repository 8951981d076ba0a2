package throttleclient_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/throttleclient"
)

const token = "s3cret"

// serve starts a limiterd-like admin server with the throttle API behind
// the bearer token: one call per period per (peer, type) (rpm 2).
func serve(t *testing.T, period, retry time.Duration) (*httptest.Server, *throttle.Throttle, *api.Throttle) {
	t.Helper()
	th, err := throttle.New(time.Now(), throttle.Config{
		Period: period, RetryInterval: retry, DefaultType: "api", DefaultRPM: 2,
		ExemptPeers: []string{"trusted"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tapi := api.NewThrottle(th, nil, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/throttle", tapi.HandleWait)
	mux.HandleFunc("GET /api/v1/throttle", tapi.HandleCheck)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"a valid admin token is required"}`))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { tapi.Close(); srv.Close() })
	return srv, th, tapi
}

func TestThrottleBlocksUntilAllowed(t *testing.T) {
	srv, th, _ := serve(t, 300*time.Millisecond, 50*time.Millisecond)
	c := throttleclient.New(srv.URL+"/", token)
	ctx := context.Background()
	start := time.Now()
	if err := c.Throttle(ctx, "1.2.3.4:1984", "/chunk/1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("the first call took %v", d)
	}
	if err := c.Throttle(ctx, "trusted", "/chunk/1"); err != nil {
		t.Fatal(err)
	}
	wait, err := c.Check(ctx, "1.2.3.4:1984", "/chunk/1")
	if err != nil || wait <= 200*time.Millisecond || wait > 301*time.Millisecond {
		t.Errorf("Check = %v, %v; want about 300ms", wait, err)
	}
	if wait, err := c.Check(ctx, "other", "/chunk/1"); wait != 0 || err != nil {
		t.Errorf("Check(other) = %v, %v; want 0", wait, err)
	}
	start = time.Now()
	if err := c.Throttle(ctx, "1.2.3.4:1984", "/chunk/1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("the second call took %v, want about a period (300ms)", d)
	}
	if st := th.Stats(); st.Admitted != 2 || st.Delayed != 1 || st.Exempt != 1 || st.Waiters != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestThrottleContextEnds(t *testing.T) {
	srv, th, _ := serve(t, time.Hour, 50*time.Millisecond)
	c := throttleclient.New(srv.URL, token)
	if err := c.Throttle(context.Background(), "p", "/x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Throttle(ctx, "p", "/x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Throttle = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v after the context ended", d)
	}
	// limiterd sees the client go away and stops waiting.
	for deadline := time.Now().Add(5 * time.Second); th.Stats().Waiters != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the server still counts the waiter")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ar_rate_limiter's throttle_no_server_test: with no limiterd, calls go at
// once.
func TestUnreachableMeansNotRunning(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	clients := []*throttleclient.Client{
		throttleclient.New(closed, token),
		throttleclient.New(closed, token, throttleclient.WithHTTPClient(&http.Client{})),
	}
	if addr := blackhole(t); addr != "" {
		// Nothing accepts there: a connect timeout.
		clients = append(clients, throttleclient.New("http://"+addr, token, throttleclient.WithConnectTimeout(100*time.Millisecond)))
	} else {
		t.Log("cannot fill a listen queue here: the connect timeout is not tested")
	}
	for _, c := range clients {
		start := time.Now()
		if err := c.Throttle(context.Background(), "p", "/x"); err != nil {
			t.Errorf("Throttle = %v, want nil", err)
		}
		if wait, err := c.Check(context.Background(), "p", "/x"); wait != 0 || err != nil {
			t.Errorf("Check = %v, %v; want 0, nil", wait, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v, want well under 1s", d)
		}
	}
}

// A limiterd going away while a call waits lets the call go: shut down
// (503 throttle_unavailable), or gone (the connection lost, the redial
// refused).
func TestLimiterdGoesAwayWhileWaiting(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		srv, th, tapi := serve(t, time.Hour, 50*time.Millisecond)
		c := throttleclient.New(srv.URL, token)
		c.Throttle(context.Background(), "p", "/x")
		done := make(chan error, 1)
		go func() { done <- c.Throttle(context.Background(), "p", "/x") }()
		waitFor(t, func() bool { return th.Stats().Waiters == 1 })
		tapi.Close()
		if err := <-done; err != nil {
			t.Errorf("Throttle = %v, want nil", err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		srv, th, _ := serve(t, time.Hour, 50*time.Millisecond)
		c := throttleclient.New(srv.URL, token)
		c.Throttle(context.Background(), "p", "/x")
		done := make(chan error, 1)
		go func() { done <- c.Throttle(context.Background(), "p", "/x") }()
		waitFor(t, func() bool { return th.Stats().Waiters == 1 })
		srv.Listener.Close()
		srv.CloseClientConnections()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Throttle = %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Throttle still waiting")
		}
	})
}

// blackhole returns the address of a listener whose accept queue is full,
// so that a connection attempt hangs until its timeout; "" when the system
// does not let a queue fill up.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 8 { // never accepted: they fill the queue
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return addr // the queue is full: this one timed out
		}
		t.Cleanup(func() { c.Close() })
	}
	return ""
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestErrors(t *testing.T) {
	srv, _, _ := serve(t, time.Hour, time.Second)
	ctx := context.Background()
	bad := throttleclient.New(srv.URL, "wrong")
	if err := bad.Throttle(ctx, "p", "/x"); !errors.Is(err, throttleclient.ErrUnauthorized) {
		t.Errorf("Throttle with a bad token = %v", err)
	}
	if _, err := bad.Check(ctx, "p", "/x"); !errors.Is(err, throttleclient.ErrUnauthorized) {
		t.Errorf("Check with a bad token = %v", err)
	}
	c := throttleclient.New(srv.URL, token)
	var e *throttleclient.Error
	if err := c.Throttle(ctx, "", "/x"); !errors.As(err, &e) || e.Status != 422 || e.Field != "peer" {
		t.Errorf("Throttle without a peer = %v", err)
	}
	if _, err := c.Check(ctx, "p", ""); !errors.As(err, &e) || e.Status != 422 || e.Field != "path" {
		t.Errorf("Check without a path = %v", err)
	}
	nf := throttleclient.New(srv.URL+"/nowhere", token)
	if err := nf.Throttle(ctx, "p", "/x"); !errors.As(err, &e) || e.Status != 404 {
		t.Errorf("Throttle at a wrong URL = %v", err)
	}
	if msg := (&throttleclient.Error{Status: 422, Message: "peer: required", Field: "peer"}).Error(); msg != "throttleclient: limiterd answered 422: peer: required (field peer)" {
		t.Errorf("Error() = %q", msg)
	}
}
