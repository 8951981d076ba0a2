package limiter_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// adaptiveGroup returns the settings of "api": a window of 1000 a second
// and 100 in flight per peer, adaptive concurrency a.
func adaptiveGroup(a limitertest.Adaptive) limiter.GroupSettings {
	g := limitertest.Hybrid{Window: 1000, WindowMS: 1000, Leaky: 0, TickMS: 30_000, Reduction: 1, Concurrency: 100}.Settings()
	g.Adaptive = a.Settings()
	return g
}

// unloaded is a latency the controller's histogram holds exactly.
const unloaded = 8448 * time.Microsecond

// newAdaptive returns a limiter whose group "api" has adaptive
// concurrency a (one answer measures the unloaded latency), that answer
// given: its limit is a.Min from T0 + 2 ms on.
func newAdaptive(t *testing.T, a limitertest.Adaptive, opts ...limiter.Option) (*limiter.Limiter, limiter.GroupID) {
	t.Helper()
	a.ProbeSamples = 1
	cfg := limitertest.Config(map[string]limiter.GroupSettings{"api": adaptiveGroup(a)})
	cfg.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	l := limitertest.New(t, cfg, opts...)
	g, _ := l.GroupID("api")
	v, ok := l.Adaptive(g)
	if !ok || !v.Probing || v.Limit != a.Min {
		t.Fatalf("new: %+v %v, want measuring at the minimum", v, ok)
	}
	d := l.Decide(limitertest.At(1), limitertest.Peer("192.0.2.250"), g)
	d.Sample(limitertest.At(2), unloaded, false)
	d.Release()
	if v, _ = l.Adaptive(g); v.Probing || v.Unloaded != unloaded || v.Limit != a.Min || v.Inflight != 0 {
		t.Fatalf("measured: %+v", v)
	}
	return l, g
}

// holder keeps the decisions of one test, to release them.
type holder struct {
	t  *testing.T
	l  *limiter.Limiter
	g  limiter.GroupID
	ds map[string][]limiter.Decision
	ms int64 // the decisions' time, ms after T0 (0: 10)
}

// decide decides a request of addr at h.ms and keeps it when admitted; it
// reports whether it was.
func (h *holder) decide(addr string) bool {
	h.t.Helper()
	ms := h.ms
	if ms == 0 {
		ms = 10
	}
	d := h.l.Decide(limitertest.At(ms), limitertest.Peer(addr), h.g)
	if d.Allowed {
		h.ds[addr] = append(h.ds[addr], d)
	} else if d.Reason != limiter.ReasonAdaptive || d.RetryAfter != 1 || !d.Limited {
		h.t.Fatalf("%s refused: %+v, want shed by the adaptive limit, Retry-After 1", addr, d)
	}
	return d.Allowed
}

// release releases one request of addr.
func (h *holder) release(addr string) {
	ds := h.ds[addr]
	ds[len(ds)-1].Release()
	h.ds[addr] = ds[:len(ds)-1]
}

func (h *holder) inflight() int64 {
	v, _ := h.l.Adaptive(h.g)
	return v.Inflight
}

// At the limit, a request is admitted only while its peer holds less than
// its fair share of the limit (the limit divided by the peers in flight,
// itself included, at least 1), and never past twice the limit: one peer
// cannot take the node's whole capacity, a polite peer still gets in.
func TestAdaptiveFairShare(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 8, Max: 8})
	h := &holder{t: t, l: l, g: g, ds: map[string][]limiter.Decision{}}
	const a, b = "192.0.2.1", "192.0.2.2"
	for i := range 8 {
		if !h.decide(a) {
			t.Fatalf("a's request %d below the limit: shed", i+1)
		}
	}
	if h.decide(a) {
		t.Fatal("a holds the whole limit alone, its share: admitted over it")
	}
	// b holds nothing: below its share (8 / 2 peers = 4), over the limit.
	for i := range 4 {
		if !h.decide(b) {
			t.Fatalf("b's request %d, below its share of 4: shed", i+1)
		}
	}
	if h.decide(b) || h.decide(a) {
		t.Fatal("a and b at or over their share of 4: admitted")
	}
	if n := h.inflight(); n != 12 {
		t.Fatalf("%d in flight, want 12", n)
	}
	// New peers hold nothing (a share of 8/3, 8/4… at least 1): each gets
	// one, until the group holds twice the limit.
	for i := range 4 {
		if !h.decide("192.0.2." + string(rune('3'+i))) {
			t.Fatalf("new peer %d: shed below the ceiling", i+1)
		}
	}
	if h.decide("192.0.2.9") {
		t.Fatal("a new peer at twice the limit: admitted")
	}
	// Once the group is back under its limit, anyone.
	for range 5 {
		h.release(a)
	}
	if n := h.inflight(); n != 11 {
		t.Fatalf("%d in flight, want 11", n)
	}
	for range 3 {
		h.release(a)
	}
	for range 4 {
		h.release(b)
	}
	for i := range 2 {
		if !h.decide(a) {
			t.Fatalf("under the limit again: decision %d shed", i)
		}
	}
	for addr, ds := range h.ds {
		for _, d := range ds {
			d.Release()
		}
		delete(h.ds, addr)
	}
	if v, _ := l.Adaptive(g); v.Inflight != 0 || v.Peers != 0 {
		t.Fatalf("all released: %+v", v)
	}
}

