package limiter_test

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// t0 is the fake timeline's origin: every group's tick 0 falls here.
var t0 = limitertest.T0

// at is limitertest.At: t0 plus ms milliseconds.
func at(ms int64) time.Time { return limitertest.At(ms) }

// testConfig returns the shipped Arweave groups and routes plus a group
// "test" with the given settings, and no exempt peers.
func testConfig(test limiter.GroupSettings) limiter.Config {
	groups := limiter.ArweaveGroups()
	groups["test"] = test
	return limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
}

// step is one event on the fake timeline. op is "req" (decide; the
// decision is kept under the step's index), "release" (of step ref),
// "reduce", "tick" (the sweeper) or "state" (check only).
type step struct {
	at   int64
	op   string
	peer string
	ref  int
	// want is the outcome of req: "sliding", "leaky", "concurrency",
	// "rate_limit", "would_reject", "unlimited", "denied"; of reduce:
	// "reduced", "noop", "disabled".
	want string
	// retry is the Retry-After a rejection must carry (0: not checked).
	retry int64
	// tokens, window, inflight: the peer's state after the step; -1 skips,
	// and tracked=false says the peer must have no entry.
	tokens, window, inflight int64
	untracked                bool
}

func req(at int64, peer, want string) step {
	return step{at: at, op: "req", peer: peer, want: want, tokens: -1, window: -1, inflight: -1}
}

func (s step) state(tokens, window, inflight int64) step {
	s.tokens, s.window, s.inflight = tokens, window, inflight
	return s
}

func (s step) retryAfter(r int64) step { s.retry = r; return s }

func release(at int64, ref int) step {
	return step{at: at, op: "release", ref: ref, tokens: -1, window: -1, inflight: -1}
}

func reduce(at int64, peer, want string) step {
	return step{at: at, op: "reduce", peer: peer, want: want, tokens: -1, window: -1, inflight: -1}
}

func tick(at int64) step { return step{at: at, op: "tick", tokens: -1, window: -1, inflight: -1} }

func check(at int64, peer string, tokens, window, inflight int64) step {
	return step{at: at, op: "state", peer: peer, tokens: tokens, window: window, inflight: inflight}
}

func gone(at int64, peer string) step {
	return step{at: at, op: "state", peer: peer, untracked: true, tokens: -1, window: -1, inflight: -1}
}

func outcome(d limiter.Decision) string {
	switch {
	case d.WouldReject:
		return "would_reject"
	case !d.Allowed:
		if d.Reason == limiter.ReasonDenied {
			return "denied"
		}
		return d.Reason.String()
	case d.Via == limiter.ViaSliding:
		return "sliding"
	case d.Via == limiter.ViaLeaky:
		return "leaky"
	case d.Via == limiter.ViaUnlimited:
		return "unlimited"
	}
	return "?"
}

