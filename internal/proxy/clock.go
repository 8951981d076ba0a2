package proxy

import (
	"sync/atomic"
	"time"
)

// coarseClock is the time read once every coarseTick by a goroutine of its
// own, for the deadlines moved on every read and write of the data plane
// (several a request, each a clock read otherwise: a measurable share of a
// request's CPU on a virtual machine). Until started and once stopped it
// reads the clock itself. It is safe for concurrent use.
type coarseClock struct {
	ns   atomic.Int64 // Unix nanoseconds; 0: read the clock
	stop chan struct{}
	done chan struct{}
}

// coarseTick is the clock's resolution.
const coarseTick = 5 * time.Millisecond

// now returns the time, at most coarseTick old.
func (c *coarseClock) now() time.Time {
	if ns := c.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// start starts the clock's goroutine.
func (c *coarseClock) start() {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	c.ns.Store(time.Now().UnixNano())
	go func() {
		defer close(c.done)
		t := time.NewTicker(coarseTick)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				c.ns.Store(now.UnixNano())
			case <-c.stop:
				return
			}
		}
	}()
}

// halt stops the clock's goroutine, once; now reads the clock itself
// again. start and halt are called by one goroutine at a time (Serve's
// start, Shutdown's halt, under the Handler's lock).
func (c *coarseClock) halt() {
	if c.stop == nil {
		return
	}
	close(c.stop)
	<-c.done
	c.stop = nil
	c.ns.Store(0)
}

// moveDeadline returns the deadline of an idle timeout t after activity at
// now (the coarse clock's), and whether it changed. It is moved lazily, at
// most once a quarter of t (moving it costs a timer's update), yet never
// leaves less than t: it moves when less than t is left (plus the clock's
// resolution, as now may be that old), and then to t and a quarter ahead.
// A stall is thus cut after t to t and a quarter, never before.
func moveDeadline(dl, now time.Time, t time.Duration) (time.Time, bool) {
	if dl.Sub(now) >= t+coarseTick {
		return dl, false
	}
	return now.Add(t + t/4 + coarseTick), true
}