// Over the limit, a peer is also held to its fair pace (decision 235):
// the last second's answers over its peers make a quota (when the group
// was busy in the two seconds before: more than half its limit held at
// some decision), and a peer more
// than 4 admissions ahead of one admission every second / quota is shed
// even holding nothing; a peer behind its pace gets past its share of the
// slots, up to the ceiling; a peer at its share and ahead of its pace is
// shed.
func TestAdaptiveFairPace(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 4, Max: 4})
	at := func(ms int64, addr string) limiter.Decision {
		return l.Decide(limitertest.At(ms), limitertest.Peer(addr), g)
	}
	// busy holds 3 requests of a peer at ms, more than half the limit, and
	// gives them back: the group is busy in that second, and its peers are
	// counted and paced in the next.
	busy := func(ms int64) {
		var ds []limiter.Decision
		for range 3 {
			ds = append(ds, at(ms, "192.0.2.9"))
		}
		for _, d := range ds {
			d.Release()
		}
	}
	busy(500)
	// Second 1: 20 answers of 2 peers, and the group busy again.
	for i := range 10 {
		for _, p := range []string{"192.0.2.1", "192.0.2.2"} {
			d := at(1000+int64(i), p)
			if !d.Allowed {
				t.Fatalf("second 1, %s: %+v", p, d)
			}
			d.Sample(limitertest.At(1100+int64(i)), unloaded, false)
			d.Release()
		}
	}
	busy(1500)
	// Second 2: the first answer makes the quota 20 answers / 3 peers,
	// 7: an admission every 143 ms.
	d := at(2000, "192.0.2.3")
	d.Sample(limitertest.At(2000), unloaded, false)
	d.Release()
	const heavy, full, polite = "192.0.2.4", "192.0.2.5", "192.0.2.6"
	// Under the limit the heavy peer is admitted 5 times in a row: 5
	// admissions ahead of its pace.
	for range 5 {
		d := at(2001, heavy)
		if !d.Allowed {
			t.Fatalf("under the limit: %+v", d)
		}
		d.Release()
	}
	h := &holder{t: t, l: l, g: g, ds: map[string][]limiter.Decision{}, ms: 2010}
	for range 4 {
		if !h.decide(full) {
			t.Fatal("under the limit: shed")
		}
	}
	// Over the limit. The heavy peer holds nothing but is 5 admissions
	// ahead: shed.
	if d := at(2010, heavy); d.Allowed || d.Reason != limiter.ReasonAdaptive {
		t.Fatalf("5 admissions ahead of its pace, over the limit: %+v", d)
	}
	// The polite peer is behind its pace: admitted, and again past its
	// share of the slots (4 / 2 peers) while within 3 admissions of its
	// pace, up to the ceiling (twice the limit).
	for i := range 4 {
		if !h.decide(polite) {
			t.Fatalf("the polite peer's request %d over the limit: shed", i+1)
		}
	}
	if h.decide(polite) {
		t.Fatal("past the ceiling: admitted")
	}
	// The peer that filled the limit holds its share and is 4 admissions
	// ahead: shed.
	if h.decide(full) {
		t.Fatal("at its share and ahead of its pace: admitted")
	}
	for addr, ds := range h.ds {
		for _, d := range ds {
			d.Release()
		}
		delete(h.ds, addr)
	}
	if v, _ := l.Adaptive(g); v.Inflight != 0 {
		t.Fatalf("all released: %+v", v)
	}
}

