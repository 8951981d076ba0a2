package clock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/clock"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter"
)

// fakeTime is a wall clock that an operator may step and a monotonic
// clock that only moves forward.
type fakeTime struct {
	mono atomic.Int64 // ns since the start
	step atomic.Int64 // ns the wall clock was stepped by, in all
}

func (f *fakeTime) Mono() time.Duration { return time.Duration(f.mono.Load()) }

func (f *fakeTime) Wall() time.Time {
	return limitertest.T0.Add(time.Duration(f.mono.Load() + f.step.Load()))
}

func (f *fakeTime) pass(d time.Duration)   { f.mono.Add(int64(d)) }
func (f *fakeTime) stepBy(d time.Duration) { f.step.Add(int64(d)) }

// TestClockSteps: a step of the wall clock either way leaves the Clock's
// time moving with the monotonic clock; Check reports and counts the step
// once, not a slew below the threshold.
func TestClockSteps(t *testing.T) {
	var f fakeTime
	c := clock.NewFake(limitertest.T0, f.Wall, f.Mono, nil)
	f.pass(10 * time.Second)
	if _, ok := c.Check(); ok {
		t.Fatal("a step reported with none")
	}
	f.stepBy(-time.Hour)
	f.pass(time.Second)
	if got := c.Now(); !got.Equal(limitertest.T0.Add(11 * time.Second)) {
		t.Fatalf("Now after a step back: %v, want T0+11s", got)
	}
	step, ok := c.Check()
	if !ok || step != -time.Hour || c.Steps() != 1 || c.Offset() != -time.Hour {
		t.Fatalf("step back: %v %v, steps %d, offset %v", step, ok, c.Steps(), c.Offset())
	}
	f.stepBy(2 * time.Hour)
	if step, ok := c.Check(); !ok || step != 2*time.Hour || c.Steps() != 2 || c.Offset() != time.Hour {
		t.Fatalf("step forward: %v %v, steps %d, offset %v", step, ok, c.Steps(), c.Offset())
	}
	f.stepBy(300 * time.Millisecond) // a slew
	if _, ok := c.Check(); ok || c.Steps() != 2 {
		t.Fatal("a slew counted as a step")
	}
}

// TestLimiterThroughSteps: a peer that spent its tokens is admitted again
// at the next leaky tick of the Clock's time, whether the wall clock was
// stepped back an hour (no lockout for the hour) or forward an hour (no
// early refill).
func TestLimiterThroughSteps(t *testing.T) {
	for _, stepBy := range []time.Duration{-time.Hour, time.Hour} {
		var f fakeTime
		c := clock.NewFake(limitertest.T0, f.Wall, f.Mono, nil)
		g := limitertest.Hybrid{WindowMS: 1000, Leaky: 2, TickMS: 10_000, Reduction: 2, Concurrency: 10}.Settings()
		l := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"test": g}))
		id, _ := l.GroupID("test")
		p := limitertest.Peer("192.0.2.1")
		decide := func() bool {
			d := l.Decide(c.Now(), p, id)
			d.Release()
			return d.Allowed
		}
		first, second, third := decide(), decide(), decide()
		if !first || !second || third {
			t.Fatal("setup: two tokens, then a rejection")
		}
		f.stepBy(stepBy)
		c.Check()
		f.pass(5 * time.Second)
		if decide() {
			t.Fatalf("step %v: admitted 5 s before the tick", stepBy)
		}
		f.pass(5 * time.Second)
		if !decide() {
			t.Fatalf("step %v: still rejected at the tick", stepBy)
		}
	}
}

// TestWallClockWouldLockOut is the control of TestLimiterThroughSteps: the
// same peer decided on the wall clock is locked out for the hour a step
// back adds, which the Clock is there to prevent.
func TestWallClockWouldLockOut(t *testing.T) {
	var f fakeTime
	g := limitertest.Hybrid{WindowMS: 1000, Leaky: 2, TickMS: 10_000, Reduction: 2, Concurrency: 10}.Settings()
	l := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"test": g}))
	id, _ := l.GroupID("test")
	p := limitertest.Peer("192.0.2.1")
	for range 3 {
		d := l.Decide(f.Wall(), p, id)
		d.Release()
	}
	f.stepBy(-time.Hour)
	f.pass(10 * time.Second)
	if d := l.Decide(f.Wall(), p, id); d.Allowed {
		t.Fatal("on the wall clock a step back did not lock the peer out: the test no longer shows what the Clock prevents")
	}
}

// TestRestoreAcrossAStep: a snapshot taken on the Clock after the wall
// clock was stepped forward an hour records both readings; restored on
// the wall clock a few seconds later, the gap is those seconds, not an
// hour and more, so the peer's spent tokens are not refilled early.
// Without the wall reading the hour would count as time passed.
func TestRestoreAcrossAStep(t *testing.T) {
	var f fakeTime
	c := clock.NewFake(limitertest.T0, f.Wall, f.Mono, nil)
	g := limitertest.Hybrid{WindowMS: 1000, Leaky: 2, TickMS: 600_000, Reduction: 2, Concurrency: 10}.Settings()
	cfg := limitertest.Config(map[string]limiter.GroupSettings{"test": g})
	l := limitertest.New(t, cfg)
	id, _ := l.GroupID("test")
	p := limitertest.Peer("192.0.2.1")
	f.pass(time.Second)
	for range 2 {
		d := l.Decide(c.Now(), p, id)
		d.Release()
	}
	f.stepBy(time.Hour)
	f.pass(time.Second)
	snap := l.Snapshot(c.Now())
	snap.WallAt = c.Wall().UnixMilli()
	f.pass(3 * time.Second) // the restart
	for _, withWall := range []bool{true, false} {
		s := snap
		if !withWall {
			s.WallAt = 0
		}
		r := limitertest.New(t, cfg)
		rep, err := r.Restore(c.Wall(), s)
		if err != nil {
			t.Fatal(err)
		}
		d := r.Decide(c.Wall(), p, id)
		switch {
		case withWall && (rep.Gap != 3*time.Second || d.Allowed):
			t.Fatalf("with the wall reading: gap %v, admitted %v; want 3s and a rejection", rep.Gap, d.Allowed)
		case !withWall && (rep.Gap < time.Hour || !d.Allowed):
			t.Fatalf("control without it: gap %v, admitted %v; want over an hour and a refilled bucket", rep.Gap, d.Allowed)
		}
	}
}

// TestSnapshotReadingsJitter: a snapshot whose two readings are a few ms
// apart (they are taken a moment apart) restores without any shift; one a
// second or more apart is a step, and moves it.
func TestSnapshotReadingsJitter(t *testing.T) {
	snap := limiter.Snapshot{TakenAt: 1_000_000, WallAt: 1_000_001}
	if s := snap.Shift(1_000_500); s != 0 {
		t.Fatalf("1 ms apart: shift %d, want 0", s)
	}
	snap.WallAt = 1_000_000 + limiter.MinWallStep
	if s := snap.Shift(1_005_000); s != limiter.MinWallStep {
		t.Fatalf("a second apart: shift %d, want %d", s, limiter.MinWallStep)
	}
}
