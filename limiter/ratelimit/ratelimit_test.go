package ratelimit_test

import (
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// emitted collects what Write emits, in order.
func emitted(set ratelimit.Set, group string, ietf []ratelimit.IETFItem, f *ratelimit.Fields) [][2]string {
	var out [][2]string
	ratelimit.Write(set, group, ietf, f, nil, func(name string, v []byte) {
		out = append(out, [2]string{name, string(v)})
	})
	return out
}

// The formatter cases of arweave_limiter_http_headers_SUITE: the policies
// are group "test_limiter", window 10, burst 450 (usage 460),
// concurrency 500 (the "real life" case: window 1000, burst 6000,
// concurrency 200). Retry-After is not the formatter's here (docs/replies.md).
func TestHeaderSuiteVectors(t *testing.T) {
	L := func(x string) string {
		return x + `, 460;policy="test_limiter usage", 500;policy="test_limiter concurrency" `
	}
	for _, tc := range []struct {
		name                    string
		f                       ratelimit.Fields
		limit, rem, reset, amnt string
	}{
		{"register 1", ratelimit.Fields{Expiring: 460, Usage: 460, Concurrency: 500, Remaining: 9, Reset: 1, ResetAmount: 123}, L("460"), "9", "1", "123"},
		{"register 2", ratelimit.Fields{Expiring: 460, Usage: 460, Concurrency: 500, Remaining: 449, Reset: 29, ResetAmount: 123}, L("460"), "449", "29", "123"},
		{"reject 1", ratelimit.Fields{Expiring: 500, Usage: 460, Concurrency: 500, Remaining: 0, Reset: 1, ResetAmount: 123},
			`500, 460;policy="test_limiter usage", 500;policy="test_limiter concurrency" `, "0", "1", "123"},
		{"reject 2 (real life)", ratelimit.Fields{Expiring: 200, Usage: 7000, Concurrency: 200, Remaining: 0, Reset: 1, ResetAmount: 200},
			`200, 7000;policy="test_limiter usage", 200;policy="test_limiter concurrency" `, "0", "1", "200"},
		{"reject 3", ratelimit.Fields{Expiring: 460, Usage: 460, Concurrency: 500, Remaining: 0, Reset: 15, ResetAmount: 123}, L("460"), "0", "15", "123"},
		{"negative remaining", ratelimit.Fields{Expiring: 5, Usage: 5, Concurrency: 1, Remaining: -3, Reset: 1, ResetAmount: 1},
			`5, 5;policy="test_limiter usage", 1;policy="test_limiter concurrency" `, "-3", "1", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := emitted(ratelimit.SetArweave, "test_limiter", nil, &tc.f)
			want := [][2]string{
				{"ratelimit-limit", tc.limit}, {"ratelimit-remaining", tc.rem},
				{"ratelimit-reset", tc.reset}, {"ratelimit-reset-amount", tc.amnt},
			}
			if len(got) != len(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("field %d: got %q, want %q", i, got[i], want[i])
				}
			}
			if !strings.HasSuffix(got[0][1], `concurrency" `) {
				t.Errorf("ratelimit-limit %q lost its trailing space", got[0][1])
			}
		})
	}
}

// fields is {exp, rem, reset, amount}.
type fields [4]int64

func of(f ratelimit.Fields) fields { return fields{f.Expiring, f.Remaining, f.Reset, f.ResetAmount} }

