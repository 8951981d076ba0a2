package limiter_test

import (
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// hybrid holds one (peer, group)'s state the simplest way, for the step
// tables of the hybrid (algo.Step with the group's Limits): the window as
// a plain list of timestamps.
type hybrid struct {
	inflight, tokens int64
	window           []int64
}

// hybridState is what a step of the hybrid reads and returns, flat.
type hybridState struct {
	Inflight, Tokens, Window, Oldest int64
}

// state returns what the hybrid's step reads of h at ms: the unexpired
// window.
func (h *hybrid) state(g *limiter.GroupSettings, ms int64) hybridState {
	s := hybridState{Inflight: h.inflight, Tokens: h.tokens}
	for _, t := range h.window {
		if t+g.SlidingWindowDuration > ms {
			if s.Window == 0 || t < s.Oldest {
				s.Oldest = t
			}
			s.Window++
		}
	}
	return s
}

// stepHybrid runs algo.Step for the hybrid on s, as a backend does.
func stepHybrid(s hybridState, g *limiter.GroupSettings, ms, next int64) (hybridState, limiter.Outcome) {
	l := g.Limits()
	st := algo.State{A: s.Tokens}
	if s.Tokens > 0 {
		st.B = 1
	}
	r := algo.Result{State: st, Held: algo.Held{Inflight: s.Inflight, Count: s.Window, Mark: s.Oldest}}
	algo.Step(algo.Hybrid, &r, &l, ms, next)
	return hybridState{Inflight: r.Held.Inflight, Tokens: r.State.A, Window: r.Held.Count, Oldest: r.Held.Mark}, limiter.OutcomeOf(&r)
}

// leakyTicks applies n leaky ticks of reduction r to a bucket in the
// register holding tokens (algo.Tick).
func leakyTicks(tokens, n, r int64) (left, reducing int64, deleted bool) {
	s, t := algo.Tick(algo.Hybrid, algo.State{A: tokens, B: 1}, &algo.Limits{LeakyReduction: r}, n)
	return s.A, t.Reducing, t.Left
}

// hstep is one event on a fake timeline for the hybrid's step: a request ("req",
// the default), a release, or a leaky tick of the group's reduction.
type hstep struct {
	at  int64
	op  string
	via limiter.Via    // req: ViaNone for a rejection
	why limiter.Reason // req: the reason of a rejection
	// retry is the Retry-After of a rejection, 0: not checked.
	retry int64
	// tokens, window, inflight: the state after the step (window counts
	// the unexpired timestamps at the step's time).
	tokens, window, inflight int64
}

// runHybrid plays steps against the hybrid's step for group settings g, whose
// leaky ticks fall every LeakyTickInterval ms from 0, checking the outcome
// and the state after every step.
func runHybrid(t *testing.T, g limiter.GroupSettings, steps []hstep) {
	t.Helper()
	var h hybrid
	for i, s := range steps {
		switch s.op {
		case "", "req":
			next := (s.at/g.LeakyTickInterval + 1) * g.LeakyTickInterval
			before := h.state(&g, s.at)
			after, out := stepHybrid(before, &g, s.at, next)
			if out.Via != s.via || out.Reason != s.why {
				t.Fatalf("step %d (t=%d): got via %v reason %q, want via %v reason %q", i, s.at, out.Via, out.Reason, s.via, s.why)
			}
			if out.Allowed() != (s.via != limiter.ViaNone) {
				t.Fatalf("step %d: Allowed() = %v with via %v", i, out.Allowed(), out.Via)
			}
			if s.retry != 0 && out.RetryAfter != s.retry {
				t.Fatalf("step %d (t=%d): Retry-After %d, want %d", i, s.at, out.RetryAfter, s.retry)
			}
			switch out.Via {
			case limiter.ViaNone:
				if after != before {
					t.Fatalf("step %d: a rejection changed the state: %+v → %+v", i, before, after)
				}
			case limiter.ViaSliding:
				h.window = append(h.window, s.at)
			}
			h.inflight, h.tokens = after.Inflight, after.Tokens
			if got := h.state(&g, s.at); got != after {
				t.Fatalf("step %d: the step says %+v, the state is %+v", i, after, got)
			}
		case "release":
			h.inflight--
		case "tick":
			left, _, _ := leakyTicks(h.tokens, 1, g.LeakyTickReduction)
			h.tokens = left
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		st := h.state(&g, s.at)
		if st.Tokens != s.tokens || st.Window != s.window || st.Inflight != s.inflight {
			t.Fatalf("step %d (t=%d %s): tokens %d window %d inflight %d, want %d %d %d",
				i, s.at, s.op, st.Tokens, st.Window, st.Inflight, s.tokens, s.window, s.inflight)
		}
	}
}

const (
	viaNone    = limiter.ViaNone
	viaSliding = limiter.ViaSliding
	viaLeaky   = limiter.ViaLeaky
	conc       = limiter.ReasonConcurrency
	rate       = limiter.ReasonRateLimit
)

func TestStepHybrid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     limiter.GroupSettings
		steps []hstep
	}{
		{
			name: "window first, then the bucket, then rate_limit",
			// window 2 per 1000 ms, 2 tokens, ticks every 30 s.
			g: limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 2, TickMS: 30000, Reduction: 2, Concurrency: 10}.Settings(),
			steps: []hstep{
				{at: 0, via: viaSliding, window: 1, inflight: 1},
				{at: 10, via: viaSliding, window: 2, inflight: 2},
				{at: 20, via: viaLeaky, tokens: 1, window: 2, inflight: 3},
				{at: 30, via: viaLeaky, tokens: 2, window: 2, inflight: 4},
				// The window frees at 1000 (the oldest, 0, expires), sooner
				// than the tick at 30000.
				{at: 40, why: rate, retry: 1, tokens: 2, window: 2, inflight: 4},
				// 0 + 1000 <= 1000: expired; the window takes it again.
				{at: 1000, via: viaSliding, tokens: 2, window: 2, inflight: 5},
				{at: 1001, why: rate, retry: 1, tokens: 2, window: 2, inflight: 5},
			},
		},
		{
			name: "concurrency comes first and changes nothing",
			g:    limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 2}.Settings(),
			steps: []hstep{
				{at: 0, via: viaSliding, window: 1, inflight: 1},
				{at: 1, via: viaLeaky, tokens: 1, window: 1, inflight: 2},
				{at: 2, why: conc, retry: 1, tokens: 1, window: 1, inflight: 2},
				{at: 3, op: "release", tokens: 1, window: 1, inflight: 1},
				// Room in flight again, but window and bucket are full.
				{at: 4, why: rate, tokens: 1, window: 1, inflight: 1},
				{at: 1000, via: viaSliding, tokens: 1, window: 1, inflight: 2},
			},
		},
		{
			name: "no window: every request takes a token; a tick gives them back",
			g:    limitertest.Hybrid{WindowMS: 1000, Leaky: 3, TickMS: 1000, Reduction: 2, Concurrency: 10}.Settings(),
			steps: []hstep{
				{at: 0, via: viaLeaky, tokens: 1, inflight: 1},
				{at: 1, via: viaLeaky, tokens: 2, inflight: 2},
				{at: 2, via: viaLeaky, tokens: 3, inflight: 3},
				// Only the bucket can free up: Retry-After is the tick at 1000.
				{at: 3, why: rate, retry: 1, tokens: 3, inflight: 3},
				{at: 1000, op: "tick", tokens: 1, inflight: 3},
				{at: 1000, via: viaLeaky, tokens: 2, inflight: 4},
				{at: 1001, via: viaLeaky, tokens: 3, inflight: 5},
				{at: 1002, why: rate, retry: 1, tokens: 3, inflight: 5},
			},
		},
		{
			name: "leaky_limit 0 rejects every window overflow; Retry-After from the window",
			g:    limitertest.Hybrid{Window: 1, WindowMS: 5000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []hstep{
				{at: 0, via: viaSliding, window: 1, inflight: 1},
				{at: 100, why: rate, retry: 5, window: 1, inflight: 1},
				{at: 4001, why: rate, retry: 1, window: 1, inflight: 1},
				{at: 5000, via: viaSliding, window: 1, inflight: 2},
			},
		},
		{
			name: "window and bucket both closed: Retry-After is the next tick",
			g:    limitertest.Hybrid{WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []hstep{
				{at: 0, why: rate, retry: 30},
				{at: 29001, why: rate, retry: 1},
			},
		},
		{
			name: "a request decided a little out of order is still the window's oldest",
			g:    limitertest.Hybrid{Window: 3, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings(),
			steps: []hstep{
				{at: 500, via: viaSliding, window: 1, inflight: 1},
				{at: 499, via: viaSliding, window: 2, inflight: 2},
				{at: 501, via: viaSliding, window: 3, inflight: 3},
				// The oldest is 499: the window frees at 1499, 1 s away.
				{at: 502, why: rate, retry: 1, window: 3, inflight: 3},
				{at: 1499, via: viaSliding, window: 3, inflight: 4},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { runHybrid(t, tc.g, tc.steps) })
	}
}

// TestStepHybridOldest: the Oldest the hybrid's step reports after a window
// admission is the oldest unexpired timestamp, the new one included.
func TestStepHybridOldest(t *testing.T) {
	g := limitertest.Hybrid{Window: 5, WindowMS: 1000, Leaky: 0, TickMS: 30000, Reduction: 1, Concurrency: 10}.Settings()
	for _, c := range []struct {
		in   hybridState
		ms   int64
		want int64
	}{
		{hybridState{}, 700, 700},
		{hybridState{Window: 2, Oldest: 300}, 700, 300},
		{hybridState{Window: 2, Oldest: 300}, 200, 200},
		// A stale Oldest with Window 0 means nothing.
		{hybridState{Oldest: 100}, 700, 700},
	} {
		after, out := stepHybrid(c.in, &g, c.ms, 30000)
		if out.Via != limiter.ViaSliding || after.Oldest != c.want || after.Window != c.in.Window+1 {
			t.Errorf("step(%+v, %d) = %+v %+v, want Oldest %d", c.in, c.ms, after, out, c.want)
		}
	}
}

func TestLeakyTicks(t *testing.T) {
	for _, c := range []struct {
		tokens, n, r   int64
		left, reducing int64
		deleted        bool
	}{
		{tokens: 10, n: 1, r: 4, left: 6, reducing: 1},
		{tokens: 10, n: 2, r: 4, left: 2, reducing: 2},
		{tokens: 10, n: 3, r: 4, left: 0, reducing: 3}, // floored at 0, still there
		{tokens: 10, n: 4, r: 4, left: 0, reducing: 3, deleted: true},
		{tokens: 10, n: 1000, r: 4, left: 0, reducing: 3, deleted: true},
		{tokens: 0, n: 1, r: 4, left: 0, reducing: 0, deleted: true}, // at 0 when the tick comes
		{tokens: 450, n: 1, r: 450, left: 0, reducing: 1},
		{tokens: 450, n: 2, r: 450, left: 0, reducing: 1, deleted: true},
	} {
		left, reducing, deleted := leakyTicks(c.tokens, c.n, c.r)
		if left != c.left || reducing != c.reducing || deleted != c.deleted {
			t.Errorf("leakyTicks(%d, %d, %d) = %d, %d, %v; want %d, %d, %v",
				c.tokens, c.n, c.r, left, reducing, deleted, c.left, c.reducing, c.deleted)
		}
	}
}

func TestReduceHybrid(t *testing.T) {
	l := algo.Limits{}
	s, r := algo.Reduce(algo.Hybrid, algo.State{A: 2, B: 1}, &l, 0)
	if r != algo.GiveState || s != (algo.State{A: 1, B: 1}) {
		t.Fatalf("got %+v %v", s, r)
	}
	if s, r = algo.Reduce(algo.Hybrid, algo.State{}, &l, 0); r != algo.GiveNone || s.A != 0 {
		t.Fatalf("got %+v %v", s, r)
	}
	l.ReduceOldest = true
	if _, r = algo.Reduce(algo.Hybrid, algo.State{A: 2, B: 1}, &l, 0); r != algo.GiveOldest {
		t.Fatalf("2.9.7 without a bucket: got %v", r)
	}
}

func TestStepHybridDoesNotAllocate(t *testing.T) {
	g := limitertest.Hybrid{Window: 2, WindowMS: 1000, Leaky: 2, TickMS: 30000, Reduction: 2, Concurrency: 10}.Settings()
	l := g.Limits()
	h := algo.Held{Count: 2, Mark: 10}
	if n := testing.AllocsPerRun(100, func() {
		r := algo.Result{State: algo.State{A: 2, B: 1}, Held: h}
		algo.Step(algo.Hybrid, &r, &l, 20, 30000)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