// A shed request never reaches the Backend: it consumes none of its
// peer's limits; it is counted apart (ar_limiter_rejected_total{reason=
// "adaptive"}), and the observer sees it undecided.
func TestAdaptiveShedConsumesNothing(t *testing.T) {
	var mu sync.Mutex
	var seen []limiter.Observation
	obs := observerFunc(func(o *limiter.Observation) {
		mu.Lock()
		seen = append(seen, *o)
		mu.Unlock()
	})
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 2, Max: 2}, limiter.WithObserver(obs))
	h := &holder{t: t, l: l, g: g, ds: map[string][]limiter.Decision{}}
	const a = "192.0.2.1"
	h.decide(a)
	h.decide(a)
	before, _ := l.Entry(limitertest.At(10), limitertest.Peer(a).Key, g)
	for range 5 {
		if h.decide(a) {
			t.Fatal("admitted over its share")
		}
	}
	after, _ := l.Entry(limitertest.At(10), limitertest.Peer(a).Key, g)
	if after.Requests != before.Requests || after.WindowActive != before.WindowActive || after.Inflight != 2 {
		t.Fatalf("the entry moved with the sheds: before %+v, after %+v", before, after)
	}
	st := l.Stats()["api"]
	if st.RejectedAdaptive != 5 || st.RejectedConcurrency != 0 || st.RejectedRateLimit != 0 || st.Requests != 8 || st.WouldReject != 0 {
		t.Fatalf("stats: %+v", st)
	}
	if st.AdaptiveLimit != 2 || st.AdaptiveInflight != 2 || st.AdaptiveUnloadedUS != 8448 {
		t.Fatalf("gauges: %+v", st)
	}
	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	if last.Decided || last.Allowed || last.Reason != limiter.ReasonAdaptive || last.Group != g {
		t.Fatalf("observed: %+v", last)
	}
	if limiter.ReasonAdaptive.String() != "adaptive" {
		t.Fatal(limiter.ReasonAdaptive.String())
	}
}

type observerFunc func(*limiter.Observation)

func (f observerFunc) Observe(o *limiter.Observation) { f(o) }

// A request the peer's own limits reject gives its adaptive slot back.
func TestAdaptivePeerRejectionGivesTheSlotBack(t *testing.T) {
	a := limitertest.Adaptive{Min: 50, Max: 50}
	g0 := adaptiveGroup(a)
	g0.ConcurrencyLimit = 1
	a.ProbeSamples = 1
	g0.Adaptive = a.Settings()
	l := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"api": g0}))
	g, _ := l.GroupID("api")
	p := limitertest.Peer("192.0.2.1")
	d := l.Decide(limitertest.At(1), p, g)
	if r := l.Decide(limitertest.At(1), p, g); r.Allowed || r.Reason != limiter.ReasonConcurrency {
		t.Fatalf("second in flight of a peer limited to 1: %+v", r)
	}
	if v, _ := l.Adaptive(g); v.Inflight != 1 {
		t.Fatalf("in flight %d, want 1", v.Inflight)
	}
	d.Release()
}

// Exempt peers (local_peers) are never shed and never counted: their
// requests are decided in local_peers, whose limits are none.
func TestAdaptiveExemptNeverShed(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 1, Max: 1})
	h := &holder{t: t, l: l, g: g, ds: map[string][]limiter.Decision{}}
	h.decide("192.0.2.1")
	for range 50 {
		d := l.Decide(limitertest.At(10), limitertest.Peer("10.1.2.3"), g)
		if !d.Allowed || d.Group != limiter.LocalPeers || d.Via != limiter.ViaUnlimited {
			t.Fatalf("exempt: %+v", d)
		}
		d.Sample(limitertest.At(11), time.Second, true) // not counted either
	}
	if n := h.inflight(); n != 1 {
		t.Fatalf("%d in flight, want 1", n)
	}
	if v, _ := l.Adaptive(g); v.Limit != 1 || v.Latency != 0 {
		t.Fatalf("exempt answers fed the controller: %+v", v)
	}
}

