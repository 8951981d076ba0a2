package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
)

func TestLeasesExpireInOrder(t *testing.T) {
	l := newLeases(new(atomic.Uint64))
	t0 := time.Unix(1000, 0)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, l.add(limiter.Decision{}, t0.Add(time.Duration(i)*time.Second), 0))
	}
	if !l.release(ids[1]) || l.release(ids[1]) {
		t.Fatal("a lease releases exactly once")
	}
	l.expire(t0.Add(2 * time.Second)) // ids 0 and 2 end; 1 was released
	if len(l.m) != 2 {
		t.Fatalf("%d leases left, want 2", len(l.m))
	}
	if _, ok := l.m[ids[3]]; !ok {
		t.Fatal("lease 3 ended early")
	}
	l.releaseAll()
	if len(l.m) != 0 || l.release(ids[4]) {
		t.Fatal("releaseAll left leases")
	}
}

// TestLeasesBoundConcurrent: adds from many connections at once never take
// the leases past the bound, not even for a moment (peak), and every lease
// made is either held or counted as cut.
func TestLeasesBoundConcurrent(t *testing.T) {
	var cut atomic.Uint64
	l := newLeases(&cut)
	const bound, workers, each = 4, 16, 500
	t0 := time.Unix(1000, 0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.add(limiter.Decision{}, t0.Add(time.Duration(w*each+i)*time.Millisecond), bound)
			}
		}()
	}
	wg.Wait()
	if l.peak > bound {
		t.Fatalf("%d leases held at once, over the bound %d", l.peak, bound)
	}
	if got := uint64(len(l.m)) + cut.Load(); got != workers*each {
		t.Fatalf("%d leases held + %d cut = %d, want %d made", len(l.m), cut.Load(), got, workers*each)
	}
}

// TestLeasesBounded: at the bound the oldest lease ends first (its slot is
// given back), the count of them says so, and the map that held a flood is
// made anew once it empties.
func TestLeasesBounded(t *testing.T) {
	var cut atomic.Uint64
	l := newLeases(&cut)
	t0 := time.Unix(1000, 0)
	var ids []string
	for i := range 5 {
		ids = append(ids, l.add(limiter.Decision{}, t0.Add(time.Duration(i)*time.Second), 3))
	}
	if len(l.m) != 3 || cut.Load() != 2 {
		t.Fatalf("%d leases, %d cut; want 3 and 2", len(l.m), cut.Load())
	}
	if l.release(ids[0]) || l.release(ids[1]) || !l.release(ids[2]) {
		t.Fatal("the two oldest should have ended, the third not")
	}
	for i := range 5000 {
		l.add(limiter.Decision{}, t0.Add(time.Hour+time.Duration(i)*time.Millisecond), 0)
	}
	if l.peak < 5000 {
		t.Fatalf("peak %d", l.peak)
	}
	l.expire(t0.Add(2 * time.Hour))
	if len(l.m) != 0 || l.peak != 0 || len(l.q) != 0 {
		t.Fatalf("after the flood expired: %d leases, peak %d, queue %d", len(l.m), l.peak, len(l.q))
	}
}

// TestCheckFloodOfPeers: a flood of distinct peers through the check API,
// none releasing, keeps the limiter's table within peers.max_tracked: the
// leases beyond it end oldest first and give their slots back, so the
// entries they pinned may be evicted.
func TestCheckFloodOfPeers(t *testing.T) {
	const maxTracked = 100
	cfg := limitertest.Config(nil)
	cfg.MaxTracked = maxTracked
	lim := limitertest.New(t, cfg)
	h := New(lim, Options{Now: func() time.Time { return limitertest.T0 }, CheckLease: time.Hour})
	for i := range 10 * maxTracked {
		w := httptest.NewRecorder()
		body := fmt.Sprintf(`{"peer":"10.%d.%d.1","path":"/info"}`, i>>8, i&0xff)
		h.HandleCheck(w, httptest.NewRequest(http.MethodPost, "/api/v1/check", strings.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("check %d: %d %s", i, w.Code, w.Body)
		}
	}
	if n := lim.Tracked(); n > maxTracked {
		t.Fatalf("%d entries tracked, over max_tracked %d", n, maxTracked)
	}
	if cut := h.Counts.CheckLeasesCut.Load(); cut != 9*maxTracked {
		t.Fatalf("%d leases cut, want %d", cut, 9*maxTracked)
	}
}

// TestCheckLeaseHeldWhenTheCallerVanishes: a proxy that asks the check API
// and hangs up before reading the answer (or never releases) does not give
// the slot back: the lease holds it until it ends, so the peer's next
// checks meet its concurrency_limit meanwhile (docs/limiting.md,
// "In-flight release").
func TestCheckLeaseHeldWhenTheCallerVanishes(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	general := limitertest.Hybrid{Window: 1000, WindowMS: 1000, Leaky: 1000, TickMS: 1000, Reduction: 1, Concurrency: 1}.Settings()
	lim := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"general": general}))
	h := New(lim, Options{Now: clock.Now, CheckLease: time.Minute})
	srv := httptest.NewServer(http.HandlerFunc(h.HandleCheck))
	t.Cleanup(srv.Close)

	const body = `{"peer":"192.0.2.7","path":"/info"}`
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /api/v1/check HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
	inflight := func() (n int64) {
		for _, st := range lim.Stats() {
			n += st.ItemsConcurrency
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); inflight() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the vanished caller's check never took its slot")
		}
	}
	check := func() int {
		w := httptest.NewRecorder()
		h.HandleCheck(w, httptest.NewRequest(http.MethodPost, "/api/v1/check", strings.NewReader(body)))
		return w.Code
	}
	clock.Add(59 * time.Second)
	h.leases.expire(clock.Now())
	if code := check(); code != http.StatusTooManyRequests {
		t.Fatalf("within the vanished caller's lease: %d, want 429 (its slot held)", code)
	}
	clock.Add(time.Second)
	h.leases.expire(clock.Now())
	if n := inflight(); n != 0 {
		t.Fatalf("%d in flight once the lease ended, want 0", n)
	}
	if code := check(); code != http.StatusOK {
		t.Fatalf("after the lease ended: %d, want 200", code)
	}
}
