package algo

import "testing"

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
		if got, want := PressureAt(TokenBucket, s, p, 0), map[bool]Pressure{true: Light, false: Some}[i <= 1]; got != want {
			t.Fatalf("after %d admissions: %d, want %d", i, got, want)
		}
		s, _, _ = Decide(TokenBucket, s, p, 0)
	}
	if got := PressureAt(TokenBucket, s, p, 0); got != Limited {
		t.Fatalf("exhausted: %d", got)
	}
	if got := PressureAt(TokenBucket, s, p, 1000); got != Light {
		t.Fatalf("refilled a second later: %d", got)
	}
}
