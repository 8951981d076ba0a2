package limiter_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// algoSettings returns a group of algorithm k with limit L per period P ms
// and burst B, concurrency c (the hybrid keys as Arweave's general).
func algoSettings(k algo.Kind, limit, period, burst, c int64) limiter.GroupSettings {
	s := limitertest.Hybrid{WindowMS: 1000, Leaky: 450, TickMS: 30000, Reduction: 450, Concurrency: c}.Settings()
	s.Algorithm, s.Limit, s.Period, s.Burst = k, limit, period, burst
	return s
}

// astep is one event of an algorithm's step table through Limiter.Decide.
type astep struct {
	at   int64
	op   string // "req" (default), "release" of step ref, "reduce", "tick"
	ref  int
	want string // req: "ok", "concurrency", "rate_limit", "would_reject"; reduce: "reduced", "noop"
	// retry is the Retry-After of a rejection (0: not checked); left and
	// reset (ms) the quota after the step, -1 not checked.
	retry, left, reset int64
}

func areq(at int64, want string) astep { return astep{at: at, want: want, left: -1, reset: -1} }

func (s astep) q(left, reset int64) astep { s.left, s.reset = left, reset; return s }

func (s astep) retryAfter(r int64) astep { s.retry = r; return s }

func arun(t *testing.T, l *limiter.Limiter, group string, steps []astep) {
	t.Helper()
	g, _ := l.GroupID(group)
	held := map[int]*limiter.Decision{}
	defer func() {
		for _, d := range held {
			d.Release()
		}
	}()
	for i, s := range steps {
		switch s.op {
		case "", "req":
			d := l.Decide(at(s.at), limitertest.Peer(A), g)
			got := "ok"
			switch {
			case d.WouldReject:
				got = "would_reject"
			case !d.Allowed:
				got = d.Reason.String()
			case d.Via != limiter.ViaAlgorithm:
				got = "via " + d.Via.String()
			}
			if got != s.want {
				t.Fatalf("step %d (t=%d): %s, want %s", i, s.at, got, s.want)
			}
			if s.retry != 0 && d.RetryAfter != s.retry {
				t.Fatalf("step %d (t=%d): Retry-After %d, want %d", i, s.at, d.RetryAfter, s.retry)
			}
			q := d.Quota()
			if s.left >= 0 && (q.BucketRemaining != s.left || q.BucketReset != s.reset) {
				t.Fatalf("step %d (t=%d): quota r=%d t=%d ms, want r=%d t=%d", i, s.at, q.BucketRemaining, q.BucketReset, s.left, s.reset)
			}
			held[i] = &d
		case "release":
			held[s.ref].Release()
		case "reduce":
			if got := l.Reduce(at(s.at), limitertest.Peer(A).Key, g).String(); got != s.want {
				t.Fatalf("step %d (t=%d): reduce %s, want %s", i, s.at, got, s.want)
			}
		case "tick":
			l.Tick(at(s.at))
		}
	}
}

func TestAlgorithmScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group limiter.GroupSettings
		steps []astep
	}{{
		// Concurrency is checked first, as for the hybrid; a rejection by
		// concurrency takes no token.
		"token bucket, concurrency first",
		algoSettings(algo.TokenBucket, 2, 1000, 3, 2),
		[]astep{
			areq(0, "ok").q(2, 0), areq(0, "ok").q(1, 0),
			areq(0, "concurrency").retryAfter(1).q(1, 0),
			{op: "release", ref: 0}, {op: "release", ref: 1},
			areq(0, "ok").q(0, 500), {op: "release", ref: 5},
			areq(0, "rate_limit").retryAfter(1).q(0, 500),
			areq(500, "ok").q(0, 500), {op: "release", ref: 7},
			{at: 500, op: "reduce", want: "reduced"},
			areq(500, "ok").q(0, 500),
		},
	}, {
		"gcra, burst then steady",
		algoSettings(algo.GCRA, 10, 1000, 5, 100),
		[]astep{
			areq(0, "ok").q(4, 0), areq(0, "ok"), areq(0, "ok"), areq(0, "ok"), areq(0, "ok").q(0, 100),
			areq(0, "rate_limit").retryAfter(1).q(0, 100),
			areq(100, "ok").q(0, 100), areq(150, "rate_limit").q(0, 50), areq(200, "ok").q(0, 100),
		},
	}, {
		// t0 is a multiple of 1000: the windows are [t0 + k·1000, …).
		"fixed window at k·P − 1 and k·P",
		algoSettings(algo.FixedWindow, 2, 1000, 0, 100),
		[]astep{
			areq(999, "ok").q(1, 0), areq(999, "ok").q(0, 1),
			areq(999, "rate_limit").retryAfter(1).q(0, 1),
			areq(1000, "ok").q(1, 0), areq(1000, "ok").q(0, 1000),
			areq(1000, "rate_limit").retryAfter(1),
			areq(1999, "rate_limit").retryAfter(1),
			{at: 1999, op: "reduce", want: "reduced"},
			areq(1999, "ok"),
			{at: 2000, op: "reduce", want: "noop"},
		},
	}, {
		// A timestamp counts while ts > now − P: exactly P old, it is out.
		"sliding log at exactly P",
		algoSettings(algo.SlidingLog, 2, 1000, 0, 100),
		[]astep{
			areq(1000, "ok").q(1, 0), areq(1500, "ok").q(0, 500),
			areq(1999, "rate_limit").retryAfter(1).q(0, 1),
			areq(2000, "ok").q(0, 500),
			areq(2499, "rate_limit").q(0, 1),
			{at: 2499, op: "reduce", want: "reduced"}, // the newest (2000) goes
			areq(2499, "ok").q(0, 1),
			areq(2500, "ok").q(0, 999), // 1500 expired; 2499 and 2500 count
			areq(2500, "rate_limit").retryAfter(1).q(0, 999),
			{at: 3500, op: "reduce", want: "noop"}, // all expired
		},
	}, {
		"sliding window, the estimate",
		algoSettings(algo.SlidingWindow, 4, 1000, 0, 100),
		[]astep{
			areq(0, "ok"), areq(100, "ok"), areq(200, "ok"), areq(300, "ok").q(0, 700),
			areq(400, "rate_limit").retryAfter(1).q(0, 600),
			areq(1100, "rate_limit").q(0, 150), // Rali: 1000 + 1000·(1 − 3/4)
			areq(1250, "ok").q(0, limitedMs(4, 1000, 1, 4, 1250)),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			arun(t, limitertest.New(t, testConfig(tc.group)), "test", tc.steps)
		})
	}
}

// limitedMs is Rali's limitedUntil − now for a window of t0's alignment.
func limitedMs(limit, period, curr, prev, now int64) int64 {
	start := now / period * period
	if curr+1 > limit || prev == 0 {
		return start + period - now
	}
	num := period * (prev - (limit - curr - 1))
	return start + (num+prev-1)/prev - now
}