// TestGroupSuiteVectors reproduces the {exp, rem, reset, amount} sequences
// of arweave_limiter_group_SUITE and the limiter+throttle integration
// suite from the state the node holds at each call (worker started at 0,
// so the next leaky tick is at leaky_tick_ms).
func TestGroupSuiteVectors(t *testing.T) {
	type call struct {
		h    ratelimit.Hybrid
		want fields
	}
	const (
		W = ratelimit.AdmittedWindow
		B = ratelimit.AdmittedBucket
		C = ratelimit.RejectedConcurrency
		R = ratelimit.RejectedRate
	)
	// hy builds the state for a group of window limit swl, leaky ll,
	// reduction red, concurrency conc, tick at next.
	hy := func(swl, ll, red, conc, next int64) func(o ratelimit.Outcome, now, window, oldest, tokens int64) ratelimit.Hybrid {
		return func(o ratelimit.Outcome, now, window, oldest, tokens int64) ratelimit.Hybrid {
			return ratelimit.Hybrid{Outcome: o, Now: now, WindowLimit: swl, Window: window, Oldest: oldest,
				LeakyLimit: ll, Tokens: tokens, NextTick: next, TickReduction: red, ConcurrencyLimit: conc}
		}
	}
	peerCleanup := hy(1, 1, 1, 2, 100000)
	leakyDisabled := hy(0, 5, 1, 10, 100000)
	slidingDisabled := hy(5, 0, 1, 10, 100000)
	integration := hy(3, 45000, 1, 500000, 3600000)
	concHit := hy(4000, 45000, 1, 3, 3600000)
	general := hy(3, 450, 450, 150, 30000) // research §2.5: the next tick 20 s after the first call
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"peer_cleanup", []call{
			{peerCleanup(W, 1, 1, 1, 0), fields{2, 1, 0, 1}},
			{peerCleanup(B, 20, 1, 1, 1), fields{2, 0, 1, 1}},
			{peerCleanup(C, 300, 1, 1, 1), fields{2, 0, 1, 2}},
		}},
		{"leaky_manual_reduction_disabled", []call{
			{leakyDisabled(B, 1, 0, 0, 1), fields{5, 4, 99, 1}},
			{leakyDisabled(B, 20, 0, 0, 2), fields{5, 3, 99, 1}},
			{leakyDisabled(B, 4001, 0, 0, 3), fields{5, 2, 95, 1}},
			{leakyDisabled(B, 10001, 0, 0, 4), fields{5, 1, 89, 1}},
		}},
		{"sliding_manual_reduction_disabled", []call{
			{slidingDisabled(W, 1, 1, 1, 0), fields{5, 4, 0, 1}},
			{slidingDisabled(W, 20, 2, 1, 0), fields{5, 3, 1, 2}},
			{slidingDisabled(W, 41, 3, 1, 0), fields{5, 2, 1, 3}},
			{slidingDisabled(W, 101, 4, 1, 0), fields{5, 1, 1, 4}},
		}},
		{"no_throttling_under_sliding_overflow_with_large_burst", []call{
			{integration(W, 0, 1, 0, 0), fields{45003, 45002, 0, 1}},
			{integration(W, 1, 2, 0, 0), fields{45003, 45001, 1, 2}},
			{integration(W, 2, 3, 0, 0), fields{45003, 45000, 1, 3}},
			{integration(B, 3, 3, 0, 1), fields{45003, 44999, 1, 1}},
			{integration(B, 3, 3, 0, 2), fields{45003, 44998, 1, 1}},
		}},
		{"concurrency_limit_has_been_hit", []call{
			{concHit(W, 0, 1, 0, 0), fields{49000, 48999, 0, 1}},
			{concHit(W, 100, 2, 0, 0), fields{49000, 48998, 1, 2}},
			{concHit(W, 200, 3, 0, 0), fields{49000, 48997, 1, 3}},
			{concHit(C, 300, 3, 0, 0), fields{3, 0, 1, 3}},
			{concHit(W, 400, 4, 0, 0), fields{49000, 48996, 1, 4}},
		}},
		{"leaky_only_exhausts_quota", []call{
			{hy(0, 5, 1, 500000, 3600000)(B, 0, 0, 0, 1), fields{5, 4, 3600, 1}},
			{hy(0, 5, 1, 500000, 3600000)(B, 1, 0, 0, 2), fields{5, 3, 3599, 1}},
			{hy(0, 5, 1, 500000, 3600000)(B, 4, 0, 0, 5), fields{5, 0, 3599, 1}},
		}},
		// docs/replies.md's worked values; the 4th is 449/1/450 (decision
		// 89).
		{"general 2.9.7 worked example", []call{
			{general(W, 10000, 1, 10000, 0), fields{453, 452, 0, 1}},
			{general(W, 10500, 2, 10000, 0), fields{453, 451, 1, 2}},
			{general(W, 11000, 3, 10000, 0), fields{453, 450, 1, 3}},
			{general(B, 11200, 3, 10000, 1), fields{453, 449, 1, 450}},
			{general(W, 12000, 3, 10500, 1), fields{453, 449, 1, 3}},
			// The tick is shown only when the oldest timestamp's age is not
			// below the time to the tick.
			{general(B, 29500, 3, 28000, 2), fields{453, 448, 1, 450}},
			// A rate rejection in the same ms as the whole window: reset 0.
			{hy(3, 1, 7, 150, 30000)(R, 11000, 3, 11000, 1), fields{4, 0, 0, 3}},
			// ... and with the window older than the tick is far: the tick's
			// amount.
			{hy(3, 1, 7, 150, 30000)(R, 29000, 3, 27500, 1), fields{4, 0, 1, 7}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, c := range tc.calls {
				if got := of(ratelimit.ArweaveFields(&c.h)); got != c.want {
					t.Errorf("call %d at %d: got {exp, rem, reset, amount} %v, want %v", i+1, c.h.Now, got, c.want)
				}
			}
		})
	}
}

