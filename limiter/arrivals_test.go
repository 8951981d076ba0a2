package limiter_test

import (
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// TestArrivals: with WithArrivals the local backend records each decision
// it takes (not those the policy answers alone), in decision order per
// (peer, group), and a ring drained too late counts what it lost.
func TestArrivals(t *testing.T) {
	cfg := testConfig(settings(1, 1000, 1, 30000, 1, 1))
	l, err := limiter.New(t0, cfg, limiter.WithArrivals(4))
	if err != nil {
		t.Fatal(err)
	}
	test, _ := l.GroupID("test")
	a, b := peerAt("203.0.113.1"), peerAt("2001:db8::7")
	d1 := l.Decide(at(10), a, test) // window
	d2 := l.Decide(at(11), a, test) // concurrency (d1 in flight)
	d1.Release()
	d3 := l.Decide(at(12), a, test) // bucket
	d3.Release()
	d4 := l.Decide(at(13), a, test) // rate limit
	d5 := l.Decide(at(14), b, test)
	d5.Release()
	_ = d2
	_ = d4
	l.SetEnabled(false)
	l.Decide(at(15), a, test) // unlimited: the policy's, not recorded
	l.SetEnabled(true)

	got, lost := l.DrainArrivals(nil)
	if lost != 0 {
		t.Fatalf("lost %d", lost)
	}
	var ofA []limiter.Arrival
	var ofB int
	for _, x := range got {
		if x.Group != test {
			t.Fatalf("group %d", x.Group)
		}
		switch x.Peer {
		case a.Key:
			ofA = append(ofA, x)
		case b.Key:
			ofB++
			if x.MS != t0.UnixMilli()+14 || x.Reason != limiter.ReasonNone {
				t.Errorf("b: %+v", x)
			}
		default:
			t.Fatalf("peer %v", x.Peer)
		}
	}
	want := []limiter.Reason{limiter.ReasonNone, limiter.ReasonConcurrency, limiter.ReasonNone, limiter.ReasonRateLimit}
	if len(ofA) != len(want) || ofB != 1 {
		t.Fatalf("arrivals of a %+v, of b %d", ofA, ofB)
	}
	for i, x := range ofA {
		if x.Reason != want[i] || x.MS != t0.UnixMilli()+10+int64(i) {
			t.Errorf("a's arrival %d: %+v, want reason %v at +%d ms", i, x, want[i], 10+i)
		}
	}
	if again, _ := l.DrainArrivals(got[:0]); len(again) != 0 {
		t.Fatalf("drained twice: %+v", again)
	}

	// Ten decisions of one (peer, group) in a ring of 4: the newest 4 are
	// kept, 6 lost.
	for i := range 10 {
		d := l.Decide(at(int64(100+i)), b, test)
		d.Release()
	}
	got, lost = l.DrainArrivals(nil)
	if lost != 6 || len(got) != 4 || got[0].MS != t0.UnixMilli()+106 || got[3].MS != t0.UnixMilli()+109 {
		t.Fatalf("after an overflow: lost %d, %+v", lost, got)
	}
}

// TestArrivalsOff: without the option nothing is recorded.
func TestArrivalsOff(t *testing.T) {
	l, err := limiter.New(t0, testConfig(settings(1, 1000, 1, 30000, 1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	test, _ := l.GroupID("test")
	d := l.Decide(at(1), peerAt("203.0.113.1"), test)
	d.Release()
	if got, lost := l.DrainArrivals(nil); len(got) != 0 || lost != 0 {
		t.Fatalf("recorded without WithArrivals: %v %d", got, lost)
	}
}
