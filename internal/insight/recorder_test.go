package insight_test

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// TestRecorder: as a limiter's observer the Recorder keeps each decision
// the limits made (not those the policy answered alone), in decision order
// per (peer, group), and a ring drained too late counts what it lost.
func TestRecorder(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 1, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 1, LeakyTickInterval: 30000, LeakyTickReduction: 1, ConcurrencyLimit: 1,
	}
	l, test := replayLimiter(t, s)
	rec := recorderOf(l)
	ms := func(d int64) int64 { return r0.UnixMilli() + d }
	a, b := testPeer(1), testPeer(2)
	d1 := l.Decide(r0.Add(int64ms(10)), a, test) // window
	l.Decide(r0.Add(int64ms(11)), a, test)       // concurrency (d1 in flight)
	d1.Release()
	d3 := l.Decide(r0.Add(int64ms(12)), a, test) // bucket
	d3.Release()
	l.Decide(r0.Add(int64ms(13)), a, test) // rate limit
	d5 := l.Decide(r0.Add(int64ms(14)), b, test)
	d5.Release()
	l.SetEnabled(false)
	l.Decide(r0.Add(int64ms(15)), a, test) // unlimited: the policy's, not recorded
	l.SetEnabled(true)

	got, lost := rec.Drain(nil)
	if lost != 0 {
		t.Fatalf("lost %d", lost)
	}
	var ofA []insight.Arrival
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
			if x.MS != ms(14) || x.Reason != limiter.ReasonNone || !x.Nth || !x.InSample {
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
		if x.Reason != want[i] || x.MS != ms(10+int64(i)) {
			t.Errorf("a's arrival %d: %+v, want reason %v at +%d ms", i, x, want[i], 10+i)
		}
	}
	if again, _ := rec.Drain(got[:0]); len(again) != 0 {
		t.Fatalf("drained twice: %+v", again)
	}

	// A ring of 4 per shard: ten decisions of one (peer, group) keep the
	// newest 4 and lose 6.
	small := insight.NewRecorder(4)
	l2, err := limiter.New(memory.New(), r0, limiter.Config{Groups: map[string]limiter.GroupSettings{limiter.GroupGeneral: s}}, limiter.WithObserver(small))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := l2.GroupID(limiter.GroupGeneral)
	for i := range 10 {
		d := l2.Decide(r0.Add(int64ms(100+i)), b, g)
		d.Release()
	}
	got, lost = small.Drain(nil)
	if lost != 6 || len(got) != 4 || got[0].MS != ms(106) || got[3].MS != ms(109) {
		t.Fatalf("after an overflow: lost %d, %+v", lost, got)
	}
}

// TestRecorderSampling: with a peer shift only the (peer, group)s of the
// sample are recorded whole, and with an nth shift about one decision in
// 2^nth of the others is recorded, marked as such.
func TestRecorderSampling(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 0, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 1 << 20, LeakyTickInterval: 30000, LeakyTickReduction: 1, ConcurrencyLimit: 1 << 20,
	}
	l, g := replayLimiter(t, s)
	rec := recorderOf(l)
	rec.SetSampling(2, 3)
	const peers, each = 400, 50
	for i := range peers {
		for j := range each {
			d := l.Decide(r0.Add(int64ms(i*each+j)), testPeer(i), g)
			d.Release()
		}
	}
	var inSample, nth int
	whole := map[[17]byte]int{}
	for {
		got, _ := rec.Drain(nil)
		if len(got) == 0 {
			break
		}
		for _, x := range got {
			if x.PeerShift != 2 || x.NthShift != 3 {
				t.Fatalf("shifts %+v", x)
			}
			if x.InSample {
				inSample++
				whole[x.Peer]++
			}
			if x.Nth {
				nth++
			}
		}
	}
	for p, n := range whole {
		if n != each {
			t.Fatalf("peer %v of the sample: %d of its %d decisions recorded", p, n, each)
		}
	}
	if len(whole) < peers/4/2 || len(whole) > peers/4*2 {
		t.Errorf("%d peers of %d in a sample of one in 4", len(whole), peers)
	}
	if total := peers * each; nth < total/8/2 || nth > total/8*2 {
		t.Errorf("%d of %d decisions in the uniform sample of one in 8", nth, total)
	}
}

func int64ms(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// A request the adaptive limit shed is recorded, with its reason, and
// counted by the top talkers as a request refused; the other undecided
// observations (denied, exempt, unavailable) are not recorded.
func TestRecorderKeepsSheds(t *testing.T) {
	rec := insight.NewRecorder(64)
	p, q := testPeer(7), testPeer(8)
	ms := r0.UnixMilli()
	rec.Observe(&limiter.Observation{MS: ms, Peer: p.Key, Group: 1, Reason: limiter.ReasonAdaptive})
	rec.Observe(&limiter.Observation{MS: ms, Peer: q.Key, Group: 1, Reason: limiter.ReasonDenied})
	rec.Observe(&limiter.Observation{MS: ms, Peer: q.Key, Group: 1, Reason: limiter.ReasonUnavailable})
	rec.Observe(&limiter.Observation{MS: ms, Peer: q.Key, Group: 1, Allowed: true})
	got, _ := rec.Drain(nil)
	if len(got) != 1 || got[0].Peer != p.Key || got[0].Reason != limiter.ReasonAdaptive {
		t.Fatalf("recorded %+v, want the shed request alone", got)
	}
	tk := insight.NewTalkers(r0)
	tk.Add(r0, got)
	top := tk.Top(r0.Add(time.Second), "rejected", 5, 1)
	if len(top) != 1 || top[0].Rejected == 0 || top[0].Requests == 0 {
		t.Fatalf("top talkers %+v: the shed request counted neither as a request nor as refused", top)
	}
}
