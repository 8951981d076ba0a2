package throttle_test

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
)

// thrT0 is the throttle tests' fake timeline origin.
var thrT0 = time.UnixMilli(1_700_000_000_000)

func thrAt(ms int64) time.Time { return thrT0.Add(time.Duration(ms) * time.Millisecond) }

// thrConfig is the setup of ar_rate_limiter's own tests: every path of one type
// ("api") at rpm, with a 30 s period and 1 s retry interval.
func thrConfig(rpm int) throttle.Config {
	return throttle.Config{
		Period: 30 * time.Second, RetryInterval: time.Second,
		DefaultType: "api", DefaultRPM: rpm, Compile: limiter.ThrottleMatcher,
	}
}

func thrNew(t testing.TB, cfg throttle.Config) *throttle.Throttle {
	t.Helper()
	th, err := throttle.New(thrT0, cfg)
	if err != nil {
		t.Fatalf("NewThrottle: %v", err)
	}
	return th
}

// thrStep is one event on the fake timeline. op is "try", "retry" or
// "peek" (evaluate a call; want is "admit", "wait", "exempt" or "off"),
// "off"/"on" (the switch) or "cleanup" (want: the keys removed, as text).
type thrStep struct {
	at         int64
	op         string
	peer, path string
	want       string
	count      int   // the result's Count; -1 skips
	earliestMS int64 // EarliestIn of a "wait", in ms; 0 skips
}

func thrTry(at int64, peer, want string, count int) thrStep {
	return thrStep{at: at, op: "try", peer: peer, path: "/api/data", want: want, count: count}
}

func thrRetry(at int64, peer, want string, count int) thrStep {
	return thrStep{at: at, op: "retry", peer: peer, path: "/api/data", want: want, count: count}
}

func (s thrStep) earliest(ms int64) thrStep { s.earliestMS = ms; return s }
func (s thrStep) on(path string) thrStep    { s.path = path; return s }