// run plays steps against l in the group named group; releases are kept
// per step index; every admitted request still held at the end is released.
func run(t *testing.T, l *limiter.Limiter, group string, steps []step) {
	t.Helper()
	g, ok := l.GroupID(group)
	if !ok {
		t.Fatalf("no group %q", group)
	}
	held := map[int]*limiter.Decision{}
	defer func() {
		for _, d := range held {
			d.Release()
		}
	}()
	for i, s := range steps {
		now := at(s.at)
		var p peer.Peer
		if s.peer != "" {
			p = limitertest.Peer(s.peer)
		}
		switch s.op {
		case "req":
			d := l.Decide(now, p, g)
			if got := outcome(d); got != s.want {
				t.Fatalf("step %d (t=%d req %s): got %s, want %s", i, s.at, s.peer, got, s.want)
			}
			if s.retry != 0 && d.RetryAfter != s.retry {
				t.Fatalf("step %d (t=%d): Retry-After %d, want %d", i, s.at, d.RetryAfter, s.retry)
			}
			held[i] = &d
		case "release":
			d := held[s.ref]
			if d == nil {
				t.Fatalf("step %d: nothing held at step %d", i, s.ref)
			}
			d.Release()
		case "reduce":
			if got := l.Reduce(now, p.Key, g).String(); got != s.want {
				t.Fatalf("step %d (t=%d reduce %s): got %s, want %s", i, s.at, s.peer, got, s.want)
			}
		case "tick":
			l.Tick(now)
		case "state":
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if s.peer == "" {
			continue
		}
		var view *limiter.EntryView
		for _, v := range l.Peer(now, p.Key) {
			if v.Group == group {
				view = &v
			}
		}
		if s.untracked {
			if view != nil {
				t.Fatalf("step %d (t=%d): %s still tracked: %+v", i, s.at, s.peer, *view)
			}
			continue
		}
		if s.tokens < 0 && s.window < 0 && s.inflight < 0 {
			continue
		}
		if view == nil {
			t.Fatalf("step %d (t=%d): %s not tracked", i, s.at, s.peer)
		}
		if s.tokens >= 0 && view.Tokens != s.tokens {
			t.Fatalf("step %d (t=%d): tokens %d, want %d", i, s.at, view.Tokens, s.tokens)
		}
		if s.window >= 0 && view.Window != s.window {
			t.Fatalf("step %d (t=%d): window %d, want %d", i, s.at, view.Window, s.window)
		}
		if s.inflight >= 0 && view.Inflight != s.inflight {
			t.Fatalf("step %d (t=%d): inflight %d, want %d", i, s.at, view.Inflight, s.inflight)
		}
	}
}

const A, B = "192.0.2.1", "192.0.2.2"

// The scenarios of the Arweave node's limiter tests, as step tables.
func TestArweaveScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group limiter.GroupSettings
		steps []step
	}{
		{
			name: "simple sliding window",
			// 2 per 1000 ms, no bucket: the third request in a second is refused.
			group: limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []step{
				req(0, A, "sliding").state(0, 1, 1),
				req(10, A, "sliding").state(0, 2, 2),
				req(20, A, "rate_limit").retryAfter(1).state(0, 2, 2),
				req(999, A, "rate_limit"),
				req(1000, A, "sliding").state(0, 2, 3), // ts 0 expired: 0+1000 <= 1000
				req(1005, A, "rate_limit"),
				req(1010, A, "sliding").state(0, 2, 4),
				req(1010, B, "sliding").state(0, 1, 1), // peers are independent
			},
		},
		{
			name: "leaky bucket happy path",
			// No window: every request takes a token; 3 tokens, 1 back per second.
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 3, TickMS: 1000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []step{
				req(0, A, "leaky").state(1, 0, 1),
				req(1, A, "leaky").state(2, 0, 2),
				req(2, A, "leaky").state(3, 0, 3),
				release(3, 0), release(3, 1), release(3, 2),
				check(999, A, 3, 0, 0),
				check(1000, A, 2, 0, 0), // tick 1 at 1000 ms
				req(1000, A, "leaky").state(3, 0, 1),
				req(1001, A, "rate_limit").retryAfter(1),
				check(3000, A, 1, 0, 1), // ticks at 2000 and 3000
				req(3000, A, "leaky").state(2, 0, 2),
				req(3000, A, "leaky").state(3, 0, 3),
				req(3000, A, "rate_limit"),
			},
		},
		{
			name:  "rejection by concurrency",
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 100, TickMS: 30000, Reduction: 100, Concurrency: 2}.Settings(),
			steps: []step{
				req(0, A, "leaky").state(1, 0, 1),
				req(1, A, "leaky").state(2, 0, 2),
				req(2, A, "concurrency").retryAfter(1).state(2, 0, 2), // no token taken
				req(2, B, "leaky").state(1, 0, 1),                     // per peer
				release(3, 0),
				check(3, A, 2, 0, 1),
				req(4, A, "leaky").state(3, 0, 2),
				release(5, 0), // a second release of the same decision: no-op
				check(5, A, 3, 0, 2),
			},
		},
		{
			name: "rejection by leaky rate",
			// The window admits 1 per second, then 2 tokens; Retry-After is
			// the next tick (30 s) unless the window frees up sooner.
			group: limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 2, TickMS: 30000, Reduction: 2, Concurrency: 100}.Settings(),
			steps: []step{
				req(0, A, "sliding").state(0, 1, 1),
				req(100, A, "leaky").state(1, 1, 2),
				req(200, A, "leaky").state(2, 1, 3),
				req(300, A, "rate_limit").retryAfter(1).state(2, 1, 3), // window frees at 1000
				req(1000, A, "sliding").state(2, 1, 4),
				req(1500, A, "rate_limit").retryAfter(1),
				check(29999, A, 2, 1, 4),
				check(30000, A, 0, 1, 4),
			},
		},
		{
			name: "window and bucket both exhausted",
			// leaky_limit 0: a window overflow is always refused; Retry-After
			// comes from the window alone.
			group: limitertest.Hybrid{Window: 2, WindowMS: 5000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 100}.Settings(),
			steps: []step{
				req(0, A, "sliding"),
				req(1000, A, "sliding"),
				req(1500, A, "rate_limit").retryAfter(4).state(0, 2, 2), // ts 0 expires at 5000
				req(4999, A, "rate_limit").retryAfter(1),
				req(5000, A, "sliding").state(0, 2, 3),
			},
		},
		{
			name:  "bucket exhausted with no window: Retry-After is the next tick",
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 2, TickMS: 30000, Reduction: 2, Concurrency: 100}.Settings(),
			steps: []step{
				req(0, A, "leaky"),
				req(0, A, "leaky"),
				req(12_345, A, "rate_limit").retryAfter(18), // 17.655 s, rounded up
				req(29_001, A, "rate_limit").retryAfter(1),
				req(30_000, A, "leaky").state(1, 0, 3),
			},
		},
		{
			name: "peer cleanup by leaky ticks",
			// 2 tokens, 1 back per tick: 2 ticks drain, the third deletes.
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 5, TickMS: 1000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []step{
				req(0, A, "leaky"), req(0, A, "leaky"),
				release(1, 0), release(1, 1),
				check(1500, A, 1, 0, 0),
				tick(2000),
				check(2000, A, 0, 0, 0),
				tick(2999),
				check(2999, A, 0, 0, 0),
				tick(3000),
				gone(3000, A),
			},
		},
		{
			name: "peer cleanup of window timestamps",
			group: limiter.GroupSettings{
				// A 5 s window keeps both timestamps until the cleanup.
				SlidingWindowLimit: 5, SlidingWindowDuration: 5000,
				CleanupInterval: 5000, CleanupExpiry: 3000,
				LeakyLimit: 0, LeakyTickInterval: 30000, LeakyTickReduction: 1, ConcurrencyLimit: 10,
			},
			steps: []step{
				req(0, A, "sliding"), release(1, 0),
				req(2500, A, "sliding"), release(2501, 2),
				tick(4999),
				check(4999, A, 0, 2, 0),
				tick(5000), // drops ts < 5000-3000: 0 goes, 2500 stays
				check(5000, A, 0, 1, 0),
				tick(9999),
				check(9999, A, 0, 1, 0),
				tick(10000), // 2500 < 7000: gone, and the peer with it
				gone(10000, A),
			},
		},
		{
			name:  "manual reduction",
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 3, TickMS: 30000, Reduction: 3, Concurrency: 10}.Settings(),
			steps: []step{
				reduce(0, A, "noop"), // never creates an entry
				gone(0, A),
				req(0, A, "leaky"), req(0, A, "leaky"), req(0, A, "leaky"),
				req(0, A, "rate_limit"),
				reduce(1, A, "reduced").state(2, 0, 3),
				req(2, A, "leaky").state(3, 0, 4),
				reduce(3, A, "reduced"), reduce(3, A, "reduced"), reduce(3, A, "reduced"),
				reduce(3, A, "noop").state(0, 0, 4), // floored at 0, still ok
			},
		},
		{
			name: "manual reduction disabled",
			group: func() limiter.GroupSettings {
				s := limitertest.Hybrid{WindowMS: 1000, Leaky: 3, TickMS: 30000, Reduction: 3, Concurrency: 10}.Settings()
				s.ManualReductionDisabled = true
				return s
			}(),
			steps: []step{
				req(0, A, "leaky"),
				reduce(1, A, "disabled").state(1, 0, 1),
			},
		},
		{
			name: "dry run decides like enforce but lets rejections through",
			group: func() limiter.GroupSettings {
				s := limitertest.Hybrid{WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
				s.Mode = limiter.ModeDryRun
				return s
			}(),
			steps: []step{
				req(0, A, "leaky").state(1, 0, 1),
				req(1, A, "would_reject").state(1, 0, 1), // no state change
				release(2, 1),                            // nothing held: no-op
				check(2, A, 1, 0, 1),
			},
		},
		{
			name: "mode off admits everything and tracks nothing",
			group: func() limiter.GroupSettings {
				s := limitertest.Hybrid{WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 1}.Settings()
				s.Mode = limiter.ModeOff
				return s
			}(),
			steps: []step{
				req(0, A, "unlimited"), req(0, A, "unlimited"),
				gone(0, A),
			},
		},
		{
			name:  "zero limits never mean unlimited",
			group: limitertest.Hybrid{WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []step{
				req(0, A, "rate_limit"),
				gone(0, A),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := limitertest.New(t, testConfig(tc.group))
			run(t, l, "test", tc.steps)
		})
	}
}