// TestAlgorithmDryRun: dry_run decides and updates exactly as enforce, and
// lets the rejection through.
func TestAlgorithmDryRun(t *testing.T) {
	g := algoSettings(algo.FixedWindow, 1, 1000, 0, 100)
	g.Mode = limiter.ModeDryRun
	l := limitertest.New(t, testConfig(g))
	arun(t, l, "test", []astep{areq(0, "ok"), areq(0, "would_reject").q(0, 1000), areq(1000, "ok")})
	if st := l.Stats()["test"]; st.WouldReject != 1 || st.AllowedAlgorithm != 2 || st.RejectedRateLimit != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAlgorithmsRace: 2000 goroutines on one peer admit exactly the limit,
// for every algorithm.
func TestAlgorithmsRace(t *testing.T) {
	for _, k := range []algo.Kind{algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingLog, algo.SlidingWindow} {
		t.Run(k.String(), func(t *testing.T) {
			l := limitertest.New(t, testConfig(algoSettings(k, 450, 60_000, 0, 5000)))
			g, _ := l.GroupID("test")
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 2000 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					// The same ms for all, but for a few a ms apart: still
					// one period.
					d := l.Decide(at(int64(i%3)), limitertest.Peer(A), g)
					defer d.Release()
					if d.Allowed {
						admitted.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			if n := admitted.Load(); n != 450 {
				t.Fatalf("admitted %d, want 450", n)
			}
			st := l.Stats()["test"]
			if st.Requests != 2000 || st.AllowedAlgorithm != 450 || st.RejectedRateLimit != 1550 || st.ItemsConcurrency != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestSlidingLogAgainstList plays random sequences through Limiter.Decide
// for a sliding log and a plain list of timestamps.
func TestSlidingLogAgainstList(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		limit := int64(1 + r.IntN(20))
		period := []int64{1, 10, 1000, 60_000}[r.IntN(4)]
		l := limitertest.New(t, testConfig(algoSettings(algo.SlidingLog, limit, period, 0, 1<<20)))
		g, _ := l.GroupID("test")
		var list []int64
		now := int64(0)
		for i := range 300 {
			now += []int64{0, 1, period / 3, period, 2 * period}[r.IntN(5)]
			if r.IntN(8) == 0 {
				l.Tick(at(now)) // the sweep expires the log (and keeps its gate right)
			}
			if r.IntN(10) == 0 {
				// reduce: the newest that still counts goes.
				want := "noop"
				if n := len(list); n > 0 && list[n-1] > now-period {
					list, want = list[:n-1], "reduced"
				}
				if got := l.Reduce(at(now), limitertest.Peer(A).Key, g).String(); got != want {
					t.Fatalf("trial %d op %d: reduce %s, want %s", trial, i, got, want)
				}
				continue
			}
			var counted []int64
			for _, ts := range list {
				if ts > now-period {
					counted = append(counted, ts)
				}
			}
			want := int64(len(counted))+1 <= limit
			d := l.Decide(at(now), limitertest.Peer(A), g)
			d.Release()
			if d.Allowed != want {
				t.Fatalf("trial %d op %d (L %d P %d t %d, %d counted): admitted %v", trial, i, limit, period, now, len(counted), d.Allowed)
			}
			if want {
				list = append(counted, now)
				continue
			}
			oldest := counted[int64(len(counted))-limit]
			if wantRetry := max(1, (oldest+period-now+999)/1000); d.RetryAfter != wantRetry {
				t.Fatalf("trial %d op %d: Retry-After %d, want %d", trial, i, d.RetryAfter, wantRetry)
			}
		}
	}
}

// TestAlgorithmChange: a live change of algorithm drops the group's
// entries (and Reconfigure says how many); a change of limit, period or
// burst keeps them, converted.
func TestAlgorithmChange(t *testing.T) {
	cfg := testConfig(algoSettings(algo.TokenBucket, 10, 1000, 0, 100))
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for i := range 5 {
		p := limitertest.Peer(fmt.Sprintf("198.51.100.%d", i))
		for range 8 {
			decideRelease(l, at(0), p, g)
		}
	}
	other, _ := l.GroupID(limiter.GroupGeneral)
	decideRelease(l, at(0), limitertest.Peer(A), other)
	if l.Tracked() != 6 {
		t.Fatalf("tracked %d", l.Tracked())
	}
	// Period 1000 → 2000: the tokens stay (2 of 10), the refill halves.
	cfg.Groups["test"] = algoSettings(algo.TokenBucket, 10, 2000, 0, 100)
	dropped, err := l.Apply(at(0), cfg)
	if err != nil || len(dropped) != 0 || l.Tracked() != 6 {
		t.Fatalf("param change: dropped %v, %v, tracked %d", dropped, err, l.Tracked())
	}
	v, _ := l.Entry(at(0), limitertest.Peer("198.51.100.0").Key, g)
	if v.Algo.Tokens != 2 || v.Algo.Remaining != 2 {
		t.Fatalf("after the change: %+v", v.Algo)
	}
	if v, _ = l.Entry(at(200), limitertest.Peer("198.51.100.0").Key, g); v.Algo.Tokens != 3 {
		t.Fatalf("200 ms later at 10 per 2 s: %v tokens, want 3", v.Algo.Tokens)
	}
	// To GCRA: the test group's five entries go; general's stays.
	cfg.Groups["test"] = algoSettings(algo.GCRA, 10, 2000, 0, 100)
	dropped, err = l.Apply(at(0), cfg)
	if err != nil || dropped["test"] != 5 || len(dropped) != 1 || l.Tracked() != 1 {
		t.Fatalf("algorithm change: dropped %v, %v, tracked %d", dropped, err, l.Tracked())
	}
	if st := l.Stats()["test"]; st.StateDrops != 5 || st.Entries != 0 {
		t.Fatalf("stats after the drop %+v", st)
	}
	d := l.Decide(at(0), limitertest.Peer("198.51.100.0"), g)
	if q := d.Quota(); !d.Allowed || q.Algorithm != algo.GCRA || q.BucketRemaining != 9 {
		t.Fatalf("a fresh GCRA state: %+v %+v", d, q)
	}
	d.Release()
	// Back to the hybrid: the GCRA entry goes.
	cfg.Groups["test"] = limitertest.Hybrid{WindowMS: 1000, Leaky: 450, TickMS: 30000, Reduction: 450, Concurrency: 100}.Settings()
	if dropped, _ := l.Apply(at(0), cfg); dropped["test"] != 1 {
		t.Fatalf("to the hybrid: dropped %v", dropped)
	}
}

// TestAlgorithmSweepAndViews: idle entries of every algorithm expire in the
// sweep, and the views speak the algorithm's terms.
func TestAlgorithmSweepAndViews(t *testing.T) {
	for _, k := range []algo.Kind{algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingLog, algo.SlidingWindow} {
		t.Run(k.String(), func(t *testing.T) {
			l := limitertest.New(t, testConfig(algoSettings(k, 4, 1000, 0, 100)))
			g, _ := l.GroupID("test")
			for range 3 {
				decideRelease(l, at(10), limitertest.Peer(A), g)
			}
			v, ok := l.Entry(at(10), limitertest.Peer(A).Key, g)
			if !ok || v.Algorithm != k || v.Algo.Remaining != 1 {
				t.Fatalf("view %+v", v)
			}
			switch k {
			case algo.TokenBucket:
				if v.Algo.Tokens != 1 {
					t.Errorf("tokens %v", v.Algo.Tokens)
				}
			case algo.GCRA:
				if v.Algo.TAT != 750 {
					t.Errorf("TAT in %d ms, want 750", v.Algo.TAT)
				}
			default:
				if v.Algo.Count != 3 {
					t.Errorf("count %d", v.Algo.Count)
				}
			}
			l.Tick(at(500))
			if l.Tracked() != 1 {
				t.Fatalf("swept too soon")
			}
			l.Tick(at(2000)) // two periods: nothing left to remember
			if l.Tracked() != 0 {
				t.Fatalf("%v: tracked %d after the sweep", k, l.Tracked())
			}
			if st := l.Stats()["test"]; st.Entries != 0 || st.LogItems != 0 || st.ItemsConcurrency != 0 {
				t.Fatalf("gauges %+v", st)
			}
		})
	}
}

// TestAlgorithmMaxTracked: max_tracked evicts the entry idle longest,
// whatever its algorithm.
func TestAlgorithmMaxTracked(t *testing.T) {
	cfg := testConfig(algoSettings(algo.SlidingLog, 5, 60_000, 0, 100))
	cfg.MaxTracked = 3
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("test")
	for i := range 5 {
		decideRelease(l, at(int64(i)*1000), limitertest.Peer(fmt.Sprintf("198.51.100.%d", i)), g)
	}
	if l.Tracked() != 3 || evictions(l) != 2 {
		t.Fatalf("tracked %d, evictions %d", l.Tracked(), evictions(l))
	}
	if _, ok := l.Entry(at(5000), limitertest.Peer("198.51.100.0").Key, g); ok {
		t.Fatal("the oldest was kept")
	}
	if st := l.Stats()["test"]; st.LogItems != 3 || st.Entries != 3 {
		t.Fatalf("gauges %+v", st)
	}
}

func TestAlgorithmSettingErrors(t *testing.T) {
	for _, tc := range []struct {
		s        limiter.GroupSettings
		key, has string
	}{
		{algoSettings(algo.TokenBucket, 0, 1000, 0, 10), "limit", "required"},
		{algoSettings(algo.GCRA, -5, 1000, 0, 10), "limit", "got -5"},
		{algoSettings(algo.FixedWindow, 10, 0, 0, 10), "period", "required"},
		{algoSettings(algo.SlidingWindow, 10, 1<<62, 0, 10), "period", "2147483647"},
		{algoSettings(algo.FixedWindow, 10, 1000, 3, 10), "burst", "no burst"},
		{algoSettings(algo.TokenBucket, 10, 1000, -1, 10), "burst", "from 0"},
		{algoSettings(algo.SlidingLog, 1_000_000, 1000, 0, 10), "limit", "at most 10000"},
	} {
		_, err := limiter.New(memory.New(), t0, testConfig(tc.s))
		fe, ok := err.(*limiter.FieldError)
		if !ok || fe.Field != limiter.GroupField("test", tc.key) || !strings.Contains(fe.Problem, tc.has) {
			t.Errorf("%+v: %v, want http_api.limiter.test.%s (%s)", tc.s, err, tc.key, tc.has)
		}
	}
	// A present limit of 0 is refused even for the hybrid, which ignores
	// the key; an inherited burst is dropped for an algorithm without.
	if _, err := (limiter.PartialGroup{limiter.KeyLimit: int64(0)}).Resolve("api", limiter.ArweaveGroups()["general"]); err == nil || !strings.Contains(err.Error(), "http_api.limiter.api.limit") {
		t.Errorf("limit = 0 on a hybrid group: %v", err)
	}
	fw := algo.FixedWindow.String()
	s, err := (limiter.PartialGroup{limiter.KeyAlgorithm: fw}).Resolve("api", algoSettings(algo.TokenBucket, 10, 1000, 20, 10))
	if err != nil || s.Burst != 0 || s.Algorithm != algo.FixedWindow {
		t.Errorf("inherited burst: %+v %v", s, err)
	}
	if _, err := (limiter.PartialGroup{limiter.KeyAlgorithm: fw, limiter.KeyBurst: int64(5)}).Resolve("api", algoSettings(algo.TokenBucket, 10, 1000, 20, 10)); err == nil || !strings.Contains(err.Error(), "api.burst") {
		t.Errorf("a burst set with fixed_window: %v", err)
	}
}

// decideRelease decides one request and releases what it admitted.
func decideRelease(l *limiter.Limiter, now time.Time, p peer.Peer, g limiter.GroupID) {
	d := l.Decide(now, p, g)
	d.Release()
}

// TestSlidingLogLimitChange: a live change of a sliding log's limit keeps
// the timestamps and applies at once, both ways (the rejections' shortcut
// is dropped with the old limit).
func TestSlidingLogLimitChange(t *testing.T) {
	cfg := testConfig(algoSettings(algo.SlidingLog, 3, 60_000, 0, 100))
	l := limitertest.New(t, cfg)
	arun(t, l, "test", []astep{areq(0, "ok"), areq(1, "ok"), areq(2, "ok"), areq(3, "rate_limit").q(0, 59_997)})
	cfg.Groups["test"] = algoSettings(algo.SlidingLog, 5, 60_000, 0, 100)
	if _, err := l.Apply(at(4), cfg); err != nil {
		t.Fatal(err)
	}
	arun(t, l, "test", []astep{areq(4, "ok").q(1, 0), areq(5, "ok").q(0, 59_995), areq(6, "rate_limit")})
	cfg.Groups["test"] = algoSettings(algo.SlidingLog, 2, 60_000, 0, 100)
	if _, err := l.Apply(at(7), cfg); err != nil {
		t.Fatal(err)
	}
	// Five held, two allowed: 2 and 4 must expire first.
	arun(t, l, "test", []astep{areq(60_001, "rate_limit").q(0, 3), areq(60_003, "rate_limit").q(0, 1), areq(60_004, "ok")})
}

// TestSlidingLogFullExpires: a sliding log at its limit (its rejections'
// shortcut set) still goes in the sweep once every timestamp expired.
func TestSlidingLogFullExpires(t *testing.T) {
	l := limitertest.New(t, testConfig(algoSettings(algo.SlidingLog, 2, 1000, 0, 100)))
	arun(t, l, "test", []astep{areq(0, "ok"), areq(1, "ok"), areq(2, "rate_limit")})
	l.Tick(at(500))
	if l.Tracked() != 1 {
		t.Fatal("swept too soon")
	}
	l.Tick(at(1001))
	if l.Tracked() != 0 {
		t.Fatalf("tracked %d after every timestamp expired", l.Tracked())
	}
}