func thrRun(t *testing.T, th *throttle.Throttle, steps []thrStep) {
	t.Helper()
	for i, s := range steps {
		now := thrAt(s.at)
		var r throttle.Result
		switch s.op {
		case "try":
			r = th.Try(now, s.peer, s.path)
		case "retry":
			r = th.Retry(now, s.peer, s.path)
		case "peek":
			r = th.Peek(now, s.peer, s.path)
		case "off", "on":
			th.SetEnabled(s.op == "on")
			continue
		case "cleanup":
			if got := fmt.Sprint(th.Cleanup(now)); got != s.want {
				t.Errorf("step %d (t=%d ms cleanup): removed %s keys, want %s", i, s.at, got, s.want)
			}
			continue
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		got := "admit"
		switch {
		case r.Exempt:
			got = "exempt"
		case r.Off:
			got = "off"
		case !r.Admitted:
			got = "wait"
		}
		if got != s.want {
			t.Errorf("step %d (t=%d ms %s %s %s): %s, want %s (%+v)", i, s.at, s.op, s.peer, s.path, got, s.want, r)
			continue
		}
		if s.count >= 0 && r.Count != s.count {
			t.Errorf("step %d (t=%d ms %s %s): count %d, want %d", i, s.at, s.op, s.peer, r.Count, s.count)
		}
		if r.Admitted != (got != "wait") {
			t.Errorf("step %d: Admitted = %v for %s", i, r.Admitted, got)
		}
		wantRetry := time.Duration(0)
		if !r.Admitted {
			wantRetry = th.Config().RetryInterval
		}
		if r.RetryIn != wantRetry {
			t.Errorf("step %d: RetryIn = %v, want %v", i, r.RetryIn, wantRetry)
		}
		if r.Admitted && r.EarliestIn != 0 {
			t.Errorf("step %d: admitted with EarliestIn = %v", i, r.EarliestIn)
		}
		if !r.Admitted && r.EarliestIn <= 0 {
			t.Errorf("step %d: not admitted with EarliestIn = %v, want > 0", i, r.EarliestIn)
		}
		if s.earliestMS != 0 && r.EarliestIn != time.Duration(s.earliestMS)*time.Millisecond {
			t.Errorf("step %d: EarliestIn = %v, want %d ms", i, r.EarliestIn, s.earliestMS)
		}
	}
}

// ar_rate_limiter's EUnit tests (ar_rate_limiter_*_test), on a fake timeline.
func TestThrottleArRateLimiter(t *testing.T) {
	t.Run("exempt peer is instant", func(t *testing.T) {
		cfg := thrConfig(60)
		cfg.ExemptPeers = []string{"trusted-peer"}
		th := thrNew(t, cfg)
		var steps []thrStep
		for range 100 {
			steps = append(steps, thrTry(0, "trusted-peer", "exempt", 0))
		}
		// Exact match only: the peer is an opaque string.
		steps = append(steps, thrTry(0, "trusted-peer:1984", "admit", 1), thrTry(0, "Trusted-Peer", "admit", 1))
		thrRun(t, th, steps)
		if st := th.Stats(); st.Exempt != 100 || st.Keys != 2 {
			t.Errorf("stats %+v, want 100 exempt, 2 keys", st)
		}
	})
	t.Run("exempt path is instant", func(t *testing.T) {
		cfg := thrConfig(2) // capacity 1
		cfg.ExemptPaths = []string{"/health", "re:/metrics"}
		th := thrNew(t, cfg)
		thrRun(t, th, []thrStep{
			thrTry(0, "peer1", "exempt", 0).on("/health"),
			thrTry(0, "peer1", "exempt", 0).on("/health"),
			thrTry(0, "peer1", "exempt", 0).on("/METRICS/x"), // re: is case-insensitive, unanchored
			thrTry(0, "peer1", "exempt", 0).on("/health?full=1"),
			thrTry(0, "peer1", "admit", 1).on("/Health"), // a glob is not
			thrTry(0, "peer1", "wait", 1).on("/healthz"),
		})
	})
	t.Run("under the limit is instant", func(t *testing.T) {
		th := thrNew(t, thrConfig(60)) // capacity 24
		var steps []thrStep
		for i := range 10 {
			steps = append(steps, thrTry(int64(i), "peer1", "admit", i+1))
		}
		thrRun(t, th, steps)
	})
	t.Run("over the limit waits", func(t *testing.T) {
		// rpm 10: 5 per 30 s, throttled from 80 % of that: 4 calls.
		th := thrNew(t, thrConfig(10))
		steps := []thrStep{
			thrTry(0, "peer1", "admit", 1),
			thrTry(0, "peer1", "admit", 2),
			thrTry(0, "peer1", "admit", 3),
			thrTry(0, "peer1", "admit", 4),
			thrTry(0, "peer1", "wait", 4).earliest(30001),
		}
		// Re-evaluated every second; the oldest timestamps (0) leave the
		// window once now − 30 s > 0, so the call goes at 31 s: it waited
		// at least 1 s.
		for s := int64(1); s <= 30; s++ {
			steps = append(steps, thrRetry(s*1000, "peer1", "wait", 4).earliest(30001-s*1000))
		}
		steps = append(steps, thrRetry(31000, "peer1", "admit", 1))
		thrRun(t, th, steps)
		if st := th.Stats(); st.Admitted != 5 || st.Refused != 31 {
			t.Errorf("stats %+v, want 5 admitted, 31 refused", st)
		}
	})
	t.Run("peers are independent", func(t *testing.T) {
		cfg := thrConfig(10)
		cfg.Rules = []throttle.Rule{{Type: "chunk", RPM: 12000, Paths: []string{"/chunk/**"}}}
		th := thrNew(t, cfg)
		thrRun(t, th, []thrStep{
			thrTry(0, "peer1", "admit", 1), thrTry(0, "peer1", "admit", 2),
			thrTry(0, "peer1", "admit", 3), thrTry(0, "peer1", "admit", 4),
			thrTry(0, "peer1", "wait", 4),
			thrTry(0, "peer2", "admit", 1),
			thrTry(0, "peer3", "admit", 1),
			// Types are independent too.
			thrTry(0, "peer1", "admit", 1).on("/chunk/1"),
		})
	})
	t.Run("off makes 100 calls instant", func(t *testing.T) {
		th := thrNew(t, thrConfig(60))
		steps := []thrStep{{op: "off"}}
		for range 100 {
			steps = append(steps, thrTry(0, "peer1", "off", 0))
		}
		thrRun(t, th, steps)
		if st := th.Stats(); st.Off != 100 || st.Timestamps != 0 || st.Keys != 0 {
			t.Errorf("stats %+v, want 100 off, nothing recorded", st)
		}
	})
	t.Run("on limits again", func(t *testing.T) {
		th := thrNew(t, thrConfig(10))
		thrRun(t, th, []thrStep{
			{op: "off"}, {op: "on"},
			thrTry(0, "peer1", "admit", 1), thrTry(0, "peer1", "admit", 2),
			thrTry(0, "peer1", "admit", 3), thrTry(0, "peer1", "admit", 4),
			thrTry(0, "peer1", "wait", 4),
		})
	})
	t.Run("toggle", func(t *testing.T) {
		th := thrNew(t, thrConfig(60))
		for i, on := range []bool{false, true, false, true} {
			th.SetEnabled(on)
			if th.Enabled() != on {
				t.Errorf("toggle %d: Enabled() = %v, want %v", i, th.Enabled(), on)
			}
		}
	})
}

// Off does not release a call already waiting: Retry ignores the switch
// (and exemptions), while new calls go through at once.
func TestThrottleOffDoesNotReleaseWaiters(t *testing.T) {
	th := thrNew(t, thrConfig(2)) // capacity 1
	thrRun(t, th, []thrStep{
		thrTry(0, "p", "admit", 1),
		thrTry(0, "p", "wait", 1),
		{op: "off"},
		thrTry(500, "p", "off", 0),      // a new call
		thrRetry(1000, "p", "wait", 1),  // the waiting one
		thrPeek(1000, "p", "off"),       // what a new call would get
		thrRetry(30000, "p", "wait", 1), // exactly period old: still counts
		thrRetry(30001, "p", "admit", 1),
		{op: "on"},
		thrTry(30001, "p", "wait", 1),
	})
}

func thrPeek(at int64, peer, want string) thrStep {
	return thrStep{at: at, op: "peek", peer: peer, path: "/api/data", want: want, count: -1}
}

// A timestamp exactly period old still counts; one ms older is dropped.
func TestThrottlePeriodBoundary(t *testing.T) {
	th := thrNew(t, thrConfig(6)) // capacity 2
	thrRun(t, th, []thrStep{
		thrTry(0, "p", "admit", 1),
		thrTry(10, "p", "admit", 2),
		thrTry(20, "p", "wait", 2).earliest(29981),
		thrPeek(30000, "p", "wait"),   // ts 0 = now − period: counts
		thrTry(30000, "p", "wait", 2), // so does Try
		thrTry(30001, "p", "admit", 2),
		thrTry(30001, "p", "wait", 2).earliest(10), // ts 10 leaves at 30011
		thrTry(30010, "p", "wait", 2),
		thrTry(30011, "p", "admit", 2),
	})
}

// Peek answers without recording anything.
func TestThrottlePeek(t *testing.T) {
	th := thrNew(t, thrConfig(6)) // capacity 2
	thrRun(t, th, []thrStep{
		thrPeek(0, "p", "admit"), thrPeek(0, "p", "admit"), thrPeek(0, "p", "admit"),
		thrTry(0, "p", "admit", 1),
		{at: 5, op: "peek", peer: "p", path: "/x", want: "admit", count: 1},
		thrTry(5, "p", "admit", 2),
		{at: 6, op: "peek", peer: "p", path: "/x", want: "wait", count: 2, earliestMS: 29995},
	})
	if st := th.Stats(); st.Admitted != 2 || st.Refused != 0 || st.Timestamps != 2 {
		t.Errorf("stats %+v: Peek must not count or record", st)
	}
}

// ar_rate_limiter never frees an idle key; Cleanup does.
func TestThrottleCleanup(t *testing.T) {
	th := thrNew(t, thrConfig(10))
	thrRun(t, th, []thrStep{
		thrTry(0, "a", "admit", 1),
		thrTry(10000, "b", "admit", 1),
		thrTry(10000, "a", "admit", 2),
		{at: 30000, op: "cleanup", want: "0"},
		{at: 30001, op: "cleanup", want: "0"}, // a keeps its ts 10000
		{at: 40001, op: "cleanup", want: "2"},
	})
	if st := th.Stats(); st.Keys != 0 || st.Timestamps != 0 {
		t.Errorf("after cleanup: %+v", st)
	}
	// A key with waiters stays, even with nothing in its window.
	th.AddWaiter("w", "api", 1)
	thrRun(t, th, []thrStep{{at: 100000, op: "cleanup", want: "0"}})
	th.AddWaiter("w", "api", -1)
	if st := th.Stats(); st.Keys != 0 || st.Waiters != 0 || st.Delayed != 1 {
		t.Errorf("after the waiter left: %+v", st)
	}
	thrRun(t, th, []thrStep{{at: 100000, op: "cleanup", want: "0"}})
}

func TestThrottleKeysAndWaiters(t *testing.T) {
	th := thrNew(t, arweaveThrottle())
	now := thrAt(0)
	th.Try(now, "1.2.3.4:1984", "/hash_list") // block_index: capacity 1
	th.Try(now, "1.2.3.4:1984", "/chunk/1")
	th.Try(now, "1.2.3.4:1984", "/chunk/2")
	th.Try(now, "peer-b", "/tx")
	if r := th.Try(now, "1.2.3.4:1984", "/hash_list"); r.Admitted {
		t.Fatal("second /hash_list admitted")
	}
	th.AddWaiter("1.2.3.4:1984", "block_index", 1)
	th.AddWaiter("1.2.3.4:1984", "block_index", 1)
	got := th.Keys(thrAt(1000), 0)
	want := []throttle.KeyView{
		{Peer: "1.2.3.4:1984", Type: "block_index", Count: 1, Capacity: 1, Waiters: 2, EarliestIn: 29001 * time.Millisecond},
		{Peer: "1.2.3.4:1984", Type: "chunk", Count: 2, Capacity: 4800},
		{Peer: "peer-b", Type: "default", Count: 1, Capacity: 360},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Keys =\n%+v\nwant\n%+v", got, want)
	}
	if got := th.Keys(thrAt(1000), 1); len(got) != 1 || got[0].Type != "block_index" {
		t.Errorf("Keys(limit 1) = %+v", got)
	}
	if got := th.Keys(thrAt(30001), 0); got[0].Count != 0 || got[0].EarliestIn != 0 {
		t.Errorf("Keys after the window: %+v", got[0])
	}
	st := th.Stats()
	if st.Keys != 3 || st.Waiters != 2 || st.Delayed != 2 || st.Admitted != 4 || st.Refused != 1 || st.Timestamps != 4 {
		t.Errorf("Stats = %+v", st)
	}
	th.AddWaiter("1.2.3.4:1984", "block_index", -2)
	th.AddWaiter("nobody", "x", -1) // no such key: nothing happens
	if st := th.Stats(); st.Waiters != 0 || st.Keys != 3 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestThrottleSnapshotRestore(t *testing.T) {
	th := thrNew(t, thrConfig(10))
	thrRun(t, th, []thrStep{
		thrTry(0, "a", "admit", 1),
		thrTry(1000, "a", "admit", 2),
		thrTry(2000, "b", "admit", 1),
		thrTry(20000, "a", "admit", 3),
	})
	th.SetEnabled(false)
	snap := th.Snapshot(thrAt(30500)) // a's ts 0 has left
	want := throttle.Snapshot{
		TakenAt: thrAt(30500).UnixMilli(),
		Enabled: false,
		Keys: []throttle.KeyRecord{
			{Peer: "a", Type: "api", Timestamps: []int64{thrAt(1000).UnixMilli(), thrAt(20000).UnixMilli()}},
			{Peer: "b", Type: "api", Timestamps: []int64{thrAt(2000).UnixMilli()}},
		},
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("Snapshot =\n%+v\nwant\n%+v", snap, want)
	}

	t.Run("after a gap", func(t *testing.T) {
		r := thrNew(t, thrConfig(10))
		r.Try(thrAt(0), "stale", "/x") // replaced by the restore
		r.Restore(thrAt(31500), snap)  // 1 s later: a's ts 1000 has left
		if r.Enabled() {
			t.Error("Restore did not restore the switch")
		}
		r.SetEnabled(true)
		got := r.Snapshot(thrAt(31500))
		if len(got.Keys) != 2 || !reflect.DeepEqual(got.Keys[0].Timestamps, []int64{thrAt(20000).UnixMilli()}) {
			t.Errorf("restored %+v", got.Keys)
		}
		if st := r.Stats(); st.Keys != 2 || st.Timestamps != 2 {
			t.Errorf("Stats = %+v", st)
		}
	})
	t.Run("clock gone backwards", func(t *testing.T) {
		r := thrNew(t, thrConfig(6)) // capacity 2
		// An hour before the snapshot: taken as no gap at all, everything
		// shifted back by an hour.
		back := thrAt(30500).Add(-time.Hour)
		r.Restore(back, snap)
		got := r.Snapshot(back)
		shift := time.Hour.Milliseconds()
		wantA := []int64{thrAt(1000).UnixMilli() - shift, thrAt(20000).UnixMilli() - shift}
		if len(got.Keys) != 2 || !reflect.DeepEqual(got.Keys[0].Timestamps, wantA) {
			t.Errorf("restored %+v, want a at %v", got.Keys, wantA)
		}
		// a is full (2 of 2) until its shifted ts 1000 leaves, 500 ms + 1
		// after the (shifted) snapshot time.
		r.SetEnabled(true)
		if res := r.Try(back, "a", "/x"); res.Admitted || res.EarliestIn != 501*time.Millisecond {
			t.Errorf("Try right after restore = %+v", res)
		}
		if res := r.Try(back.Add(501*time.Millisecond), "a", "/x"); !res.Admitted {
			t.Errorf("Try after 501 ms = %+v", res)
		}
	})
	t.Run("odd snapshots", func(t *testing.T) {
		r := thrNew(t, thrConfig(10))
		now := thrAt(50000)
		r.AddWaiter("w", "api", 1) // waiters survive a restore
		r.Restore(now, throttle.Snapshot{Enabled: true, Keys: []throttle.KeyRecord{
			{Peer: "", Type: "api", Timestamps: []int64{now.UnixMilli()}},
			{Peer: "x", Type: "api", Timestamps: []int64{now.UnixMilli() + 5000, now.UnixMilli() - 100, 7}},
			{Peer: "x", Type: "api", Timestamps: []int64{now.UnixMilli() - 50}},
		}})
		got := r.Snapshot(now)
		wantX := []int64{now.UnixMilli() - 100, now.UnixMilli() - 50, now.UnixMilli()}
		if len(got.Keys) != 1 || !reflect.DeepEqual(got.Keys[0].Timestamps, wantX) {
			t.Errorf("restored %+v, want x at %v", got.Keys, wantX)
		}
		if st := r.Stats(); st.Keys != 2 || st.Waiters != 1 || st.Timestamps != 3 {
			t.Errorf("Stats = %+v", st)
		}
	})
}

// Many goroutines on one key at one instant: exactly capacity get in.
func TestThrottleConcurrentOneKey(t *testing.T) {
	th := thrNew(t, thrConfig(60)) // capacity 24
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				now := thrAt(int64(i % 3)) // a little out of order
				if th.Try(now, "hot", "/x").Admitted {
					admitted.Add(1)
				}
				th.AddWaiter("hot", "api", 1)
				th.Keys(now, 5)
				th.AddWaiter("hot", "api", -1)
				if g == 0 && i%50 == 0 {
					th.Snapshot(now)
					th.Cleanup(now)
					th.Stats()
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 24 {
		t.Errorf("admitted %d, want 24", got)
	}
	if st := th.Stats(); st.Waiters != 0 || st.Keys != 1 || st.Timestamps != 24 || st.Admitted != 24 || st.Refused != 16*200-24 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestThrottleConcurrentManyKeys(t *testing.T) {
	th := thrNew(t, arweaveThrottle())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				peer := fmt.Sprintf("peer-%d", (g*2000+i)%500)
				th.Try(thrAt(int64(i)), peer, "/hash_list")
				if i%500 == 0 {
					cfg := arweaveThrottle()
					cfg.DefaultRPM = 100 + i
					if err := th.Apply(cfg); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if st := th.Stats(); st.Keys != 500 || st.Admitted != 500 {
		t.Errorf("Stats = %+v, want 500 keys each admitted once", st)
	}
	if n := th.Cleanup(thrAt(2000 + 30001)); n != 500 {
		t.Errorf("Cleanup removed %d, want 500", n)
	}
}

func BenchmarkThrottleTry(b *testing.B) {
	th := thrNew(b, arweaveThrottle())
	peers := make([]string, 1024)
	for i := range peers {
		peers[i] = fmt.Sprintf("10.0.%d.%d:1984", i/256, i%256)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			th.Try(thrAt(int64(i)), peers[i%len(peers)], "/chunk/123")
			i++
		}
	})
}

// arweaveThrottle is the shipped outbound throttle table, its patterns
// compiled by the core (throttle.Config.Compile).
func arweaveThrottle() throttle.Config {
	c := throttle.ArweaveConfig()
	c.Compile = limiter.ThrottleMatcher
	return c
}