// TestWindowExpiryBoundary: a timestamp ts has expired at now when
// ts + duration <= now.
func TestWindowExpiryBoundary(t *testing.T) {
	for _, tc := range []struct {
		now    int64
		active int64
	}{{1100, 2}, {1499, 2}, {1500, 1}, {1501, 0}} {
		l := limitertest.New(t, testConfig(limitertest.Hybrid{Window: 3, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()))
		g, _ := l.GroupID("test")
		for _, ts := range []int64{1, 500, 501} {
			d := l.Decide(at(ts), limitertest.Peer(A), g)
			if d.Via != limiter.ViaSliding {
				t.Fatalf("admission at %d: %+v", ts, d)
			}
			d.Release()
		}
		v := l.Peer(at(tc.now), limitertest.Peer(A).Key)
		if len(v) != 1 || v[0].WindowActive != tc.active {
			t.Fatalf("now=%d: %+v, want %d active", tc.now, v, tc.active)
		}
		// And the decision agrees: with limit 3, room for 3-active.
		for i := int64(0); i < 3-tc.active; i++ {
			if d := l.Decide(at(tc.now), limitertest.Peer(A), g); d.Via != limiter.ViaSliding {
				t.Fatalf("now=%d request %d: %+v", tc.now, i, d)
			}
		}
		if d := l.Decide(at(tc.now), limitertest.Peer(A), g); d.Allowed {
			t.Fatalf("now=%d: window should be full", tc.now)
		}
	}
}

// evictions returns how many entries max_tracked evicted in all groups.
func evictions(l *limiter.Limiter) uint64 {
	var n uint64
	for _, s := range l.Stats() {
		n += s.Evictions
	}
	return n
}
