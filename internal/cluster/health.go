package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// health is the breaker in front of Redis. Up, requests go to Redis; a
// failure that says Redis itself is unwell turns it down — an error of
// the connection, the server or the script at once, timeouts once no call
// has been answered for twice the timeout (a late pipeline on a busy
// machine is not a dead Redis, while a stalled one answers nothing) — and
// from then on no request touches Redis: each is answered as on_failure
// says, at once. A per-key error never does. One prober decides when Redis
// is back: a probe (a real script call on a canary key, and the eviction
// counter) every 100 ms at first, backing off to 1 s, so that a restarted
// Redis is in use again within about a second and a dead one costs one
// call a second, not one per request (no reconnect storm). It is safe for
// concurrent use.
type health struct {
	up      atomic.Bool
	lastOK  atomic.Int64 // Unix ns of the last call answered in time
	timeout time.Duration
	since   atomic.Int64 // Unix ms of the last change
	reason  atomic.Pointer[string]
	kick    chan struct{}
	log     *slog.Logger

	errs   [numKinds]atomic.Uint64
	logMu  sync.Mutex
	logged map[string]time.Time // last log line per kind
}

// kindIndex numbers the kinds of failure.
var kindIndex = func() map[string]int {
	m := make(map[string]int, len(Kinds))
	for i, k := range Kinds {
		m[k] = i
	}
	return m
}()

func newHealth(log *slog.Logger, timeout time.Duration) *health {
	h := &health{kick: make(chan struct{}, 1), log: log, logged: map[string]time.Time{}, timeout: timeout}
	h.setReason("not checked yet")
	h.since.Store(time.Now().UnixMilli())
	return h
}

func (h *health) setReason(s string) { h.reason.Store(&s) }

// ok records a call that Redis answered in time.
func (h *health) ok() {
	h.lastOK.Store(time.Now().UnixNano())
}

// answeredWithin reports whether a call was answered in time within d.
func (h *health) answeredWithin(d time.Duration) bool {
	return time.Now().UnixNano()-h.lastOK.Load() < int64(d)
}

// probeSoon has the prober probe now rather than at its next turn.
func (h *health) probeSoon() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// fail records a failed call. A per-key error is logged (at most once in
// 10 s per kind) and counted, as is a timeout while Redis answered other
// calls within twice the timeout; anything else turns the breaker down.
func (h *health) fail(kind string, err error) {
	h.errs[kindIndex[kind]].Add(1)
	switch {
	case kind == KindKey:
		h.logSampled(kind, "redis answered an error for one key: deciding that request as cluster.on_failure says", err)
		return
	case kind == KindLimits:
		h.logSampled(kind, "a group's limits cannot be decided in redis: deciding its requests as cluster.on_failure says", err)
		return
	case (kind == KindTimeout || kind == KindBusy) && h.answeredWithin(2*h.timeout):
		h.logSampled(kind, "redis answered late: deciding that request as cluster.on_failure says", err)
		return
	}
	h.down(kind, err)
}

// down turns the breaker down, logging the change.
func (h *health) down(kind string, err error) {
	if h.up.CompareAndSwap(true, false) {
		h.since.Store(time.Now().UnixMilli())
		h.setReason(kind + ": " + err.Error())
		h.log.Error("redis unavailable: deciding as cluster.on_failure says until it answers again", "kind", kind, "err", err)
	} else {
		h.logSampled(kind, "redis still unavailable", err)
	}
	h.probeSoon()
}

// markUp turns the breaker up, logging the change.
func (h *health) markUp() {
	h.ok()
	if !h.up.Swap(true) {
		h.since.Store(time.Now().UnixMilli())
		h.setReason("")
		h.log.Info("redis available: limits are shared again")
	}
}

func (h *health) logSampled(kind, msg string, err error) {
	h.logMu.Lock()
	last, ok := h.logged[kind]
	now := time.Now()
	if ok && now.Sub(last) < 10*time.Second {
		h.logMu.Unlock()
		return
	}
	h.logged[kind] = now
	h.logMu.Unlock()
	h.log.Error(msg, "kind", kind, "err", err)
}

// probeLoop probes Redis while the breaker is down, and every second while
// it is up (an idle instance notices a dead Redis too, and evictions are
// seen), until ctx ends.
func (h *health) probeLoop(ctx context.Context, probe func(ctx context.Context) (kind string, err error), timeout time.Duration) {
	const first, most = 100 * time.Millisecond, time.Second
	wait := first
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-h.kick:
			timer.Stop()
			wait = first
			continue
		case <-timer.C:
		}
		// Up, a probe is not a request: it may take its time (a busy
		// instance is not a dead Redis).
		limit := max(timeout, 500*time.Millisecond)
		if h.up.Load() {
			limit = max(4*timeout, 2*time.Second)
		}
		pctx, cancel := context.WithTimeout(ctx, limit)
		kind, err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			h.markUp()
			wait = most
		case h.up.Load():
			h.errs[kindIndex[kind]].Add(1)
			h.down(kind, err)
			wait = first
		default:
			h.errs[kindIndex[kind]].Add(1)
			h.setReason(kind + ": " + err.Error())
			h.logSampled(kind, "redis still unavailable", err)
			wait = min(wait*2, most)
		}
	}
}
