// Package clock is the daemon's clock: a time that moves with the
// process's monotonic clock, so that a step of the system's wall clock (an
// NTP step, an operator's date) neither stretches nor shrinks an interval
// the limiter measures — a tick, a window, a lease, an expiry. It starts at
// the wall clock's reading and keeps its pace; when the wall clock is
// stepped, the two part by the step, which the Clock detects, logs and
// counts (Check), and which a snapshot records (the wall clock's reading
// beside the Clock's) so that the next process, which starts at the wall
// clock again, places the saved state right (docs/operations.md, "Clock
// steps").
package clock

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// StepThreshold is how far the wall clock must move against the Clock
// between two checks to count as a step: an NTP slew moves it by less.
const StepThreshold = time.Second

// Clock is the daemon's clock (see the package comment). It is safe for
// concurrent use.
type Clock struct {
	base time.Time            // the wall clock's reading at the start, with its monotonic one
	wall func() time.Time     // the system's wall clock
	mono func() time.Duration // the monotonic time since base
	log  *slog.Logger

	mu     sync.Mutex
	offset time.Duration // wall − Now at the last check
	steps  atomic.Uint64
	last   atomic.Int64 // the last offset, ns, for Offset
}

// New returns a Clock reading the wall clock now and moving with the
// monotonic clock from there; log (nil: none) hears of every step.
func New(log *slog.Logger) *Clock {
	base := time.Now()
	return newClock(base, func() time.Time { return time.Now().Round(0) }, func() time.Duration { return time.Since(base) }, log)
}

// NewFake returns a Clock over a wall clock and a monotonic clock of the
// caller's (tests): the Clock reads base plus mono(); wall is what it
// compares with.
func NewFake(base time.Time, wall func() time.Time, mono func() time.Duration, log *slog.Logger) *Clock {
	return newClock(base, wall, mono, log)
}

func newClock(base time.Time, wall func() time.Time, mono func() time.Duration, log *slog.Logger) *Clock {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Clock{base: base, wall: wall, mono: mono, log: log}
}

// Now returns the Clock's time: the wall clock's reading at the start plus
// the monotonic time since. Two readings never go back, and their
// difference is the time that passed, whatever the wall clock did.
func (c *Clock) Now() time.Time { return c.base.Add(c.mono()) }

// Wall returns the system's wall clock, for what must be told in it.
func (c *Clock) Wall() time.Time { return c.wall() }

// Offset returns how far the wall clock was ahead of the Clock (negative:
// behind) at the last Check: the sum of the steps since the start.
func (c *Clock) Offset() time.Duration { return time.Duration(c.last.Load()) }

// Steps returns how many steps Check has seen.
func (c *Clock) Steps() uint64 { return c.steps.Load() }

// Check compares the wall clock with the Clock: when the wall clock moved
// by StepThreshold or more against it since the last check, it logs the
// step at WARN, counts it and returns it (ok true). The Clock itself
// never moves for a step.
func (c *Clock) Check() (step time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	off := c.wall().Sub(c.Now())
	step = off - c.offset
	c.offset = off
	c.last.Store(int64(off))
	if step > -StepThreshold && step < StepThreshold {
		return step, false
	}
	c.steps.Add(1)
	c.log.Warn("the system clock was stepped: limiterd keeps measuring intervals on its own clock",
		"step", step.Round(time.Millisecond).String(), "wall_minus_limiterd", off.Round(time.Millisecond).String())
	return step, true
}

// Run checks the clock every second until ctx ends.
func (c *Clock) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Check()
		}
	}
}
