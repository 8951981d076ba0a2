package limiter_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// observations records what an Observer is told.
type observations struct {
	mu  sync.Mutex
	got []limiter.Observation
}

func (o *observations) Observe(x *limiter.Observation) {
	o.mu.Lock()
	o.got = append(o.got, *x)
	o.mu.Unlock()
}

// TestObserver: every decision Check or Decide makes is observed once,
// with whether the limits were evaluated (Decided), its outcome and its
// group; a request on an exempt path is observed only when its peer is
// denied.
func TestObserver(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 1}.Settings())
	cfg.Routes = append([]limiter.RouteRule{{Group: "test", Paths: []string{"/test/**"}}}, cfg.Routes...)
	cfg.ExemptPaths = []string{"/free/**"}
	cfg.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("192.0.2.66/32")}
	obs := &observations{}
	l, err := limiter.New(memory.New(), t0, cfg, limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	test, _ := l.GroupID("test")
	a, denied, exempt := limitertest.Peer("203.0.113.1"), limitertest.Peer("192.0.2.66"), limitertest.Peer("10.1.2.3")
	check := func(ms int64, path string, p limiter.Request) limiter.Decision {
		p.Method, p.Path = "GET", path
		return l.Check(at(ms), p)
	}
	d1 := check(1, "/test/1", limiter.Request{Peer: a}) // window
	check(2, "/test/1", limiter.Request{Peer: a})       // concurrency: d1 in flight
	d1.Release()
	check(3, "/free/x", limiter.Request{Peer: a})      // exempt path: not observed
	check(4, "/free/x", limiter.Request{Peer: denied}) // exempt path, denied
	check(5, "/test/1", limiter.Request{Peer: denied}) // denied
	check(6, "/test/1", limiter.Request{Peer: exempt}) // local_peers: unlimited
	want := []limiter.Observation{
		{MS: t0.UnixMilli() + 1, Peer: a.Key, Group: test, Decided: true, Allowed: true},
		{MS: t0.UnixMilli() + 2, Peer: a.Key, Group: test, Decided: true, Reason: limiter.ReasonConcurrency},
		{MS: t0.UnixMilli() + 4, Peer: denied.Key, Group: limiter.ExemptPathGroup, Reason: limiter.ReasonDenied},
		{MS: t0.UnixMilli() + 5, Peer: denied.Key, Group: test, Reason: limiter.ReasonDenied},
		{MS: t0.UnixMilli() + 6, Peer: exempt.Key, Group: limiter.LocalPeers, Allowed: true},
	}
	if len(obs.got) != len(want) {
		t.Fatalf("observed %d decisions, want %d: %+v", len(obs.got), len(want), obs.got)
	}
	for i := range want {
		if obs.got[i] != want[i] {
			t.Errorf("observation %d: %+v, want %+v", i, obs.got[i], want[i])
		}
	}
}

// TestCheckPolicy: Check applies the whole policy in one call: an exempt
// path is admitted without limits (but not for a denied peer), every other
// path is classified into its group and decided there, and the route's
// reduce_on_status is reported by RefundsOn.
func TestCheckPolicy(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings())
	cfg.Routes = append([]limiter.RouteRule{{Group: "test", Paths: []string{"/tx"}, Methods: []string{"POST"}, ReduceOnStatus: []int{200}}}, cfg.Routes...)
	cfg.ExemptPaths = []string{"/free/**"}
	cfg.Deny = []netip.Prefix{netip.MustParsePrefix("192.0.2.66/32")}
	l, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := l.GroupID("test")
	general, _ := l.GroupID(limiter.GroupGeneral)
	a := limitertest.Peer("203.0.113.1")
	free := l.Check(at(1), limiter.Request{Method: "GET", Path: "/free/x", Peer: a})
	if !free.Allowed || !free.OnExemptPath() || free.Limited || free.Holds() {
		t.Fatalf("exempt path: %+v", free)
	}
	if d := l.Check(at(2), limiter.Request{Method: "GET", Path: "/free/x", Peer: limitertest.Peer("192.0.2.66")}); d.Allowed || d.Reason != limiter.ReasonDenied || !d.OnExemptPath() {
		t.Fatalf("denied on an exempt path: %+v", d)
	}
	tx := l.Check(at(3), limiter.Request{Method: "POST", Path: "/tx", Peer: a})
	if !tx.Allowed || tx.Group != test || !tx.RefundsOn(200) || tx.RefundsOn(400) {
		t.Fatalf("POST /tx: %+v", tx)
	}
	tx.Release()
	if d := l.Check(at(4), limiter.Request{Method: "POST", Path: "/tx", Peer: a}); d.Allowed || d.Reason != limiter.ReasonRateLimit {
		t.Fatalf("POST /tx past the bucket: %+v", d)
	}
	info := l.Check(at(5), limiter.Request{Method: "GET", Path: "/info", Peer: a})
	if !info.Allowed || info.Group != general || info.RefundsOn(200) {
		t.Fatalf("GET /info: %+v", info)
	}
	info.Release()
}
