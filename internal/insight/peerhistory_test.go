package insight_test

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// p0 is on a 10 s boundary: slot boundaries fall on whole tens.
var p0 = time.Unix(1_700_000_000, 0)

func psec(n int) time.Time { return p0.Add(time.Duration(n) * time.Second) }

func pkey(s string) peer.Key { return peer.KeyFromAddr(netip.MustParseAddr(s), 64) }

// fakePeers answers a PeerHistory's reads from a map of views per peer.
type fakePeers struct {
	mu    sync.Mutex
	views map[peer.Key][]limiter.EntryView
	reads int
}

func (f *fakePeers) set(k peer.Key, vs ...limiter.EntryView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.views == nil {
		f.views = map[peer.Key][]limiter.EntryView{}
	}
	f.views[k] = vs
}

func (f *fakePeers) read(k peer.Key) []limiter.EntryView {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return slices.Clone(f.views[k])
}

func ev(g limiter.GroupID, requests, rejConc, rejRate uint64, inflight int64) limiter.EntryView {
	return limiter.EntryView{GroupID: g, Requests: requests, RejectedConcurrency: rejConc, RejectedRateLimit: rejRate, Inflight: inflight}
}

// points is the series as [requests, rejConc, rejRate, inflight] per point.
func points(s insight.PeerSeries) [][4]uint64 {
	out := make([][4]uint64, len(s.T))
	for i := range s.T {
		out[i] = [4]uint64{s.Requests[i], s.RejectedConcurrency[i], s.RejectedRateLimit[i], s.Inflight[i]}
	}
	return out
}

func TestPeerHistoryDeltas(t *testing.T) {
	h := insight.NewPeerHistory()
	f := &fakePeers{}
	a := pkey("203.0.113.7")
	f.set(a, ev(1, 5, 0, 1, 0))
	// The first sample of a peer is its baseline only.
	h.Sample(psec(0), []peer.Key{a}, f.read)
	if s := h.Series(a, p0.Add(-time.Hour)); !s.Kept || len(s.T) != 0 || s.Since != p0.Unix() || s.Step != 10 {
		t.Fatalf("after the baseline: %+v", s)
	}
	// +3 requests, +2 rejected by the rate limit, 1 in flight.
	f.set(a, ev(1, 8, 0, 3, 1))
	h.Sample(psec(10), nil, f.read)
	// A skipped slot (20) is zeros; at 30 a second group appears with 4
	// requests (its entry is new: they count from zero) and the first
	// group's counter went down (forgotten, then 2 requests: they count).
	f.set(a, ev(1, 2, 0, 0, 0), ev(3, 4, 1, 0, 2))
	h.Sample(psec(30), nil, f.read)
	// Two samples in one slot add up.
	f.set(a, ev(1, 3, 0, 0, 0), ev(3, 4, 1, 0, 1))
	h.Sample(psec(35), nil, f.read)
	// The clock went back: ignored.
	f.set(a, ev(1, 100, 0, 0, 0), ev(3, 4, 1, 0, 1))
	h.Sample(psec(25), nil, f.read)

	s := h.Series(a, p0.Add(-time.Hour))
	want := [][4]uint64{{3, 0, 2, 1}, {0, 0, 0, 0}, {6 + 1, 1, 0, 1}}
	if got := points(s); !slices.Equal(got, want) {
		t.Fatalf("points %v, want %v", got, want)
	}
	if !slices.Equal(s.T, []int64{psec(10).Unix(), psec(20).Unix(), psec(30).Unix()}) {
		t.Fatalf("t = %v", s.T)
	}
	// The clock went forward again: the 97 requests of the clock-back
	// sample count at the next one.
	h.Sample(psec(40), nil, f.read)
	if got := points(h.Series(a, psec(40))); !slices.Equal(got, [][4]uint64{{97, 0, 0, 1}}) {
		t.Fatalf("since 40: %v", got)
	}
	// A peer nobody chose has no history.
	if s := h.Series(pkey("203.0.113.8"), p0); s.Kept || len(s.T) != 0 || s.T == nil {
		t.Fatalf("unknown peer: %+v", s)
	}
}

func TestPeerHistoryWatchStartsNow(t *testing.T) {
	h := insight.NewPeerHistory()
	f := &fakePeers{}
	a := pkey("198.51.100.1")
	h.Sample(psec(0), nil, f.read)
	// Viewed at 12 s with 10 requests: the baseline. Its history starts
	// now: the requests before it are not in it.
	if h.Watch(psec(12), a, []limiter.EntryView{ev(1, 10, 0, 0, 0)}) {
		t.Fatal("Watch: a peer never kept was kept")
	}
	if !h.Watch(psec(13), a, nil) {
		t.Fatal("Watch: the peer is not kept after a view")
	}
	// A sample in the same slot (10-19) records the increase in it.
	f.set(a, ev(1, 14, 0, 0, 0))
	h.Sample(psec(18), nil, f.read)
	s := h.Series(a, p0)
	if got := points(s); !slices.Equal(got, [][4]uint64{{4, 0, 0, 0}}) || s.T[0] != psec(10).Unix() || s.Since != psec(12).Unix() {
		t.Fatalf("%+v", s)
	}
}