func TestSet(t *testing.T) {
	for _, tc := range []struct {
		s             string
		ietf, arweave bool
	}{{"both", true, true}, {"ietf", true, false}, {"arweave", false, true}, {"none", false, false}} {
		s, err := ratelimit.ParseSet(tc.s)
		if err != nil || s.String() != tc.s || s.IETF() != tc.ietf || s.Arweave() != tc.arweave {
			t.Errorf("%s: %v %v ietf=%v arweave=%v", tc.s, s, err, s.IETF(), s.Arweave())
		}
	}
	if _, err := ratelimit.ParseSet("Both"); err == nil || !strings.Contains(err.Error(), `"Both"`) {
		t.Errorf("ParseSet(Both): %v", err)
	}
	f := ratelimit.Fields{Expiring: 1, Usage: 1, Concurrency: 1}
	items := []ratelimit.IETFItem{{Name: "general", Quota: 450, Window: 30, Remaining: 12, Reset: 7}}
	if got := emitted(ratelimit.SetNone, "g", items, &f); len(got) != 0 {
		t.Errorf("none emitted %q", got)
	}
	got := emitted(ratelimit.SetBoth, "g", items, &f)
	if len(got) != 6 || got[0] != [2]string{"RateLimit-Policy", `"general";q=450;w=30`} || got[1] != [2]string{"RateLimit", `"general";r=12;t=7`} {
		t.Errorf("both emitted %q", got)
	}
	if got := emitted(ratelimit.SetIETF, "g", items, &f); len(got) != 2 {
		t.Errorf("ietf emitted %q", got)
	}
	if got := emitted(ratelimit.SetArweave, "g", items, nil); len(got) != 0 {
		t.Errorf("arweave without fields emitted %q", got)
	}
}

func TestWriteDoesNotAllocate(t *testing.T) {
	f := ratelimit.Fields{Expiring: 453, Usage: 453, Concurrency: 150, Remaining: 449, Reset: 1, ResetAmount: 450}
	items := []ratelimit.IETFItem{{Name: "general", Quota: 450, Window: 30, Remaining: 12, Reset: 7}, {Name: "general-window", Quota: 3, Window: 2, Remaining: 0, Reset: 1}}
	scratch := make([]byte, 0, 256)
	var sink [6][64]byte
	n := 0
	emit := func(name string, v []byte) { copy(sink[n%6][:], v); n++ }
	allocs := testing.AllocsPerRun(100, func() {
		scratch = ratelimit.Write(ratelimit.SetBoth, "general", items, &f, scratch, emit)
	})
	if allocs != 0 {
		t.Errorf("Write allocates %v times", allocs)
	}
}
