package algo_test

import (
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter/algo"
)

// step is one request on a fake timeline (or, with reduce, one manual
// reduction): the outcome it must get, the wait of a rejection (ms), and
// the quota right after it.
type step struct {
	at     int64
	reduce bool
	ok     bool  // admitted; for a reduce: something was given back
	wait   int64 // a rejection's ms until an admission is possible
	left   int64 // Quota.Remaining after the step
	reset  int64 // Quota.Reset after the step
}

func ok(at, left int64) step { return step{at: at, ok: true, left: left} }

// no is a rejection at at, waiting wait ms, with nothing left.
func no(at, wait int64) step { return step{at: at, wait: wait, reset: wait} }

func red(at int64, ok bool, left int64) step { return step{at: at, reduce: true, ok: ok, left: left} }

func (s step) withReset(r int64) step { s.reset = r; return s }

// run plays steps against kind k with limits p from a fresh state at the
// first step's time.
func run(t *testing.T, k algo.Kind, p algo.Params, steps []step) {
	t.Helper()
	s := algo.Fresh(k, p, steps[0].at)
	for i, st := range steps {
		before := s
		if st.reduce {
			var done bool
			s, done = reduceOK(k, s, p, st.at)
			if done != st.ok {
				t.Fatalf("step %d (t=%d): reduce %v, want %v", i, st.at, done, st.ok)
			}
		} else {
			var admitted bool
			var wait int64
			s, admitted, wait = algo.Decide(k, s, p, st.at)
			if admitted != st.ok {
				t.Fatalf("step %d (t=%d): admitted %v, want %v (state %+v)", i, st.at, admitted, st.ok, before)
			}
			if !admitted {
				if wait != st.wait {
					t.Fatalf("step %d (t=%d): wait %d ms, want %d", i, st.at, wait, st.wait)
				}
				if s != before {
					t.Fatalf("step %d: a rejection changed the state: %+v → %+v", i, before, s)
				}
			}
		}
		q := quotaOf(k, s, p, st.at)
		if q.Remaining != st.left || q.Reset != st.reset {
			t.Fatalf("step %d (t=%d): quota %+v, want remaining %d reset %d", i, st.at, q, st.left, st.reset)
		}
	}
}

func TestTokenBucket(t *testing.T) {
	// 2 per second, a bucket of 3: the burst, then one token every 500 ms
	// (docs/limiting.md, "Other algorithms": the token bucket).
	p := algo.Resolve(2, 1000, 3)
	run(t, algo.TokenBucket, p, []step{
		ok(10_000, 2), ok(10_000, 1), ok(10_000, 0).withReset(500),
		no(10_000, 500),
		no(10_250, 250),
		ok(10_500, 0).withReset(500), // 500 ms refilled exactly one token
		no(10_999, 1),
		ok(11_000, 0).withReset(500),
		red(11_000, true, 1), red(11_000, true, 2), red(11_000, true, 3),
		red(11_000, false, 3), // capped at B
		ok(11_000, 2),
		ok(60_000, 2), // a long gap fills the bucket: B, not more
		ok(60_000, 1), ok(60_000, 0).withReset(500),
		// A decision before the state's time is taken at the state's time.
		no(59_000, 500),
	})
	// Burst 0 is the limit.
	if p := algo.Resolve(7, 1000, 0); p.Burst != 7 {
		t.Fatalf("Resolve burst 0: %+v", p)
	}
}

func TestGCRABurstThenSteadyRate(t *testing.T) {
	// 10 per second (T = 100 ms), burst 5 (τ = 400 ms): five at once, then
	// one every 100 ms and not sooner.
	p := algo.Resolve(10, 1000, 5)
	steps := []step{ok(0, 4), ok(0, 3), ok(0, 2), ok(0, 1), ok(0, 0).withReset(100), no(0, 100), no(50, 50)}
	for t := int64(100); t <= 1000; t += 100 {
		steps = append(steps, ok(t, 0).withReset(100), no(t, 100), no(t+99, 1))
	}
	// Reduce takes T off the TAT: one more now; never below now.
	steps = append(steps, red(1000, true, 1), ok(1000, 0).withReset(100))
	// Idle for 450 ms (the TAT was 1500): 4.5 emission intervals regained.
	steps = append(steps, ok(1450, 3), ok(1450, 2), ok(1450, 1), ok(1450, 0).withReset(50), no(1450, 50))
	// Idle past the TAT: the whole burst again, not more.
	steps = append(steps, ok(5000, 4), ok(5000, 3))
	run(t, algo.GCRA, p, steps)

	// The survey's L = 1 case: requests separated by at least P.
	run(t, algo.GCRA, algo.Resolve(1, 1000, 0), []step{
		ok(5000, 0).withReset(1000), no(5999, 1), ok(6000, 0).withReset(1000), no(6000, 1000),
	})
}

