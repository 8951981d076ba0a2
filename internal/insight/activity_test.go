package insight_test

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
)

func arrival(peer int, g limiter.GroupID, rejected bool, ms int64) insight.Arrival {
	a := insight.Arrival{MS: ms, Peer: testPeer(peer).Key, Group: g, Nth: true}
	if rejected {
		a.Reason = limiter.ReasonRateLimit
	}
	return a
}

// TestTalkers: the top lists over the last 5 minutes, by requests and by
// rejections, per group, and their rates; older buckets leave the window.
func TestTalkers(t *testing.T) {
	c := limitertest.NewClock(r0)
	tk := insight.NewTalkers(c.Now())
	var as []insight.Arrival
	for range 30 {
		as = append(as, arrival(1, 3, false, 0)) // busy, never rejected
	}
	for i := range 12 {
		as = append(as, arrival(2, 3, i >= 2, 0)) // 10 rejected
	}
	as = append(as, arrival(3, 4, true, 0))
	sampled := arrival(4, 4, true, 0)
	sampled.NthShift = 3 // stands for 8
	as = append(as, sampled)
	as = append(as, insight.Arrival{Peer: testPeer(5).Key, Group: 3, InSample: true}) // not in the uniform sample
	c.Add(20 * time.Second)
	tk.Add(c.Now(), as)

	top := tk.Top(c.Now(), insight.ByRequests, 10, 0)
	if len(top) != 4 || top[0].Peer != testPeer(1).Key || top[0].Requests != 30 || top[1].Peer != testPeer(2).Key || top[2].Requests != 8 {
		t.Fatalf("by requests: %+v", top)
	}
	if r := top[0].RequestRate(); r != 30.0/20 {
		t.Fatalf("rate after 20 s: %v", r)
	}
	rej := tk.Top(c.Now(), insight.ByRejections, 10, 0)
	if len(rej) != 3 || rej[0].Peer != testPeer(2).Key || rej[0].Rejected != 10 || rej[1].Rejected != 8 {
		t.Fatalf("by rejections: %+v", rej)
	}
	if g4 := tk.Top(c.Now(), insight.ByRequests, 10, 4); len(g4) != 2 {
		t.Fatalf("group 4: %+v", g4)
	}
	if got := tk.Snapshot(c.Now()).Get(testPeer(2).Key, 3); got.Requests != 12 || got.Rejected != 10 {
		t.Fatalf("get: %+v", got)
	}

	// A later bucket adds up; after 5 minutes the first has left.
	c.Add(time.Minute)
	tk.Add(c.Now(), []insight.Arrival{arrival(2, 3, true, 0)})
	if got := tk.Snapshot(c.Now()).Get(testPeer(2).Key, 3); got.Rejected != 11 || got.Seconds != 80 {
		t.Fatalf("a minute later: %+v", got)
	}
	c.Add(4*time.Minute + 15*time.Second)
	tk.Add(c.Now(), nil)
	if got := tk.Snapshot(c.Now()).Get(testPeer(2).Key, 3); got.Rejected != 1 || got.Seconds != 300 {
		t.Fatalf("5 minutes later: %+v", got)
	}
	c.Add(time.Minute)
	if top := tk.Top(c.Now(), insight.ByRequests, 10, 0); len(top) != 0 {
		t.Fatalf("6 minutes later: %+v", top)
	}
}

