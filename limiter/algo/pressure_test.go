package algo

import (
	"math/rand/v2"
	"testing"
)

func TestPressure(t *testing.T) {
	for _, tc := range []struct {
		remaining, fresh int64
		want             Pressure
	}{
		{10, 10, Light}, {9, 10, Light}, {8, 10, Some}, {1, 10, Some}, {0, 10, Limited}, {0, 1, Limited}, {1, 1, Light},
	} {
		if got := PressureOf(tc.remaining, tc.fresh); got != tc.want {
			t.Errorf("PressureOf(%d, %d) = %d, want %d", tc.remaining, tc.fresh, got, tc.want)
		}
	}
	p := Resolve(10, 1000, 0)
	s := Fresh(TokenBucket, p, 0)
	for i := range 10 {
		if got, want := PressureAt(TokenBucket, s, Held{}, &Limits{Params: p}, 0), map[bool]Pressure{true: Light, false: Some}[i <= 1]; got != want {
			t.Fatalf("after %d admissions: %d, want %d", i, got, want)
		}
		s, _, _ = Decide(TokenBucket, s, p, 0)
	}
	if got := PressureAt(TokenBucket, s, Held{}, &Limits{Params: p}, 0); got != Limited {
		t.Fatalf("exhausted: %d", got)
	}
	if got := PressureAt(TokenBucket, s, Held{}, &Limits{Params: p}, 1000); got != Light {
		t.Fatalf("refilled a second later: %d", got)
	}
}

// TestPressureAtMatchesQuota: PressureAt is PressureOf of the quota's
// Remaining against the fresh capacity, on states reached by random
// decisions and reductions at random times.
func TestPressureAtMatchesQuota(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	for _, k := range []Kind{TokenBucket, GCRA, FixedWindow, SlidingWindow} {
		for range 200 {
			limit, period := 1+rng.Int64N(20), 1+rng.Int64N(5000)
			burst := int64(0)
			if k.HasBurst() {
				burst = rng.Int64N(30)
			}
			p := Resolve(limit, period, burst)
			fresh := p.Limit
			if k.HasBurst() {
				fresh = p.Burst
			}
			now := rng.Int64N(1_000_000)
			s := Fresh(k, p, now)
			for range 100 {
				now += rng.Int64N(1 + 2*period/limit)
				if rng.IntN(5) == 0 {
					s, _ = reduceOK(k, s, p, now)
				} else {
					s, _, _ = Decide(k, s, p, now)
				}
				if got, want := PressureAt(k, s, Held{}, &Limits{Params: p}, now), PressureOf(QuotaOf(k, s, Held{}, &Limits{Params: p}, now, 0).Remaining, fresh); got != want {
					t.Fatalf("%s %+v %+v at %d: %d, quota says %d", k, p, s, now, got, want)
				}
			}
		}
	}
}

func reduceOK(k Kind, s State, p Params, now int64) (State, bool) {
	s, g := Reduce(k, s, &Limits{Params: p}, now)
	return s, g == GiveState
}