func TestFixedWindowBoundary(t *testing.T) {
	// Windows [k·1000, (k+1)·1000) from the Unix epoch: k·P − 1 is still
	// the old window, k·P a new one (the boundary burst, 2L in 2 ms).
	p := algo.Resolve(2, 1000, 0)
	run(t, algo.FixedWindow, p, []step{
		ok(9_998, 1), ok(9_999, 0).withReset(1),
		no(9_999, 1),
		ok(10_000, 1), ok(10_000, 0).withReset(1000),
		no(10_000, 1000), no(10_999, 1),
		red(10_999, true, 1), ok(10_999, 0).withReset(1),
		red(11_000, false, 2), // the window ended: nothing to give back
		ok(11_500, 1),
	})
	// A clock-aligned window of a minute: 12:40 counts in 12:00–13:00 (the
	// survey's example); a period that does not divide the epoch's ms
	// aligns the same way.
	run(t, algo.FixedWindow, algo.Resolve(10, 3_600_000, 0), []step{
		ok(40*60_000, 9), ok(3_600_000-1, 8), ok(3_600_000, 9),
	})
	run(t, algo.FixedWindow, algo.Resolve(1, 7, 0), []step{ok(13, 0).withReset(1), no(13, 1), ok(14, 0).withReset(7)})
}

func TestSlidingWindowPSPDFKit(t *testing.T) {
	// PSPDFKit's example: 10 per minute; "if 25 percent of the current
	// window already elapsed, we use 75 percent of the previous window
	// usage". The previous window had 8.
	p := algo.Resolve(10, 60_000, 0)
	var steps []step
	for i := int64(0); i < 8; i++ {
		steps = append(steps, ok(60_000+i, 9-i))
	}
	// 25 % in: the estimate is curr + 6, so 4 more fit (4 + 6 = 10).
	q := int64(120_000 + 15_000)
	steps = append(steps, ok(q, 3), ok(q, 2), ok(q, 1), ok(q, 0).withReset(7500))
	// Rejected: limitedUntil r = 1 − (10 − 4 − 1)/8 = 3/8 → start + 22 500.
	steps = append(steps, no(q, 22_500-15_000), no(142_499, 1))
	steps = append(steps, ok(142_500, 0).withReset(limitedAfter(p, 5, 8, 142_500)))
	// 75 % in: the estimate is curr + 2, so up to 8 counted: 3 more.
	h := int64(120_000 + 45_000)
	steps = append(steps, ok(h, 2), ok(h, 1), ok(h, 0).withReset(limitedAfter(p, 8, 8, h)))
	steps = append(steps, no(h, limitedAfter(p, 8, 8, h)))
	run(t, algo.SlidingWindow, p, steps)

	// The Redis script's check: L = 4, P = 1000, four in window 10, then
	// at 11 100 a rejection until 11 250, admissions at 11 500 and 11 700.
	p = algo.Resolve(4, 1000, 0)
	run(t, algo.SlidingWindow, p, []step{
		ok(10_000, 3), ok(10_100, 2), ok(10_200, 1), ok(10_300, 0).withReset(700),
		no(10_400, 600), // curr + 1 > L: the window's end
		no(11_100, 150),
		ok(11_500, 1), // 1 + 1 + 4·0.5 = 4: one more would fit
		ok(11_700, 0).withReset(limitedAfter(p, 2, 4, 11_700)),
		red(11_700, true, 1), red(11_700, true, 2), red(11_700, false, 2),
		// Two windows later nothing is left.
		ok(13_000, 3),
	})
}

// limitedAfter is Rali's formula written out: the ms from now until start
// + P·r, r = 1 − (L − curr − 1)/prev, for the window holding now.
func limitedAfter(p algo.Params, curr, prev, now int64) int64 {
	start := now / p.Period * p.Period
	if curr+1 > p.Limit || prev == 0 {
		return start + p.Period - now
	}
	num := p.Period * (prev - (p.Limit - curr - 1)) // P·r·prev
	return start + (num+prev-1)/prev - now
}

