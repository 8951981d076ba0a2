package throttle_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
)

var at0 = time.UnixMilli(1_700_000_000_000)

func ams(ms int64) time.Time { return at0.Add(time.Duration(ms) * time.Millisecond) }

func newAdaptive(t *testing.T) *throttle.Throttle {
	t.Helper()
	cfg := arweaveThrottle()
	cfg.Mode = throttle.ModeAdaptive
	th, err := throttle.New(at0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// reply is the four fields of a reply naming group g.
func reply(g string, total, remaining, amount, reset int64) map[string]string {
	return map[string]string{
		"ratelimit-limit":        strconv.FormatInt(total, 10) + `, ` + strconv.FormatInt(total, 10) + `;policy="` + g + ` usage", 150;policy="` + g + ` concurrency" `,
		"ratelimit-remaining":    strconv.FormatInt(remaining, 10),
		"ratelimit-reset":        strconv.FormatInt(reset, 10),
		"ratelimit-reset-amount": strconv.FormatInt(amount, 10),
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestAdaptivePacing follows the adaptive rule (docs/throttle.md) on a fake
// timeline: an unknown route goes; a learned quota is taken call by call; at 0
// the calls queue first in first out until the refill (reset seconds after the
// reply that emptied it: min(total, remaining + amount)) or a new reply; tx/*
// never waits.
func TestAdaptivePacing(t *testing.T) {
	th := newAdaptive(t)
	const peer = "1.2.3.4:1984"
	if r := th.TryAdaptive(ams(0), peer, "/info"); !r.Admitted || r.Outcome != throttle.OutcomeUnknown {
		t.Fatalf("before any reply: %+v", r)
	}
	if o := th.Observe(ams(0), peer, "/info", reply("general", 453, 2, 450, 3)); o.Outcome != "learned" || o.Group != "general" {
		t.Fatalf("observe: %+v", o)
	}
	// /peers shares nothing with /info until a reply binds it; /info's key
	// is bound to general.
	if r := th.TryAdaptive(ams(1), peer, "/peers"); r.Outcome != throttle.OutcomeUnknown {
		t.Errorf("/peers: %+v", r)
	}
	for i := range 2 {
		if r := th.TryAdaptive(ams(10), peer, "/info"); !r.Admitted || r.Outcome != throttle.OutcomeQuota || r.Group != "general" {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	// The quota is empty: three calls wait, in order.
	var tickets []throttle.AdaptiveResult
	for range 3 {
		r := th.TryAdaptive(ams(20), peer, "/info")
		if r.Admitted || r.Outcome != throttle.OutcomeQueued || r.WaitIn != 0 {
			t.Fatalf("at 0 left: %+v", r)
		}
		tickets = append(tickets, r)
	}
	if r := th.TryAdaptive(ams(20), peer, "/tx/abc"); !r.Admitted || r.Outcome != throttle.OutcomeSkip {
		t.Errorf("tx: %+v", r)
	}
	// A reply with 0 left and reset 3 s: the refill is armed at 3020.
	th.Observe(ams(20), peer, "/info", reply("general", 453, 0, 2, 3))
	r := th.PollAdaptive(ams(21), tickets[0].Ticket)
	if r.Admitted || r.WaitIn != 2999*time.Millisecond {
		t.Fatalf("before the refill: %+v", r)
	}
	// At the refill, 2 calls come back: the two oldest waiters go, the
	// third waits on.
	for i, want := range []bool{true, true, false} {
		r := th.PollAdaptive(ams(3020), tickets[i].Ticket)
		if r.Admitted != want {
			t.Errorf("ticket %d at the refill: %+v", i, r)
		}
	}
	if s := th.AdaptiveStats(); s.Waiting != 1 || s.Queued != 3 || s.Admitted != 2 {
		t.Errorf("stats: %+v", s)
	}
	// A new reply with calls left serves the last waiter at once, and
	// wakes it.
	wake := th.PollAdaptive(ams(3021), tickets[2].Ticket).Wake
	th.Observe(ams(3022), peer, "/info", reply("general", 453, 5, 450, 1))
	if !closed(wake) {
		t.Error("the waiter was not woken")
	}
	if r := th.PollAdaptive(ams(3023), tickets[2].Ticket); !r.Admitted || r.Outcome != throttle.OutcomeQuota {
		t.Errorf("after the reply: %+v", r)
	}
	// 5 − 1 (the waiter) = 4 left.
	for i := range 4 {
		if r := th.TryAdaptive(ams(3024), peer, "/info"); r.Outcome != throttle.OutcomeQuota {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	r = th.TryAdaptive(ams(3025), peer, "/info")
	if r.Admitted {
		t.Fatalf("past the quota: %+v", r)
	}
	// A reply with 0 left and reset 0 arms no refill: the wait ends with
	// a reply, or the caller gives up and cancels.
	th.Observe(ams(3026), peer, "/info", reply("general", 453, 0, 1, 0))
	if p := th.PollAdaptive(ams(99999), r.Ticket); p.Admitted || p.WaitIn != 0 {
		t.Errorf("reset 0: %+v", p)
	}
	th.CancelAdaptive(r.Ticket)
	if s := th.AdaptiveStats(); s.Waiting != 0 {
		t.Errorf("after cancel: %+v", s)
	}
}

// A reply without the fields makes the peer incompatible: its waiters go,
// its calls are never throttled, until a reply with the fields.
func TestAdaptiveIncompatible(t *testing.T) {
	th := newAdaptive(t)
	const peer = "peer-a"
	th.Observe(ams(0), peer, "/chunk/1", reply("chunk", 10, 0, 10, 30))
	w := th.TryAdaptive(ams(1), peer, "/chunk/2")
	if w.Admitted || w.Group != "chunk" {
		t.Fatalf("chunk/2 shares chunk's key: %+v", w)
	}
	o := th.Observe(ams(2), peer, "/chunk/3", map[string]string{"content-type": "text/plain", "ratelimit-limit": "10"})
	if o.Outcome != "incompatible" || o.Reason != "missing_header" || o.Header != "ratelimit-remaining" {
		t.Fatalf("observe: %+v", o)
	}
	if !closed(w.Wake) {
		t.Error("the waiter was not woken")
	}
	if r := th.PollAdaptive(ams(3), w.Ticket); !r.Admitted || r.Outcome != throttle.OutcomeReleased {
		t.Errorf("the waiter: %+v", r)
	}
	for range 20 {
		if r := th.TryAdaptive(ams(4), peer, "/chunk/4"); !r.Admitted || r.Outcome != throttle.OutcomeIncompatible {
			t.Fatalf("incompatible: %+v", r)
		}
	}
	// Malformed values do not reset: the old quota stays.
	th.Observe(ams(5), peer, "/chunk/5", reply("chunk", 10, 1, 10, 30))
	if o := th.Observe(ams(6), peer, "/chunk/5", with(reply("chunk", 10, 1, 10, 30), "ratelimit-reset", "86401")); o.Outcome != "refused" || o.Reason != "invalid_header_value" {
		t.Errorf("out of range: %+v", o)
	}
	if r := th.TryAdaptive(ams(7), peer, "/chunk/6"); r.Outcome != throttle.OutcomeQuota {
		t.Errorf("after a refused reply: %+v", r)
	}
	if r := th.TryAdaptive(ams(8), peer, "/chunk/6"); r.Admitted {
		t.Errorf("the quota was not kept: %+v", r)
	}
}

// Hostile replies: huge group ids, a thousand groups from one peer, a
// group other than the one the path is bound to, a thousand paths: each
// refused as the 2.9.7 client refuses it, counted, and the state stays
// bounded.
func TestAdaptiveHostile(t *testing.T) {
	th := newAdaptive(t)
	const peer = "evil"
	for i := range throttle.MaxGroupsPerPeer + 50 {
		o := th.Observe(ams(0), peer, "/p"+strconv.Itoa(i), reply("g"+strconv.Itoa(i), 10, 5, 1, 1))
		want := "learned"
		if i >= throttle.MaxGroupsPerPeer {
			want = "refused"
		}
		if o.Outcome != want || (want == "refused" && o.Reason != "too_many_groups") {
			t.Fatalf("group %d: %+v", i, o)
		}
	}
	if o := th.Observe(ams(0), peer, "/p1", reply("other", 10, 5, 1, 1)); o.Reason != "group_mismatch" {
		t.Errorf("mismatch: %+v", o)
	}
	// More paths of a known group than routes allowed.
	for i := range 10 {
		if o := th.Observe(ams(0), peer, "/q"+strconv.Itoa(i), reply("g1", 10, 5, 1, 1)); o.Reason != "routes_full" {
			t.Fatalf("route %d: %+v", i, o)
		}
	}
	long := strings.Repeat("x", throttle.MaxGroupIDBytes+1)
	if o := th.Observe(ams(0), peer, "/p1", reply(long, 10, 5, 1, 1)); o.Outcome != "incompatible" || o.Reason != "header_id_too_long" {
		t.Errorf("long id: %+v", o)
	}
	s := th.AdaptiveStats()
	if s.Peers != 1 || s.Quotas != throttle.MaxGroupsPerPeer || s.Refused["too_many_groups"] != 50 ||
		s.Refused["group_mismatch"] != 1 || s.Refused["routes_full"] != 10 || s.Refused["header_id_too_long"] != 1 {
		t.Errorf("stats: %+v", s)
	}
	// At most MaxWaitingPerPeer wait on one peer; the next go at once.
	th.Observe(ams(1), "busy", "/info", reply("general", 10, 0, 1, 10))
	for i := range throttle.MaxWaitingPerPeer + 3 {
		r := th.TryAdaptive(ams(2), "busy", "/info")
		if want := i >= throttle.MaxWaitingPerPeer; r.Admitted != want || (want && r.Outcome != throttle.OutcomeQueueFull) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if s := th.AdaptiveStats(); s.Waiting != throttle.MaxWaitingPerPeer || s.QueueFull != 3 {
		t.Errorf("waiting %d, queue_full %d", s.Waiting, s.QueueFull)
	}
	// A reply from an unknown peer that lacks the fields tracks nothing.
	th.Observe(ams(3), "stranger", "/info", map[string]string{})
	if s := th.AdaptiveStats(); s.Peers != 2 {
		t.Errorf("peers %d", s.Peers)
	}
}

// Idle quotas are forgotten after a minute with nothing waiting and no
// refill pending; the snapshot carries what is known across a restart,
// and an old snapshot without it loads.
func TestAdaptiveCleanupAndSnapshot(t *testing.T) {
	th := newAdaptive(t)
	th.Observe(ams(0), "a", "/info", reply("general", 453, 10, 450, 20))
	th.Observe(ams(0), "b", "/chunk/1", reply("chunk", 100, 0, 30, 20))
	snap := th.Snapshot(ams(1))
	var as throttle.AdaptiveSnapshot
	if err := json.Unmarshal(snap.Adaptive, &as); err != nil || len(as.Peers) != 2 {
		t.Fatalf("snapshot: %v %s", err, snap.Adaptive)
	}
	th2 := newAdaptive(t)
	th2.Restore(ams(2), snap)
	if r := th2.TryAdaptive(ams(3), "a", "/info"); r.Outcome != throttle.OutcomeQuota {
		t.Errorf("restored a: %+v", r)
	}
	if r := th2.TryAdaptive(ams(3), "b", "/chunk/9"); r.Admitted || r.WaitIn != 19997*time.Millisecond {
		t.Errorf("restored b: %+v", r)
	} else {
		th2.CancelAdaptive(r.Ticket)
	}
	// A snapshot from before the adaptive state restores none of it.
	old := snap
	old.Adaptive = nil
	th2.Restore(ams(4), old)
	if s := th2.AdaptiveStats(); s.Peers != 0 {
		t.Errorf("after an old snapshot: %+v", s)
	}
	// Cleanup: a's quota is idle at 60 s + 1; b's refill is pending until
	// 20 s, then it is idle too.
	if n := th.Cleanup(ams(60_000)); n != 0 {
		t.Errorf("cleanup at 60 s removed %d", n)
	}
	if n := th.Cleanup(ams(60_001)); n != 2 {
		t.Errorf("cleanup at 60.001 s removed %d", n)
	}
	if s := th.AdaptiveStats(); s.Peers != 0 || s.Quotas != 0 {
		t.Errorf("after cleanup: %+v", s)
	}
}

// The fixed mode is untouched by the adaptive state, and the switch and
// exemptions apply to the adaptive mode too.
func TestAdaptiveSwitchAndExempt(t *testing.T) {
	cfg := arweaveThrottle()
	cfg.Mode = throttle.ModeAdaptive
	cfg.ExemptPeers = []string{"friend"}
	th, err := throttle.New(at0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if th.Mode() != throttle.ModeAdaptive {
		t.Fatal(th.Mode())
	}
	th.Observe(ams(0), "friend", "/info", reply("general", 10, 0, 1, 10))
	if r := th.TryAdaptive(ams(1), "friend", "/info"); r.Outcome != throttle.OutcomeExempt {
		t.Errorf("exempt: %+v", r)
	}
	th.Observe(ams(0), "x", "/info", reply("general", 10, 0, 1, 10))
	th.SetEnabled(false)
	if r := th.TryAdaptive(ams(1), "x", "/info"); r.Outcome != throttle.OutcomeOff {
		t.Errorf("off: %+v", r)
	}
	cfg.Mode = 7
	if err := th.Apply(cfg); err == nil || !strings.Contains(err.Error(), "throttle.mode") {
		t.Errorf("bad mode: %v", err)
	}
}

// Calls, replies, polls, cancels, cleanups and snapshots on many
// goroutines: the race detector finds no race, and once every waiter has
// gone or given up nothing is left waiting.
func TestAdaptiveConcurrent(t *testing.T) {
	th := newAdaptive(t)
	peers := []string{"a", "b", "c"}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 300 {
				p := peers[(w+i)%len(peers)]
				now := ams(int64(i))
				switch i % 5 {
				case 0:
					th.Observe(now, p, "/info", reply("general", 10, int64(i%3), 2, int64(i%2)))
				case 4:
					th.Observe(now, p, "/info", map[string]string{})
				default:
					r := th.TryAdaptive(now, p, "/info")
					if !r.Admitted {
						if r2 := th.PollAdaptive(now.Add(time.Second), r.Ticket); !r2.Admitted {
							th.CancelAdaptive(r.Ticket)
						}
					}
				}
			}
		})
	}
	go func() {
		defer close(done)
		for i := range 50 {
			th.Cleanup(ams(int64(i * 1000)))
			th.Snapshot(ams(int64(i)))
			th.AdaptiveViews(ams(int64(i)), 10)
		}
	}()
	wg.Wait()
	<-done
	if s := th.AdaptiveStats(); s.Waiting != 0 {
		t.Errorf("waiting %d after every call ended", s.Waiting)
	}
}

// TestAdaptiveRestoreRefusesZeroAmount: a snapshot's quota is held to the
// states the throttle itself reaches. A pending refill (refill_at_ms set)
// always restores at least 1, as a reply's reset amount is ≥ 1: one of 0
// (or a negative amount) is skipped, and so is a full quota with a refill
// to come. After a refill none is pending, the amount is 0 and remaining
// may be the whole total: that quota restores (it used to be skipped, as
// remaining ≥ total). Found by FuzzCheckSnapshot.
func TestAdaptiveRestoreRefusesZeroAmount(t *testing.T) {
	th := newAdaptive(t)
	b := []byte(`{"adaptive":{"peers":[{"peer":"p","routes":{"/info":"g","/chunk/1":"h"},"quotas":[` +
		`{"group":"g","total":10,"remaining":0,"reset_amount":0,"reset_seconds":2,"refill_at_ms":1700000002000,"updated_ms":1},` +
		`{"group":"g","total":10,"remaining":0,"reset_amount":-1,"reset_seconds":2,"updated_ms":1},` +
		`{"group":"h","total":10,"remaining":10,"reset_amount":0,"reset_seconds":0,"updated_ms":1},` +
		`{"group":"g","total":10,"remaining":10,"reset_amount":3,"reset_seconds":0,"updated_ms":1}]}]}}`)
	if err := th.RestoreSnapshot(ams(0), b); err != nil {
		t.Fatal(err)
	}
	views := th.AdaptiveViews(ams(0), 0)
	if len(views) != 1 || views[0].Group != "h" || !views[0].Known || views[0].Remaining != 10 {
		t.Errorf("restored %+v, want h's quota alone", views)
	}
	if r := th.TryAdaptive(ams(0), "p", "/info"); !r.Admitted {
		t.Errorf("the refused quota throttles: %+v", r)
		th.CancelAdaptive(r.Ticket)
	}
}

// TestAdaptiveSnapshotInvalidUTF8: a group id, path key or peer that is
// not UTF-8 cannot travel in the snapshot's JSON (it would come back with
// U+FFFD in it, bound to the route in place of the real id, and every
// later reply would be refused as a group mismatch). Such records are
// left out: they are relearned from the next reply. Found by
// FuzzParseQuota.
func TestAdaptiveSnapshotInvalidUTF8(t *testing.T) {
	th := newAdaptive(t)
	th.Observe(ams(0), "a", "/info", reply("g\xbf", 10, 5, 5, 20))
	th.Observe(ams(0), "a", "/chunk/1", reply("chunk", 10, 5, 5, 20))
	th.Observe(ams(0), "b\xff", "/info", reply("general", 10, 5, 5, 20))
	th2 := newAdaptive(t)
	th2.Restore(ams(1), th.Snapshot(ams(1)))
	for _, v := range th2.AdaptiveViews(ams(1), 0) {
		if v.Group != "chunk" || v.Peer != "a" {
			t.Errorf("restored %+v", v)
		}
	}
	if o := th2.Observe(ams(2), "a", "/info", reply("g\xbf", 10, 4, 5, 20)); o.Outcome != "learned" {
		t.Errorf("the next reply after a restore: %+v", o)
	}
}