// dry_run computes and counts without shedding: a would-be shed is let
// through, counted in flight and in WouldReject, and never asks the
// Backend (as enforcement would not).
func TestAdaptiveDryRun(t *testing.T) {
	a := limitertest.Adaptive{Min: 1, Max: 1, ProbeSamples: 1}
	gs := adaptiveGroup(a)
	gs.Mode = limiter.ModeDryRun
	l := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"api": gs}))
	g, _ := l.GroupID("api")
	p := limitertest.Peer("192.0.2.1")
	var ds []limiter.Decision
	for i := range 4 {
		d := l.Decide(limitertest.At(1), p, g)
		if !d.Allowed {
			t.Fatalf("dry_run refused request %d: %+v", i+1, d)
		}
		if i > 0 && (!d.WouldReject || d.Reason != limiter.ReasonAdaptive) {
			t.Fatalf("request %d over the limit: %+v, want a would-be adaptive shed", i+1, d)
		}
		ds = append(ds, d)
	}
	if v, _ := l.Adaptive(g); v.Inflight != 4 {
		t.Fatalf("in flight %d, want 4", v.Inflight)
	}
	st := l.Stats()["api"]
	if st.WouldReject != 3 || st.RejectedAdaptive != 0 || st.Requests != 4 {
		t.Fatalf("stats: %+v", st)
	}
	if e, _ := l.Entry(limitertest.At(1), p.Key, g); e.Requests != 1 {
		t.Fatalf("the backend saw %d requests, want 1 (the would-be sheds never reach it)", e.Requests)
	}
	for _, d := range ds {
		d.Release()
	}
	if v, _ := l.Adaptive(g); v.Inflight != 0 {
		t.Fatalf("released: in flight %d", v.Inflight)
	}
}

// A node that answers at once with errors drives the limit down, through
// the decisions' samples.
func TestAdaptiveInstantErrorsDriveTheLimitDown(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 3, Max: 200, WindowMS: 100, Smoothing: 100})
	// First up: answers at the unloaded latency with 150 in flight.
	clock := limitertest.NewClock(limitertest.At(10))
	run := func(n int, latency time.Duration, failed bool) {
		var ds []limiter.Decision
		for i := range n {
			d := l.Decide(clock.Now(), limitertest.Peer("192.0.2."+strings.Repeat("1", 1+i%3)), g)
			if d.Allowed {
				ds = append(ds, d)
			}
		}
		for _, d := range ds {
			clock.Add(time.Millisecond)
			d.Sample(clock.Now(), latency, failed)
			d.Release()
		}
		clock.Add(100 * time.Millisecond)
	}
	for range 40 {
		run(200, unloaded, false)
	}
	up, _ := l.Adaptive(g)
	if up.Limit < 100 {
		t.Fatalf("at the unloaded latency, fully used: limit %d", up.Limit)
	}
	for range 4 {
		run(200, 0, true) // a window each
	}
	down, _ := l.Adaptive(g)
	if down.Limit >= up.Limit/4 {
		t.Fatalf("instant errors: limit %d from %d, want it driven down", down.Limit, up.Limit)
	}
}

// The adaptive state outlives a live change of the group (the limit is
// kept, brought within new bounds); it goes when the key is turned off.
func TestAdaptiveAcrossApply(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 40, Max: 40})
	cfg := l.Config()
	gs := cfg.Groups["api"]
	d := l.Decide(limitertest.At(5), limitertest.Peer("192.0.2.1"), g)
	gs.AdaptiveMaxLimit, gs.AdaptiveMinLimit = 30, 3
	cfg.Groups["api"] = gs
	if _, err := l.Apply(limitertest.At(10), cfg); err != nil {
		t.Fatal(err)
	}
	if v, _ := l.Adaptive(g); v.Limit != 30 || v.Inflight != 1 || v.Probing {
		t.Fatalf("after a lower maximum: %+v", v)
	}
	gs.AdaptiveConcurrency = false
	cfg.Groups["api"] = gs
	if _, err := l.Apply(limitertest.At(20), cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Adaptive(g); ok {
		t.Fatal("off, still adaptive")
	}
	d.Release() // to the counts it was taken from
}

