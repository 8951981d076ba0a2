package proxy

import (
	"slices"
	"time"
)

// Pooled connections are taken most recently used first, so after a burst
// the ones at the bottom of the pool may never be taken again: without a
// reaper they stay open (an fd each, and a CLOSE_WAIT socket once the node
// closes its end) however long the pool is idle, past maxIdleTime. The
// reaper is a timer armed while the pool holds a connection.

// armReaper arms the reaper for when the oldest pooled connection turns
// maxIdleTime old, unless it is armed or the pool is empty or closed.
// u.mu must be held.
func (u *upstream) armReaper(now time.Time) {
	if u.reaper != nil || len(u.idle) == 0 || u.closed {
		return
	}
	wait := max(u.idle[0].lastUsed.Add(maxIdleTime).Sub(now), coarseTick) + coarseTick
	u.reaper = time.AfterFunc(wait, u.reap)
}

// reap closes the connections idle for maxIdleTime, and arms itself again
// for the rest.
func (u *upstream) reap() {
	now := u.h.clock.now()
	u.mu.Lock()
	u.reaper = nil
	u.mu.Unlock()
	u.reapIdle(now)
	u.mu.Lock()
	u.armReaper(now)
	u.mu.Unlock()
}

// reapIdle closes the pooled connections last used maxIdleTime or more
// before now (the pool holds them least recently used first) and returns
// how many it closed.
func (u *upstream) reapIdle(now time.Time) int {
	u.mu.Lock()
	n := 0
	for n < len(u.idle) && now.Sub(u.idle[n].lastUsed) >= maxIdleTime {
		n++
	}
	stale := slices.Clone(u.idle[:n])
	clear(u.idle[:n])
	u.idle = slices.Delete(u.idle, 0, n)
	u.mu.Unlock()
	for _, c := range stale {
		u.discard(c)
	}
	return n
}