func TestPeerHistoryChoosesAndForgets(t *testing.T) {
	h := insight.NewPeerHistory()
	f := &fakePeers{}
	top, viewed, other := pkey("192.0.2.1"), pkey("192.0.2.2"), pkey("192.0.2.3")
	for _, k := range []peer.Key{top, viewed, other} {
		f.set(k, ev(1, 1, 0, 0, 0))
	}
	h.Sample(psec(0), []peer.Key{top}, f.read)
	h.Watch(psec(1), viewed, nil)
	if !h.Kept(top) || !h.Kept(viewed) || h.Kept(other) || h.Len() != 2 {
		t.Fatalf("kept: top %v viewed %v other %v, %d", h.Kept(top), h.Kept(viewed), h.Kept(other), h.Len())
	}
	// top stays among the top peers; viewed is watched for 15 minutes,
	// then kept (and still sampled) for an hour more, then dropped.
	at := 10
	for ; psec(at).Sub(psec(1)) <= insight.PeerHistoryWatch+insight.PeerHistoryKeep; at += 10 {
		h.Sample(psec(at), []peer.Key{top}, f.read)
		if !h.Kept(viewed) {
			t.Fatalf("viewed dropped after %s", psec(at).Sub(psec(1)))
		}
	}
	h.Sample(psec(at), []peer.Key{top}, f.read)
	if h.Kept(viewed) || !h.Kept(top) {
		t.Fatalf("after %s: viewed %v top %v", psec(at).Sub(psec(1)), h.Kept(viewed), h.Kept(top))
	}
	// An hour of points at most.
	if s := h.Series(top, p0); len(s.T) != insight.PeerHistoryPoints || s.T[len(s.T)-1] != psec(at).Unix() {
		t.Fatalf("%d points, last %d", len(s.T), s.T[len(s.T)-1])
	}
}

func TestPeerHistoryCap(t *testing.T) {
	h := insight.NewPeerHistory()
	f := &fakePeers{}
	key := func(i int) peer.Key {
		return peer.KeyFromAddr(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 64)
	}
	// Peer i viewed at second i: the first is the one chosen longest ago.
	for i := 0; i < insight.PeerHistoryMax; i++ {
		h.Watch(p0.Add(time.Duration(i)*time.Millisecond), key(i), nil)
	}
	if h.Len() != insight.PeerHistoryMax {
		t.Fatalf("%d kept", h.Len())
	}
	h.Sample(psec(10), []peer.Key{key(insight.PeerHistoryMax), key(insight.PeerHistoryMax + 1)}, f.read)
	if h.Len() != insight.PeerHistoryMax || h.Kept(key(0)) || h.Kept(key(1)) || !h.Kept(key(2)) ||
		!h.Kept(key(insight.PeerHistoryMax)) || !h.Kept(key(insight.PeerHistoryMax+1)) {
		t.Fatalf("%d kept; 0 %v, 1 %v, 2 %v, new %v", h.Len(), h.Kept(key(0)), h.Kept(key(1)), h.Kept(key(2)), h.Kept(key(insight.PeerHistoryMax)))
	}
	if f.reads != insight.PeerHistoryMax {
		t.Fatalf("%d reads, want one per kept peer", f.reads)
	}
}

func TestPeerHistoryConcurrent(t *testing.T) {
	h := insight.NewPeerHistory()
	f := &fakePeers{}
	a := pkey("203.0.113.9")
	f.set(a, ev(1, 1, 0, 0, 0))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 200 {
			h.Sample(psec(10*i), []peer.Key{a}, f.read)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 200 {
			h.Watch(psec(10*i+5), pkey("203.0.113.10"), nil)
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			_ = h.Series(a, p0)
			_ = h.Len()
		}
	}()
	wg.Wait()
	if !h.Kept(a) {
		t.Fatal("lost")
	}
}

// The memory the history reports grows with the peers kept and stops at
// PeerHistoryMax of them (the soak and limiterd_dashboard_record_bytes
// read it).
func TestPeerHistoryBytes(t *testing.T) {
	h := insight.NewPeerHistory()
	if h.Bytes() != 0 {
		t.Fatalf("empty: %d bytes", h.Bytes())
	}
	views := []limiter.EntryView{{GroupID: 1, Requests: 3}, {GroupID: 2, Requests: 4}}
	h.Watch(p0, pkey("10.0.0.1"), views)
	one := h.Bytes()
	if one <= insight.PeerHistoryMaxBytes/insight.PeerHistoryMax || one > 2*insight.PeerHistoryMaxBytes/insight.PeerHistoryMax {
		t.Fatalf("one peer: %d bytes, a record is %d", one, insight.PeerHistoryMaxBytes/insight.PeerHistoryMax)
	}
	for i := range 3 * insight.PeerHistoryMax {
		h.Watch(p0.Add(time.Duration(i)*time.Millisecond), peer.KeyFromAddr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 64), views)
	}
	if n := h.Bytes(); n < insight.PeerHistoryMaxBytes || n > insight.PeerHistoryMaxBytes+insight.PeerHistoryMax*2*64 {
		t.Fatalf("full: %d bytes, at most %d records of %d", n, insight.PeerHistoryMax, insight.PeerHistoryMaxBytes/insight.PeerHistoryMax)
	}
}