// TestTalkersRecent: "now" is the last window of whole buckets, its
// rates over exactly the seconds those cover; a peer that stopped leaves
// it within the window.
func TestTalkersRecent(t *testing.T) {
	start := time.Unix(1_800_000_000, 0) // on a bucket's start
	c := limitertest.NewClock(start)
	tk := insight.NewTalkers(c.Now())
	// 5 s in: since counting began, 5 s covered.
	c.Add(5 * time.Second)
	tk.Add(c.Now(), []insight.Arrival{arrival(1, 3, true, 0), arrival(1, 3, true, 0)})
	if got := tk.Recent(c.Now(), 30*time.Second).Get(testPeer(1).Key, 3); got.Rejected != 2 || got.Seconds != 5 || got.RejectRate() != 2.0/5 {
		t.Fatalf("5 s in: %+v", got)
	}
	// A peer sending 10 a second for a minute, then silent.
	for range 60 {
		c.Add(time.Second)
		var as []insight.Arrival
		for range 10 {
			as = append(as, arrival(2, 3, true, 0))
		}
		tk.Add(c.Now(), as)
	}
	// 65 s in, 5 s into a bucket: 30 s = the last two buckets and 5 s of
	// this one, 25 s, which hold the 26 drains from 40 s to 65 s.
	got := tk.Recent(c.Now(), 30*time.Second).Get(testPeer(2).Key, 3)
	if got.Seconds != 25 || got.Rejected != 260 || got.RejectRate() != 10.4 {
		t.Fatalf("while it sends: %+v", got)
	}
	// 30 s after it stopped it is gone from now; the 5 minutes keep it.
	c.Add(30 * time.Second)
	tk.Add(c.Now(), nil)
	if got := tk.Recent(c.Now(), 30*time.Second).Get(testPeer(2).Key, 3); got.Rejected != 0 {
		t.Fatalf("30 s after: %+v", got)
	}
	if got := tk.Snapshot(c.Now()).Get(testPeer(2).Key, 3); got.Rejected != 600 {
		t.Fatalf("the 5 minutes: %+v", got)
	}
	// A window beyond the record is the record's.
	if got := tk.Recent(c.Now(), time.Hour).Get(testPeer(2).Key, 3); got.Rejected != 600 {
		t.Fatalf("an hour: %+v", got)
	}
}

// TestTalkersBounded: a closed bucket keeps the heaviest (peer, group)s
// only, so a flood of one-request peers does not push out the heavy one.
func TestTalkersBounded(t *testing.T) {
	c := limitertest.NewClock(r0)
	tk := insight.NewTalkers(c.Now())
	var as []insight.Arrival
	for i := range 5000 {
		as = append(as, arrival(1000+i, 3, false, 0))
	}
	for range 50 {
		as = append(as, arrival(1, 3, true, 0))
	}
	tk.Add(c.Now(), as)
	c.Add(insight.TalkersBucket)
	tk.Add(c.Now(), nil) // closes the bucket
	top := tk.Top(c.Now(), insight.ByRequests, 1000, 0)
	if len(top) > 600 || top[0].Peer != testPeer(1).Key || top[0].Requests != 50 {
		t.Fatalf("%d kept, first %+v", len(top), top[0])
	}
}

// TestActivity: the abusive peer of a real limiter is at the top after a
// drain, its rejections are collected once for the record, and the
// sampling follows the traffic.
func TestActivity(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 0, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 5, LeakyTickInterval: 60000, LeakyTickReduction: 5, ConcurrencyLimit: 100,
	}
	l, g := replayLimiter(t, s)
	c := limitertest.NewClock(r0)
	a := insight.NewActivity(l, recorderOf(l), c.Now)
	for i := range 30 {
		d := l.Decide(c.Now().Add(time.Duration(i)*time.Millisecond), testPeer(9), g)
		d.Release()
	}
	d := l.Decide(c.Now(), testPeer(10), g)
	d.Release()
	c.Add(2 * time.Second)
	a.Drain()
	top := a.Talkers().Top(c.Now(), insight.ByRejections, 5, 0)
	if len(top) != 1 || top[0].Peer != testPeer(9).Key || top[0].Group != g || top[0].Rejected != 25 || top[0].Requests != 30 {
		t.Fatalf("top: %+v", top)
	}
	offs, dropped := a.TakeOffenses()
	if dropped != 0 || len(offs) != 1 || offs[0].Group != "test" || offs[0].Rejections != 25 ||
		!offs[0].First.Equal(r0.Add(5*time.Millisecond)) || !offs[0].Last.Equal(r0.Add(29*time.Millisecond)) {
		t.Fatalf("offenses: %+v", offs)
	}
	if again, _ := a.TakeOffenses(); len(again) != 0 {
		t.Fatalf("taken twice: %+v", again)
	}
	if a.Log().Len() != 31 {
		t.Fatalf("logged %d", a.Log().Len())
	}

	// 100 000 decisions in a second: the samples narrow to their targets.
	for i := range 100_000 {
		d := l.Decide(c.Now(), testPeer(i%5000), g)
		d.Release()
		if i%4000 == 0 {
			a.Drain()
		}
	}
	c.Add(time.Second)
	a.Drain()
	peer, nth, lost := a.Sampling()
	wantPeer, wantNth := insight.ArrivalShifts(100_000)
	if lost != 0 || nth != wantNth || peer < wantPeer-1 || peer > wantPeer+1 {
		t.Fatalf("sampling after 100 000/s: peer %d nth %d lost %d, want about %d and %d", peer, nth, lost, wantPeer, wantNth)
	}
}