// A restart starts from the saved limit and unloaded latency: the
// snapshot's group part carries them, JSON and all.
func TestAdaptiveSnapshotRestore(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 3, Max: 500, WindowMS: 100})
	clock := limitertest.NewClock(limitertest.At(10))
	for range 30 {
		var ds []limiter.Decision
		for i := range 300 {
			if d := l.Decide(clock.Now(), limitertest.Peer("192.0.2."+string(rune('1'+i%5))), g); d.Allowed {
				ds = append(ds, d)
			}
		}
		for _, d := range ds {
			clock.Add(time.Millisecond / 4)
			d.Sample(clock.Now(), unloaded, false)
			d.Release()
		}
		clock.Add(100 * time.Millisecond)
	}
	want, _ := l.Adaptive(g)
	if want.Limit <= 3 {
		t.Fatalf("the limit did not grow: %+v", want)
	}
	snap := l.Snapshot(clock.Now())
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back limiter.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	l2 := limitertest.New(t, l.Config())
	if v, _ := l2.Adaptive(g); !v.Probing || v.Limit != 3 {
		t.Fatalf("a fresh limiter: %+v", v)
	}
	if _, err := l2.Restore(clock.Now(), back); err != nil {
		t.Fatal(err)
	}
	got, _ := l2.Adaptive(g)
	if got.Limit != want.Limit || got.Unloaded != want.Unloaded || got.Probing {
		t.Fatalf("restored %+v, want the limit and unloaded latency of %+v", got, want)
	}
}

// Requests of peers sharing slots, shed and admitted at once on every
// core, leave nothing counted behind: a shed gives back its request and
// its peer by the slot's own transition, as a release does (a request
// sharing the slot may have come or gone between its count and its shed).
func TestAdaptiveShedGivesBackItsPeer(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 1, Max: 1, WindowMS: 10})
	// peers of two slots, several each
	one, two := limiter.AdaptiveSlotOf(limitertest.Peer("100.64.0.0")), limiter.AdaptiveSlotOf(limitertest.Peer("100.64.0.1"))
	var peers []peer.Peer
	for i := 0; len(peers) < 8 && i < 1<<16; i++ {
		p := limitertest.Peer(fmt.Sprintf("100.64.%d.%d", i>>8, i&255))
		if s := limiter.AdaptiveSlotOf(p); s == one || s == two {
			peers = append(peers, p)
		}
	}
	if len(peers) < 8 {
		t.Fatalf("%d peers in the two slots", len(peers))
	}
	var wg sync.WaitGroup
	var sheds atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20_000 {
				d := l.Decide(limitertest.At(int64(10+i)), peers[(i+w)%len(peers)], g)
				if d.Reason == limiter.ReasonAdaptive {
					sheds.Add(1)
				}
				d.Release()
			}
		}()
	}
	wg.Wait()
	if v, _ := l.Adaptive(g); v.Inflight != 0 || v.Peers != 0 || sheds.Load() == 0 {
		t.Fatalf("after every request gave back: %+v (%d shed)", v, sheds.Load())
	}
}

// Samples and decisions on many goroutines: the counts end at 0.
func TestAdaptiveConcurrent(t *testing.T) {
	l, g := newAdaptive(t, limitertest.Adaptive{Min: 5, Max: 50, WindowMS: 10})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := limitertest.Peer("192.0.2." + string(rune('1'+w)))
			for i := range 2000 {
				now := limitertest.At(int64(10 + i))
				d := l.Decide(now, p, g)
				d.Sample(now, time.Duration(i%7)*time.Millisecond, i%11 == 0)
				d.Release()
			}
		}()
	}
	wg.Wait()
	if v, _ := l.Adaptive(g); v.Inflight != 0 || v.Peers != 0 {
		t.Fatalf("after: %+v", v)
	}
}