// TestLimitedUntilRali checks the wait of every rejection against Rali's
// formula over a grid of counts and times: the first ms at which the
// estimate admits, and never later than the first admission.
func TestLimitedUntilRali(t *testing.T) {
	for _, p := range []algo.Params{algo.Resolve(4, 1000, 0), algo.Resolve(10, 60_000, 0), algo.Resolve(3, 7, 0), algo.Resolve(100, 999, 0)} {
		for prev := int64(0); prev <= p.Limit+1; prev++ {
			for curr := int64(0); curr <= p.Limit; curr++ {
				for _, e := range []int64{0, 1, p.Period / 4, p.Period / 2, 3 * p.Period / 4, p.Period - 1} {
					start := 50 * p.Period
					now := start + e
					s := stateOf(p.Period, start+p.Period, curr, prev)
					_, admitted, wait := algo.Decide(algo.SlidingWindow, s, p, now)
					if admitted {
						continue
					}
					if want := limitedAfter(p, curr, prev, now); wait != want {
						t.Fatalf("%+v curr %d prev %d at +%d: wait %d, Rali %d", p, curr, prev, e, wait, want)
					}
					// Within the window the formula is exact: admitted then,
					// not a ms before.
					until := now + wait
					if until < start+p.Period {
						if _, a, _ := algo.Decide(algo.SlidingWindow, s, p, until); !a {
							t.Fatalf("%+v curr %d prev %d: rejected at limitedUntil %d", p, curr, prev, until)
						}
						if until-1 > now {
							if _, a, _ := algo.Decide(algo.SlidingWindow, s, p, until-1); a {
								t.Fatalf("%+v curr %d prev %d: admitted a ms before limitedUntil", p, curr, prev)
							}
						}
					}
				}
			}
		}
	}
}

// stateOf builds a sliding window state through the API: prev admissions
// in the window before the one ending at end, then curr in that one.
func stateOf(period, end, curr, prev int64) algo.State {
	unlimited := algo.Resolve(algo.MaxValue, period, 0)
	s := algo.Fresh(algo.SlidingWindow, unlimited, 0)
	for range prev {
		s, _, _ = algo.Decide(algo.SlidingWindow, s, unlimited, end-2*period)
	}
	for range curr {
		s, _, _ = algo.Decide(algo.SlidingWindow, s, unlimited, end-period)
	}
	return s
}

func TestProblem(t *testing.T) {
	cases := []struct {
		k                    algo.Kind
		limit, period, burst int64
		key, has             string
	}{
		{algo.TokenBucket, 100, 60000, 0, "", ""},
		{algo.GCRA, 100, 60000, 500, "", ""},
		{algo.Hybrid, 0, 0, 0, "", ""}, // the hybrid ignores them
		{algo.FixedWindow, 0, 60000, 0, "limit", "required by algorithm fixed_window"},
		{algo.FixedWindow, -1, 60000, 0, "limit", "got -1"},
		{algo.SlidingWindow, 10, 0, 0, "period", "required"},
		{algo.SlidingWindow, 10, 1 << 62, 0, "period", "2147483647"},
		{algo.GCRA, 1 << 40, 1000, 0, "limit", "2147483647"},
		{algo.TokenBucket, 10, 1000, -1, "burst", "from 0"},
		{algo.FixedWindow, 10, 1000, 5, "burst", "fixed_window has no burst"},
		{algo.Hybrid, 0, 0, 5, "burst", "hybrid has no burst"},
		{algo.SlidingLog, 1_000_000, 1000, 0, "limit", "at most 10000"},
		{algo.SlidingLog, 10_000, 1000, 0, "", ""},
	}
	for _, c := range cases {
		key, problem := algo.Problem(c.k, c.limit, c.period, c.burst)
		if key != c.key || !strings.Contains(problem, c.has) {
			t.Errorf("Problem(%v, %d, %d, %d) = %q %q, want key %q containing %q", c.k, c.limit, c.period, c.burst, key, problem, c.key, c.has)
		}
	}
}

func TestParse(t *testing.T) {
	for i, n := range algo.Names() {
		k, err := algo.Parse(n)
		if err != nil || int(k) != i || k.String() != n {
			t.Errorf("Parse(%q) = %v, %v", n, k, err)
		}
		b, err := k.MarshalText()
		var back algo.Kind
		if err != nil || back.UnmarshalText(b) != nil || back != k {
			t.Errorf("text round trip of %v: %s %v", k, b, err)
		}
	}
	if _, err := algo.Parse("leaky"); err == nil || !strings.Contains(err.Error(), "token_bucket") {
		t.Errorf("Parse(leaky): %v", err)
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	p := algo.Resolve(100, 1000, 0)
	for _, k := range []algo.Kind{algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingWindow} {
		s := algo.Fresh(k, p, 0)
		now := int64(0)
		if n := testing.AllocsPerRun(100, func() {
			now++
			s, _, _ = algo.Decide(k, s, p, now)
		}); n != 0 {
			t.Errorf("%v: %v allocs per decision", k, n)
		}
	}
}

// reduceOK is Reduce for the kinds whose state is their State: whether it
// gave an admission back.
func reduceOK(k algo.Kind, s algo.State, p algo.Params, now int64) (algo.State, bool) {
	s, g := algo.Reduce(k, s, &algo.Limits{Params: p}, now)
	return s, g == algo.GiveState
}

// quotaOf is QuotaOf for the kinds whose state is their State.
func quotaOf(k algo.Kind, s algo.State, p algo.Params, now int64) algo.Quota {
	return algo.QuotaOf(k, s, algo.Held{}, &algo.Limits{Params: p}, now, 0)
}
