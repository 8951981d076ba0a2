// Package throttle is the outbound throttle of docs/throttle.md
// (HyperBEAM/Arweave ar_rate_limiter): it tells the node when it may send its
// own request to a peer. Like the limiter core it is pure: the standard library
// only (the core's path patterns come compiled, through Config.Compile), time
// always an argument, no goroutine.
package throttle

import (
	"cmp"
	"encoding/json"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is the outcome of one Throttle evaluation.
type Result struct {
	// Admitted is true when the call may go ahead now.
	Admitted bool
	// Exempt is true for an exempt peer or path: admitted, nothing recorded.
	Exempt bool
	// Off is true when the throttle is off: admitted, nothing recorded.
	Off bool
	// Type and Capacity are the path's classification.
	Type     string
	Capacity int
	// Count is the number of the key's timestamps in the window: after
	// this call's own, for an admission that records one.
	Count int
	// RetryIn is the retry interval when the call is not admitted (when to
	// evaluate it again), 0 otherwise.
	RetryIn time.Duration
	// EarliestIn is, when the call is not admitted, how long until it could
	// be if nothing else is admitted meanwhile (normally: until the oldest
	// timestamp leaves the window); 0 otherwise.
	EarliestIn time.Duration
}

// Stats are the throttle's counters (they only grow) and gauges.
type Stats struct {
	Keys       int64  // (peer, type) keys tracked
	Timestamps int64  // admission timestamps held, over all keys
	Waiters    int64  // calls waiting now (see AddWaiter)
	Admitted   uint64 // calls admitted by the window (each recorded a timestamp)
	Refused    uint64 // evaluations that did not admit (a waiting call is refused once per retry)
	Delayed    uint64 // calls that had to wait (counted by AddWaiter)
	Exempt     uint64 // calls of exempt peers or paths
	Off        uint64 // calls admitted because the throttle was off
	// Since is when the counters started: the time given to New.
	Since time.Time
}

// KeyView is the state of one (peer, type), for the dashboard.
type KeyView struct {
	Peer     string
	Type     string
	Count    int // timestamps in the window
	Capacity int // the type's capacity under the current rules
	Waiters  int // calls waiting on the key
	// EarliestIn is how long until a call could be admitted (0: now).
	EarliestIn time.Duration
}

// Throttle is the outbound throttle of docs/throttle.md (HyperBEAM/Arweave
// ar_rate_limiter): per (peer, type), the timestamps of admitted calls in a
// sliding window. It is safe for concurrent use: evaluations of one key are
// linearisable, keys are spread over independent locks, and an evaluation
// holds its lock for a handful of comparisons only, so many callers
// re-evaluating one hot key do not queue behind each other for long. It
// never reads the clock and starts no goroutine: the caller passes the time
// and does the waiting (and calls Cleanup now and then).
type Throttle struct {
	set     atomic.Pointer[throttleSettings]
	enabled atomic.Bool
	seed    maphash.Seed
	since   time.Time // when the counters started

	keys       atomic.Int64
	timestamps atomic.Int64
	waiters    atomic.Int64
	admitted   atomic.Uint64
	refused    atomic.Uint64
	delayed    atomic.Uint64
	exempt     atomic.Uint64
	off        atomic.Uint64

	shards [throttleShards]throttleShard

	// ad is the adaptive throttle's state (mode adaptive); its replies are
	// learned in either mode.
	ad *adaptive
}

const throttleShards = 32

// throttleShard is one lock's worth of keys.
type throttleShard struct {
	mu sync.Mutex
	m  map[throttleKey]*throttleEntry
	_  [64]byte // keep the next shard's lock off this cache line
}

type throttleKey struct{ peer, typ string }

// throttleEntry is one (peer, type): its timestamps (sorted) and the calls
// waiting on it.
type throttleEntry struct {
	win     window
	waiters int
}

// New returns a Throttle for cfg, switched on, tracking nothing, whose
// counters start at now (Stats.Since). An error is a *limiter.FieldError naming
// the key.
func New(now time.Time, cfg Config) (*Throttle, error) {
	st, err := compileThrottle(cfg)
	if err != nil {
		return nil, err
	}
	t := &Throttle{seed: maphash.MakeSeed(), since: now, ad: newAdaptive()}
	for i := range t.shards {
		t.shards[i].m = make(map[throttleKey]*throttleEntry)
	}
	t.set.Store(st)
	t.enabled.Store(true)
	return t, nil
}

// Apply installs cfg at once, keeping all timestamps and waiters: a key
// whose type no rule gives any more simply expires. On error nothing
// changes; the error is a *limiter.FieldError naming the key.
func (t *Throttle) Apply(cfg Config) error {
	st, err := compileThrottle(cfg)
	if err != nil {
		return err
	}
	t.set.Store(st)
	return nil
}

// Config returns a copy of the configuration in force.
func (t *Throttle) Config() Config { return cloneThrottleConfig(t.set.Load().cfg) }

// Classify returns the type of path and its rate in requests per minute:
// the first rule with a matching pattern, else the default. Exemptions do
// not change the type.
func (t *Throttle) Classify(path string) (typ string, rpm int) {
	c := t.set.Load().classify(path)
	return c.typ, c.rpm
}

// SetEnabled switches the throttle on or off. While off, Try and Peek
// admit every call at once and record nothing; calls already waiting keep
// waiting (Retry ignores the switch), as in ar_rate_limiter.
func (t *Throttle) SetEnabled(on bool) { t.enabled.Store(on) }

// Enabled reports whether the throttle is on.
func (t *Throttle) Enabled() bool { return t.enabled.Load() }

// Try evaluates a new call at now: an exempt peer (exact match) or path,
// or the throttle being off, admits it at once recording nothing;
// otherwise it is admitted, and now recorded, iff the key's timestamps in
// the window (those not older than now − period) number fewer than the
// type's capacity. A call not admitted changes nothing; the caller waits
// RetryIn and evaluates it again with Retry.
func (t *Throttle) Try(now time.Time, peer, path string) Result {
	return t.evaluate(now, peer, path, true, true)
}

// Retry evaluates again a call that Try did not admit, at now. Unlike Try
// it ignores the switch and the exemptions: once waiting, a call waits for
// the window (in ar_rate_limiter the delayed re-check skips the off test,
// so "off does not release callers already waiting").
func (t *Throttle) Retry(now time.Time, peer, path string) Result {
	return t.evaluate(now, peer, path, true, false)
}

// Peek is Try without recording anything: whether a new call at now would
// be admitted, and if not how long until it could be.
func (t *Throttle) Peek(now time.Time, peer, path string) Result {
	return t.evaluate(now, peer, path, false, true)
}

func (t *Throttle) evaluate(now time.Time, peer, path string, record, entry bool) Result {
	st := t.set.Load()
	c := st.classify(path)
	typ, capacity := c.typ, c.cap
	res := Result{Type: typ, Capacity: capacity}
	if entry {
		_, exemptPeer := st.exemptPeers[peer]
		switch {
		case exemptPeer || c.exempt:
			res.Admitted, res.Exempt = true, true
			if record {
				t.exempt.Add(1)
			}
			return res
		case !t.enabled.Load():
			res.Admitted, res.Off = true, true
			if record {
				t.off.Add(1)
			}
			return res
		}
	}
	ms := now.UnixMilli()
	cut := ms - st.period
	k := throttleKey{peer, typ}
	sh := t.shard(k)
	sh.mu.Lock()
	e := sh.m[k]
	n := 0
	if e != nil {
		if record {
			if d := e.win.dropBefore(cut); d > 0 {
				t.timestamps.Add(-int64(d))
			}
		}
		n = e.win.countFrom(cut)
	}
	if n+1 <= capacity {
		res.Admitted = true
		res.Count = n
		if record {
			if e == nil {
				e = &throttleEntry{}
				sh.m[throttleKey{cloneString(peer), cloneString(typ)}] = e
				t.keys.Add(1)
			}
			e.win.add(ms)
			res.Count++
		}
		sh.mu.Unlock()
		if record {
			t.timestamps.Add(1)
			t.admitted.Add(1)
		}
		return res
	}
	res.Count = n
	res.EarliestIn = earliest(&e.win, n, capacity, cut, st.period, ms)
	sh.mu.Unlock()
	res.RetryIn = st.cfg.RetryInterval
	if record {
		t.refused.Add(1)
	}
	return res
}

// earliest returns how long after ms a call could be admitted to a window
// holding n unexpired timestamps (n ≥ capacity), if nothing else is: when
// the (n−capacity+1)-th oldest of them has left it. A timestamp ts leaves
// once now − period > ts, at ts + period + 1 ms.
func earliest(w *window, n, capacity int, cut, period, ms int64) time.Duration {
	first := w.len() - n // index of the oldest unexpired timestamp
	ts := w.at(first + n - capacity)
	return time.Duration(ts+period+1-ms) * time.Millisecond
}

func (t *Throttle) shard(k throttleKey) *throttleShard {
	h := maphash.String(t.seed, k.peer) ^ maphash.String(t.seed, k.typ)*0x9e3779b97f4a7c15
	return &t.shards[h%throttleShards]
}

// cloneString copies s so that a key does not pin the caller's buffer.
func cloneString(s string) string { return string([]byte(s)) }

// AddWaiter adds delta (+1 when a call starts waiting on the key, −1 when
// it stops, admitted or not) to the waiters of (peer, typ), for Stats and
// Keys. A key with waiters is never removed by Cleanup. Each positive delta
// also counts as calls delayed.
func (t *Throttle) AddWaiter(peer, typ string, delta int) {
	if delta == 0 {
		return
	}
	k := throttleKey{peer, typ}
	sh := t.shard(k)
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		if delta < 0 {
			sh.mu.Unlock()
			return
		}
		e = &throttleEntry{}
		sh.m[throttleKey{cloneString(peer), cloneString(typ)}] = e
		t.keys.Add(1)
	}
	old := e.waiters
	e.waiters = max(0, old+delta)
	change := e.waiters - old
	if e.waiters == 0 && e.win.len() == 0 {
		delete(sh.m, k)
		t.keys.Add(-1)
	}
	sh.mu.Unlock()
	t.waiters.Add(int64(change))
	if delta > 0 {
		t.delayed.Add(uint64(delta))
	}
}

