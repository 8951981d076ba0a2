package limiter_test

import (
	"testing"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// TestArweaveFieldsThroughDecide runs the Erlang suites' sequences through
// Decide on the local backend (the group's first leaky tick one interval
// after t0, as a node worker started at 0) and checks the fields of each
// decision, {exp, rem, reset, amount}.
func TestArweaveFieldsThroughDecide(t *testing.T) {
	type call struct {
		at      int64
		release bool // release the decision at once (the suite's caller ends)
		want    [4]int64
	}
	for _, tc := range []struct {
		name  string
		group limiter.GroupSettings
		calls []call
	}{
		{"peer_cleanup", limitertest.Hybrid{Window: 1, WindowMS: 1000, Leaky: 1, TickMS: 100000, Reduction: 1, Concurrency: 2}.Settings(), []call{
			{1, false, [4]int64{2, 1, 0, 1}},
			{20, false, [4]int64{2, 0, 1, 1}},
			{300, false, [4]int64{2, 0, 1, 2}}, // concurrency
		}},
		{"leaky_manual_reduction_disabled", limitertest.Hybrid{WindowMS: 1000, Leaky: 5, TickMS: 100000, Reduction: 1, Concurrency: 10}.Settings(), []call{
			{1, false, [4]int64{5, 4, 99, 1}},
			{20, false, [4]int64{5, 3, 99, 1}},
			{4001, false, [4]int64{5, 2, 95, 1}},
			{10001, false, [4]int64{5, 1, 89, 1}},
		}},
		{"sliding_manual_reduction_disabled", limitertest.Hybrid{Window: 5, WindowMS: 1000, Leaky: 0, TickMS: 100000, Reduction: 1, Concurrency: 10}.Settings(), []call{
			{1, false, [4]int64{5, 4, 0, 1}},
			{20, false, [4]int64{5, 3, 1, 2}},
			{41, false, [4]int64{5, 2, 1, 3}},
			{101, false, [4]int64{5, 1, 1, 4}},
		}},
		{"integration: window 3/2000, leaky 45000", limitertest.Hybrid{Window: 3, WindowMS: 2000, Leaky: 45000, TickMS: 3600000, Reduction: 1, Concurrency: 500000}.Settings(), []call{
			{0, true, [4]int64{45003, 45002, 0, 1}},
			{1, true, [4]int64{45003, 45001, 1, 2}},
			{2, true, [4]int64{45003, 45000, 1, 3}},
			{3, true, [4]int64{45003, 44999, 1, 1}},
			{3, true, [4]int64{45003, 44998, 1, 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := limitertest.New(t, testConfig(tc.group))
			g, _ := l.GroupID("test")
			for i, c := range tc.calls {
				d := l.Decide(at(c.at), limitertest.Peer(A), g)
				f, ok := d.Arweave()
				if !ok {
					t.Fatalf("call %d: no fields", i+1)
				}
				if got := [4]int64{f.Expiring, f.Remaining, f.Reset, f.ResetAmount}; got != c.want {
					t.Errorf("call %d at %d (%s): got {exp, rem, reset, amount} %v, want %v", i+1, c.at, outcome(d), got, c.want)
				}
				if f.Usage != tc.group.SlidingWindowLimit+tc.group.LeakyLimit || f.Concurrency != tc.group.ConcurrencyLimit {
					t.Errorf("call %d: policies %d, %d", i+1, f.Usage, f.Concurrency)
				}
				if c.release {
					d.Release()
				}
			}
		})
	}
}

// TestArweaveFieldsAbsent: replies that are not limited carry no field.
func TestArweaveFieldsAbsent(t *testing.T) {
	cfg := testConfig(limitertest.Hybrid{WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 5}.Settings())
	off := cfg.Groups["general"]
	off.Mode = limiter.ModeOff
	cfg.Groups["general"] = off
	l := limitertest.New(t, cfg)
	g, _ := l.GroupID("general")
	if d := l.Decide(at(0), limitertest.Peer(A), g); d.Allowed {
		if _, ok := d.Arweave(); ok {
			t.Error("a mode off group's decision has fields")
		}
	}
	var zero limiter.Decision
	if _, ok := zero.Arweave(); ok {
		t.Error("the zero decision has fields")
	}
	// A dry_run would-be rejection gets the rejection's fields.
	dry := limitertest.Hybrid{WindowMS: 1000, Leaky: 1, TickMS: 30000, Reduction: 1, Concurrency: 5}.Settings()
	dry.Mode = limiter.ModeDryRun
	l = limitertest.New(t, testConfig(dry))
	tg, _ := l.GroupID("test")
	l.Decide(at(0), limitertest.Peer(A), tg)
	d := l.Decide(at(1), limitertest.Peer(A), tg)
	f, ok := d.Arweave()
	if !d.WouldReject || !ok || f.Remaining != 0 || f.Reset != 29 {
		t.Errorf("dry_run would-reject: %+v %v %+v", d, ok, f)
	}
}

// TestIETFItems: the IETF values are the data plane's of today.
func TestIETFItems(t *testing.T) {
	q := limiter.Quota{BucketLimit: 450, BucketRemaining: 12, BucketWindow: 30000, BucketReset: 6001,
		WindowLimit: 3, WindowRemaining: 1, WindowDuration: 2000, WindowReset: 1}
	items := q.IETFItems("general", nil)
	var got [2]string
	ratelimit.Write(ratelimit.SetIETF, "general", items, nil, nil, func(name string, v []byte) {
		if name == ratelimit.NameIETFPolicy {
			got[0] = string(v)
		} else {
			got[1] = string(v)
		}
	})
	if want := `"general";q=450;w=30, "general-window";q=3;w=2`; got[0] != want {
		t.Errorf("policy %q, want %q", got[0], want)
	}
	if want := `"general";r=12;t=7, "general-window";r=1;t=1`; got[1] != want {
		t.Errorf("ratelimit %q, want %q", got[1], want)
	}
}

// TestArweaveFieldsAlgorithms: a group of another algorithm sends the four
// fields in its own terms (docs/replies.md): expiring = usage = the limit,
// what is left, the seconds until an admission is possible again (0 while one
// is), what that moment restores; a concurrency rejection is the node's
// {concurrency, 0, 1, concurrency}. A dry_run would-be rejection gets the
// rejection's fields.
func TestArweaveFieldsAlgorithms(t *testing.T) {
	type call struct {
		at      int64
		release bool
		want    [4]int64 // {exp, rem, reset, amount}
	}
	for _, tc := range []struct {
		name   string
		k      algo.Kind
		limit  int64
		period int64
		conc   int64
		mode   limiter.Mode
		calls  []call
	}{
		// One every second, a burst of 4.
		{"gcra", algo.GCRA, 4, 4000, 10, limiter.ModeEnforce, []call{
			{0, true, [4]int64{4, 3, 0, 1}},
			{0, true, [4]int64{4, 2, 0, 1}},
			{0, true, [4]int64{4, 1, 0, 1}},
			{0, true, [4]int64{4, 0, 1, 1}},   // the 4th: none left, one back in 1 s
			{500, true, [4]int64{4, 0, 1, 1}}, // rejected: 500 ms, rounded up
			{1000, true, [4]int64{4, 0, 1, 1}},
		}},
		{"token_bucket", algo.TokenBucket, 2, 10000, 10, limiter.ModeEnforce, []call{
			{0, true, [4]int64{2, 1, 0, 1}},
			{0, true, [4]int64{2, 0, 5, 1}},
			{2500, true, [4]int64{2, 0, 3, 1}}, // rejected: 2.5 s to the token
		}},
		// The window [t0, t0+10 s) restores the whole limit when it ends.
		{"fixed_window", algo.FixedWindow, 2, 10000, 10, limiter.ModeEnforce, []call{
			{0, true, [4]int64{2, 1, 0, 2}},
			{1000, true, [4]int64{2, 0, 9, 2}},
			{4000, true, [4]int64{2, 0, 6, 2}},
		}},
		{"sliding_log", algo.SlidingLog, 2, 10000, 10, limiter.ModeEnforce, []call{
			{0, true, [4]int64{2, 1, 0, 1}},
			{3000, true, [4]int64{2, 0, 7, 1}},
			{4000, true, [4]int64{2, 0, 6, 1}},
		}},
		{"concurrency", algo.SlidingWindow, 5, 10000, 1, limiter.ModeEnforce, []call{
			{0, false, [4]int64{5, 4, 0, 1}},
			{1, false, [4]int64{1, 0, 1, 1}},
		}},
		{"dry_run", algo.FixedWindow, 1, 10000, 10, limiter.ModeDryRun, []call{
			{0, true, [4]int64{1, 0, 10, 1}},
			{2000, true, [4]int64{1, 0, 8, 1}}, // would be rejected
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := limiter.ArweaveGroups()[limiter.GroupGeneral]
			s.Algorithm, s.Limit, s.Period, s.ConcurrencyLimit, s.Mode = tc.k, tc.limit, tc.period, tc.conc, tc.mode
			l := limitertest.New(t, testConfig(s))
			g, _ := l.GroupID("test")
			for i, c := range tc.calls {
				d := l.Decide(at(c.at), limitertest.Peer(A), g)
				f, ok := d.Arweave()
				if !ok {
					t.Fatalf("call %d: no fields", i+1)
				}
				if got := [4]int64{f.Expiring, f.Remaining, f.Reset, f.ResetAmount}; got != c.want {
					t.Errorf("call %d at %d (%s): got {exp, rem, reset, amount} %v, want %v", i+1, c.at, outcome(d), got, c.want)
				}
				if f.Usage != tc.limit || f.Concurrency != tc.conc {
					t.Errorf("call %d: usage %d, concurrency %d", i+1, f.Usage, f.Concurrency)
				}
				if c.release {
					d.Release()
				}
			}
		})
	}
}