// Bad adaptive keys are refused naming the group and the key: the minimum
// above the maximum, zero or negative bounds, an unknown algorithm,
// parameters out of range; set while off too.
func TestAdaptiveKeysValidated(t *testing.T) {
	general := limiter.ArweaveGroups()[limiter.GroupGeneral]
	for _, tc := range []struct {
		set  limiter.PartialGroup
		key  string
		want string
	}{
		{limiter.PartialGroup{"adaptive_concurrency": true, "adaptive_min_limit": int64(200), "adaptive_max_limit": int64(100)}, "adaptive_min_limit", "must be at most adaptive_max_limit (100), got 200"},
		{limiter.PartialGroup{"adaptive_min_limit": int64(2000)}, "adaptive_min_limit", "at most adaptive_max_limit (1000)"},
		{limiter.PartialGroup{"adaptive_min_limit": int64(0)}, "adaptive_min_limit", "from 1 to 2147483647, got 0"},
		{limiter.PartialGroup{"adaptive_max_limit": int64(-5)}, "adaptive_max_limit", "got -5"},
		{limiter.PartialGroup{"adaptive_algorithm": "vegas"}, "adaptive_algorithm", `must be "gradient", got "vegas"`},
		{limiter.PartialGroup{"adaptive_algorithm": 1}, "adaptive_algorithm", "must be a string"},
		{limiter.PartialGroup{"adaptive_concurrency": "yes"}, "adaptive_concurrency", "must be true or false"},
		{limiter.PartialGroup{"adaptive_window": int64(5)}, "adaptive_window", "from 10 to 60000, got 5"},
		{limiter.PartialGroup{"adaptive_percentile": int64(0)}, "adaptive_percentile", "from 1 to 100"},
		{limiter.PartialGroup{"adaptive_percentile": int64(101)}, "adaptive_percentile", "got 101"},
		{limiter.PartialGroup{"adaptive_buffer": int64(-1)}, "adaptive_buffer", "from 0 to 100"},
		{limiter.PartialGroup{"adaptive_smoothing": int64(0)}, "adaptive_smoothing", "from 1 to 100"},
		{limiter.PartialGroup{"adaptive_probe_interval": int64(999)}, "adaptive_probe_interval", "from 1000"},
		{limiter.PartialGroup{"adaptive_probe_samples": int64(0)}, "adaptive_probe_samples", "from 1 to 10000"},
		{limiter.PartialGroup{"adaptive_probe_samples": 1.5}, "adaptive_probe_samples", "must be an integer"},
	} {
		_, err := tc.set.Resolve("api", general)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != "http_api.limiter.api."+tc.key || !strings.Contains(fe.Problem, tc.want) {
			t.Errorf("%v: %v, want http_api.limiter.api.%s: …%s…", tc.set, err, tc.key, tc.want)
		}
	}
	// Built in code: the same checks when on; off and all zero, none.
	s := general
	s.Adaptive = limiter.Adaptive{AdaptiveConcurrency: true}
	if err := s.Validate("api"); err == nil || !strings.Contains(err.Error(), "adaptive_min_limit") {
		t.Errorf("on with nothing set: %v", err)
	}
	s.Adaptive = limiter.Adaptive{}
	if err := s.Validate("api"); err != nil {
		t.Errorf("off and zero: %v", err)
	}
	s.Adaptive = limiter.DefaultAdaptive()
	s.AdaptiveAlgorithm = 9
	if err := s.Validate("api"); err == nil || !strings.Contains(err.Error(), "adaptive_algorithm") {
		t.Errorf("algorithm 9: %v", err)
	}
	if _, err := limiter.ParseAdaptiveAlgorithm("gradient"); err != nil {
		t.Error(err)
	}
}

// stepNode is a stand-in node on a fake clock, deterministic: servers
// requests served at a time, each for the same service time (none varies:
// a saturated node then serves in lockstep, and the window's median
// latency flips between one service time and two), the rest queued.
type stepNode struct {
	servers int
	busy    []stepReq // ends in order of start (one service time for all)
	queue   []stepReq
}

type stepReq struct {
	d    limiter.Decision
	sent time.Time
	end  time.Time
}

// admit queues d, sent at now.
func (n *stepNode) admit(d limiter.Decision, now time.Time, service time.Duration) {
	n.queue = append(n.queue, stepReq{d: d, sent: now})
	n.start(now, service)
}

// start moves queued requests to free servers at now.
func (n *stepNode) start(now time.Time, service time.Duration) {
	for len(n.busy) < n.servers && len(n.queue) > 0 {
		r := n.queue[0]
		n.queue = n.queue[1:]
		r.end = now.Add(service)
		n.busy = append(n.busy, r)
	}
}

// answer answers every request served by now: its latency sampled, its
// slot released.
func (n *stepNode) answer(now time.Time, service time.Duration) {
	for len(n.busy) > 0 && !n.busy[0].end.After(now) {
		r := n.busy[0]
		n.busy = n.busy[1:]
		r.d.Sample(now, now.Sub(r.sent), false)
		r.d.Release()
		n.start(now, service)
	}
}