// Cleanup drops every expired timestamp (older than now − period) and
// every key left with neither timestamps nor waiters, and returns how many
// keys it removed. ar_rate_limiter never frees an idle key; call Cleanup
// now and then (every period is plenty) so that peers seen once do not
// stay tracked. It locks one shard at a time.
func (t *Throttle) Cleanup(now time.Time) int {
	cut := now.UnixMilli() - t.set.Load().period
	removed := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if d := e.win.dropBefore(cut); d > 0 {
				t.timestamps.Add(-int64(d))
			}
			if e.win.len() == 0 && e.waiters == 0 {
				delete(sh.m, k)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	t.keys.Add(-int64(removed))
	return removed + t.ad.cleanup(now.UnixMilli())
}

// Stats returns the counters and gauges. Each number is read atomically;
// together they are not one consistent cut.
func (t *Throttle) Stats() Stats {
	return Stats{
		Keys:       t.keys.Load(),
		Timestamps: t.timestamps.Load(),
		Waiters:    t.waiters.Load(),
		Admitted:   t.admitted.Load(),
		Refused:    t.refused.Load(),
		Delayed:    t.delayed.Load(),
		Exempt:     t.exempt.Load(),
		Off:        t.off.Load(),
		Since:      t.since,
	}
}

// Keys returns the tracked keys as of now, those with the most waiters
// first, then the fullest, then by peer and type; at most limit of them
// (limit ≤ 0: all).
// Expired timestamps are not counted (nor removed).
func (t *Throttle) Keys(now time.Time, limit int) []KeyView {
	st := t.set.Load()
	ms := now.UnixMilli()
	cut := ms - st.period
	var keys []KeyView
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			capacity, ok := st.typeCap[k.typ]
			if !ok {
				capacity = st.def.cap // a type no rule gives any more
			}
			n := e.win.countFrom(cut)
			v := KeyView{Peer: k.peer, Type: k.typ, Count: n, Capacity: capacity, Waiters: e.waiters}
			if n >= capacity {
				v.EarliestIn = earliest(&e.win, n, capacity, cut, st.period, ms)
			}
			keys = append(keys, v)
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(keys, func(a, b KeyView) int {
		return cmp.Or(
			cmp.Compare(b.Waiters, a.Waiters),
			cmp.Compare(b.Count, a.Count),
			cmp.Compare(a.Peer, b.Peer),
			cmp.Compare(a.Type, b.Type),
		)
	})
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys
}

// Snapshot returns the switch and every key's unexpired timestamps as of
// now, keys sorted by peer and type. It locks one shard at a time, so
// evaluations go on while it runs; each key is copied consistently.
func (t *Throttle) Snapshot(now time.Time) Snapshot {
	ms := now.UnixMilli()
	cut := ms - t.set.Load().period
	s := Snapshot{TakenAt: ms, Enabled: t.Enabled(), Keys: []KeyRecord{}}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			n := e.win.countFrom(cut)
			if n == 0 {
				continue
			}
			r := KeyRecord{Peer: k.peer, Type: k.typ, Timestamps: make([]int64, n)}
			for j, first := 0, e.win.len()-n; j < n; j++ {
				r.Timestamps[j] = e.win.at(first + j)
			}
			s.Keys = append(s.Keys, r)
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(s.Keys, func(a, b KeyRecord) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Type, b.Type))
	})
	s.Adaptive = t.ad.adaptiveJSON()
	return s
}

