package limiter

import (
	"time"
)

// Tick counts the leaky ticks due at now (ar_limiter_leaky_ticks) and
// sweeps the backend when it is a Sweeper: the local one applies the
// leaky and cleanup ticks to every entry and deletes the entries left
// empty, a few hundred entries per lock hold, so that no tick stops the
// world. Decisions apply due ticks to the entries they touch on their own;
// Tick keeps idle entries, the gauges and the tick counters current. Call
// it about once a second; Apply runs it too, and calls on several
// goroutines are safe.
func (l *Limiter) Tick(now time.Time) {
	ms := now.UnixMilli()
	st := l.set.Load()
	l.mu.Lock()
	for g := range st.groups {
		gr := &st.groups[g]
		if !gr.defined || g == int(LocalPeers) {
			continue
		}
		if k := gr.Leaky.IndexAt(ms); k > l.lastTick[g] {
			l.leakyTicks[g].Add(uint64(k - l.lastTick[g]))
			l.lastTick[g] = k
		}
	}
	l.mu.Unlock()
	if sw, ok := l.backend.(Sweeper); ok {
		sw.Sweep(ms, &st.GroupTable)
	}
}