// settle returns how long after sample from the limits took to come
// within ±25 % of where they ended up before to (the median of the last
// 5 s) and stay there but for measurements of the unloaded latency; -1
// when they never did (the definition of the simulation's, bench/).
func settle(limits []int64, probing []bool, from, to int) time.Duration {
	tail := slices.Clone(limits[max(from, to-50):to])
	slices.Sort(tail)
	ref := float64(tail[len(tail)/2])
	settled := -1
	for i := to - 1; i >= from; i-- {
		if probing[i] {
			continue
		}
		if v := float64(limits[i]); v < ref*0.75 || v > ref*1.25 {
			break
		}
		settled = i
	}
	if settled < 0 {
		return -1
	}
	return time.Duration(settled-from) * 100 * time.Millisecond
}

// After the node slows down 4× the limit settles within 10 s, after it
// recovers within 30 s (docs/benchmarks.md, "Adaptive concurrency: a crowd
// against a node", which defines "settles"), on deterministic traces that
// made the limit saw-tooth for the whole slow stretch (decision 225): 12
// or 13 peers sending 1 or 2 requests a millisecond in turn (2.5× or 5×
// the node's capacity), a node of 16 servers that every request takes
// exactly 40 ms (160 ms for 20 s), the default adaptive settings. The
// fair share lets 13 peers hold 26 in flight for any limit from 14 to 25,
// and a node in lockstep makes the window's median one service time or
// two: the limit that climbed into that stretch by the buffer at once
// then walked down it for seconds, again and again.
func TestAdaptiveSettlesAfterSlowdown(t *testing.T) {
	for _, c := range []struct{ peers, perMS int }{{12, 1}, {12, 2}, {13, 1}, {13, 2}} {
		t.Run(fmt.Sprintf("peers=%d/perms=%d", c.peers, c.perMS), func(t *testing.T) {
			limits, probing := slowdownTrace(t, c.peers, c.perMS)
			down := settle(limits, probing, slowFrom/100, slowTo/100)
			up := settle(limits, probing, slowTo/100, traceEnd/100)
			if down < 0 || down > 10*time.Second || up < 0 || up > 30*time.Second {
				t.Errorf("the limit settled after the slowdown in %v (want ≤ 10 s), after the recovery in %v (want ≤ 30 s); every second from 15 s: %v",
					down, up, everySecond(limits[150:]))
			}
		})
	}
}

// The stretches of slowdownTrace, ms.
const slowFrom, slowTo, traceEnd = 20_000, 40_000, 70_000

// slowdownTrace runs a group with the default adaptive settings in front
// of a stepNode of 16 servers on a fake clock, millisecond by
// millisecond: peers peers send perMS requests a millisecond in turn; the
// service time is 40 ms, 160 ms from slowFrom to slowTo. It returns the
// limit and whether it was measuring, every 100 ms.
func slowdownTrace(t *testing.T, n, perMS int) (limits []int64, probing []bool) {
	a := limitertest.Adaptive{}.Settings()
	l := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"api": adaptiveGroupWith(a)}))
	g, _ := l.GroupID("api")
	peers := make([]peer.Peer, n)
	for i := range peers {
		peers[i] = limitertest.Peer(fmt.Sprintf("192.0.2.%d", i+1))
	}
	clk := limitertest.NewClock(limitertest.T0)
	node := &stepNode{servers: 16}
	for ms := 0; ms < traceEnd; ms++ {
		now := clk.Now()
		service := 40 * time.Millisecond
		if ms >= slowFrom && ms < slowTo {
			service *= 4
		}
		node.answer(now, service)
		for k := range perMS {
			if d := l.Decide(now, peers[(ms*perMS+k)%n], g); d.Allowed {
				node.admit(d, now, service)
			}
		}
		if ms%100 == 0 {
			v, _ := l.Adaptive(g)
			limits, probing = append(limits, v.Limit), append(probing, v.Probing)
		}
		clk.Add(time.Millisecond)
	}
	return limits, probing
}

func everySecond(v []int64) []int64 {
	var out []int64
	for i := 0; i < len(v); i += 10 {
		out = append(out, v[i])
	}
	return out
}

// adaptiveGroupWith returns the settings of "api": a window of 1000 a
// second and 100 in flight per peer, adaptive settings a.
func adaptiveGroupWith(a limiter.Adaptive) limiter.GroupSettings {
	g := limitertest.Hybrid{Window: 1000, WindowMS: 1000, Leaky: 0, TickMS: 30_000, Reduction: 1, Concurrency: 100}.Settings()
	g.Adaptive = a
	return g
}
