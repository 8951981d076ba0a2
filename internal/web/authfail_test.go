package web

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
)

// TestAuthFailureDelays: the first five failures of an address in a
// minute are answered at once, each further one after a delay that
// doubles up to maxAuthDelay; another address, and the next minute, start
// afresh; every failure is counted by kind.
func TestAuthFailureDelays(t *testing.T) {
	c := limitertest.NewClock(limitertest.T0)
	f := newAuthFails(c.Now)
	var got []time.Duration
	for i := range 12 {
		got = append(got, f.failed("192.0.2.1", i%2 == 0))
	}
	want := []time.Duration{0, 0, 0, 0, 0, authDelay, 2 * authDelay, 4 * authDelay, 8 * authDelay, maxAuthDelay, maxAuthDelay, maxAuthDelay}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("failure %d: delay %v, want %v (all: %v)", i+1, got[i], want[i], got)
		}
	}
	if d := f.failed("192.0.2.2", false); d != 0 {
		t.Fatalf("another address: %v", d)
	}
	c.Add(authWindow)
	if d := f.failed("192.0.2.1", false); d != 0 {
		t.Fatalf("the next minute: %v", d)
	}
	if f.login.Load() != 8 || f.bearer.Load() != 6 || f.delayed.Load() != 7 {
		t.Fatalf("login %d, bearer %d, delayed %d", f.login.Load(), f.bearer.Load(), f.delayed.Load())
	}
}
