package insight

import (
	"math"
	"net/netip"
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

func keyOf(i int) peer.Key {
	a := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
	return peer.KeyFromAddr(a, 64)
}

// TestPeerShare: distinct peers, not requests — one peer rejected a
// thousand times is one rejected peer — within 3 standard errors, over the
// last five minutes only, dry_run and undecided requests aside.
func TestPeerShare(t *testing.T) {
	s := NewPeerShare()
	const t0 = 1_800_000_000_000 // a minute's start, in ms
	g := limiter.GroupID(1)
	decide := func(ms int64, i int, allowed bool) {
		k := keyOf(i)
		o := limiter.Observation{MS: ms, Peer: k, Group: g, Decided: true, Allowed: allowed}
		if !allowed {
			o.Reason = limiter.ReasonRateLimit
		}
		s.Observe(&o)
	}
	// 10 000 polite peers, each a few times; one abuser rejected a
	// thousand times; 300 peers rejected once.
	for rep := range 3 {
		for i := range 10_000 {
			decide(t0+int64(rep*1000), i, true)
		}
	}
	for range 1000 {
		decide(t0+5000, 20_000, false)
	}
	for i := range 300 {
		decide(t0+6000, 30_000+i, false)
	}
	// Neither counts: a dry_run's would-be rejection, an exempt peer.
	s.Observe(&limiter.Observation{MS: t0, Peer: keyOf(40_000), Group: g, Decided: true, Allowed: true, Reason: limiter.ReasonRateLimit})
	s.Observe(&limiter.Observation{MS: t0, Peer: keyOf(40_001), Group: g, Decided: false, Allowed: true})

	near := func(what string, got, want float64) {
		t.Helper()
		if se := 1.04 / math.Sqrt(sketchRegisters); math.Abs(got-want) > 3*se*want+1 {
			t.Errorf("%s: %.0f, want %.0f ± 3 standard errors", what, got, want)
		}
	}
	seen, rej, ok := s.Counts(g, t0+60_000)
	if !ok {
		t.Fatal("no counts")
	}
	near("seen", seen, 10_000+1+300+1)
	near("rejected", rej, 301)

	// Four minutes on: still in the window; five: gone.
	seen, _, _ = s.Counts(g, t0+4*60_000)
	near("seen four minutes on", seen, 10_302)
	if seen, rej, _ = s.Counts(g, t0+5*60_000); seen != 0 || rej != 0 {
		t.Errorf("five minutes on: %v seen, %v rejected, want none", seen, rej)
	}
	// A new minute reuses its slot, cleared.
	decide(t0+6*60_000, 1, true)
	if seen, rej, _ = s.Counts(g, t0+6*60_000); math.Round(seen) != 1 || rej != 0 {
		t.Errorf("the minute after: %v seen, %v rejected, want 1 and 0", seen, rej)
	}
	if _, _, ok := s.Counts(2, t0); ok {
		t.Error("a group never decided about has counts")
	}
}

func BenchmarkPeerShareObserve(b *testing.B) {
	s := NewPeerShare()
	o := limiter.Observation{MS: 1_800_000_000_000, Group: 1, Decided: true, Allowed: true}
	keys := make([]peer.Key, 4096)
	for i := range keys {
		keys[i] = keyOf(i)
	}
	b.ResetTimer()
	for i := range b.N {
		o.Peer = keys[i%len(keys)]
		s.Observe(&o)
	}
}