// Restore replaces every key's timestamps with those of s and sets the
// switch to s.Enabled; waiter counts are kept. Timestamps expired at now
// are dropped. A snapshot taken "after" now (the clock went backwards)
// counts as taken now: every timestamp is shifted back by the difference,
// so no gap is invented. A timestamp later than its snapshot is taken as
// the snapshot's time; empty peers or types are skipped.
func (t *Throttle) Restore(now time.Time, s Snapshot) {
	ms := now.UnixMilli()
	cut := ms - t.set.Load().period
	shift := int64(0)
	if s.TakenAt > ms {
		shift = ms - s.TakenAt
	}
	ceiling := ms
	if s.TakenAt != 0 {
		ceiling = min(ms, s.TakenAt+shift)
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			t.timestamps.Add(-int64(e.win.len()))
			e.win = window{}
			if e.waiters == 0 {
				delete(sh.m, k)
				t.keys.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	for _, r := range s.Keys {
		if r.Peer == "" || r.Type == "" {
			continue
		}
		ts := make([]int64, 0, len(r.Timestamps))
		for _, x := range r.Timestamps {
			x = min(x+shift, ceiling)
			if x >= cut {
				ts = append(ts, x)
			}
		}
		if len(ts) == 0 {
			continue
		}
		slices.Sort(ts)
		k := throttleKey{r.Peer, r.Type}
		sh := t.shard(k)
		sh.mu.Lock()
		e := sh.m[k]
		if e == nil {
			e = &throttleEntry{}
			sh.m[k] = e
			t.keys.Add(1)
		}
		for _, x := range ts {
			e.win.add(x)
		}
		sh.mu.Unlock()
		t.timestamps.Add(int64(len(ts)))
	}
	var as AdaptiveSnapshot
	if len(s.Adaptive) > 0 {
		// A record that does not decode restores nothing of the adaptive
		// state: it is relearned from the next replies.
		_ = json.Unmarshal(s.Adaptive, &as)
	}
	t.ad.restore(ms, as)
	t.enabled.Store(s.Enabled)
}
