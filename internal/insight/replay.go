package insight

import (
	"fmt"
	"math"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// ReplayState is one (peer, group)'s state during a replay, in the terms of
// the algorithm replayed: a few numbers, and a log of timestamps for the
// algorithms that keep one. A new (peer, group) starts from the zero
// value. N[0] and N[1] hold the algo.State's words; for the hybrid N[2] is
// the index of the last leaky tick applied, N[3] the time of the next, N[4]
// the time of the next cleanup tick. Log holds the log's timestamps,
// sorted.
type ReplayState struct {
	// Seen is false until the first request of the (peer, group).
	Seen bool
	N    [5]int64
	Log  []int64
}

// Stepper decides recorded requests again under other settings: the pure
// step of a group's algorithm (algo.Step), one (peer, group) at a time,
// its requests in order. A Stepper holds settings only; the state is the
// caller's.
type Stepper interface {
	// Step decides a request of the (peer, group) whose state is st at ms
	// (Unix milliseconds), as if it were released at once, updates st, and
	// reports whether the request would be rejected.
	Step(st *ReplayState, ms int64) (rejected bool)
}

// ReplaySettings is what a Stepper decides with: the group's settings
// (Settings.Algorithm its algorithm) and its tick schedules.
type ReplaySettings struct {
	Settings limiter.GroupSettings
	// Leaky and Cleanup place the hybrid's ticks.
	Leaky, Cleanup limiter.Schedule
}

// NewStepper returns the Stepper of s's algorithm: algo.Step on the
// settings' Limits, with the hybrid's ticks on its schedules.
func NewStepper(s ReplaySettings) (Stepper, error) {
	k := s.Settings.Algorithm
	if !k.Valid() {
		return nil, fmt.Errorf("replay: unknown algorithm %d", k)
	}
	p := s.Settings.Params()
	if key, problem := algo.Problem(k, p.Limit, p.Period, s.Settings.Burst); key != "" {
		return nil, fmt.Errorf("replay: %s %s", key, problem)
	}
	st := &stepper{k: k, l: s.Settings.Limits(), leaky: s.Leaky, cleanup: s.Cleanup, expiry: s.Settings.CleanupExpiry}
	// Every request is replayed as if released at once.
	st.l.Concurrency = math.MaxInt64
	if k.Ticked() {
		if s.Leaky.Interval <= 0 || s.Cleanup.Interval <= 0 {
			return nil, fmt.Errorf("replay: the hybrid needs its tick schedules")
		}
		st.ticked = true
	}
	return st, nil
}

// stepper replays one algorithm with algo.Step, as the local backend
// decides: the State in N[0] and N[1], the log in Log, and for the hybrid
// its leaky and cleanup ticks applied between the requests.
type stepper struct {
	k              algo.Kind
	l              algo.Limits
	ticked         bool
	leaky, cleanup limiter.Schedule
	expiry         int64
}

// windowSlack keeps expired log timestamps this long before dropping
// them, for requests decided a little out of order.
const windowSlack = 1000

// Step decides one request as Admit would (algo.Step after the ticks
// due), released at once.
func (a *stepper) Step(st *ReplayState, ms int64) bool {
	if !st.Seen {
		s := algo.Fresh(a.k, a.l.Params, ms)
		st.Seen, st.N[0], st.N[1] = true, s.A, s.B
		if a.ticked {
			lk := a.leaky.IndexAt(ms)
			st.N[2], st.N[3], st.N[4] = lk, a.leaky.TimeOf(lk+1), a.cleanup.TimeOf(a.cleanup.IndexAt(ms)+1)
		}
	}
	s := algo.State{A: st.N[0], B: st.N[1]}
	if a.ticked {
		// A tick passed since the last request: apply it (the division
		// only then, not at every request).
		if ms >= st.N[3] {
			lk := a.leaky.IndexAt(ms)
			s, _ = algo.Tick(a.k, s, &a.l, lk-st.N[2])
			st.N[2], st.N[3] = lk, a.leaky.TimeOf(lk+1)
		}
		if ms >= st.N[4] {
			ck := a.cleanup.IndexAt(ms)
			st.Log = dropBefore(st.Log, a.cleanup.TimeOf(ck)-a.expiry)
			st.N[4] = a.cleanup.TimeOf(ck + 1)
		}
	}
	r := algo.Result{State: s, Held: algo.HeldOf(a.k, &a.l, st.Log, ms)}
	algo.Step(a.k, &r, &a.l, ms, st.N[3])
	st.N[0], st.N[1] = r.State.A, r.State.B
	if r.Append {
		st.Log = insertSorted(dropBefore(st.Log, ms-a.l.Span(a.k)+1-windowSlack), ms)
	}
	return r.Via == algo.ViaNone
}

// dropBefore removes the timestamps < cut from the front of sorted log.
func dropBefore(log []int64, cut int64) []int64 {
	i := 0
	for i < len(log) && log[i] < cut {
		i++
	}
	if i == 0 {
		return log
	}
	if i == len(log) {
		return log[:0]
	}
	// Move the rest to the front, so that the array does not creep.
	return log[:copy(log, log[i:])]
}

func insertSorted(log []int64, t int64) []int64 {
	log = append(log, t)
	for i := len(log) - 1; i > 0 && log[i-1] > t; i-- {
		log[i], log[i-1] = log[i-1], log[i]
	}
	return log
}

// ReplayResult is what Replay found: the requests it replayed and how many
// each Stepper would have rejected. Counts are scaled to every peer when
// the log held a sample (Shift > 0): a logged request stands for 2^Shift.
type ReplayResult struct {
	// From and To are the times of the first and last request replayed.
	From, To time.Time
	// Logged is how many logged requests were replayed.
	Logged int
	// Requests is Logged scaled to every peer.
	Requests int64
	// Observed is the rejections the limiter made of them, scaled.
	Observed int64
	// Concurrency is the part of Observed rejected by concurrency or shed
	// by the adaptive limit: the log holds arrivals, not how long each
	// request stayed in flight, so a replay keeps these rejected (and
	// changes nothing for them) and decides every other request as if
	// released at once.
	Concurrency int64
	// Rejected is, per Stepper, the rejections of the replay, scaled.
	Rejected []int64
	// Shift says the log held one (peer, group) in 2^Shift.
	Shift uint8
	// Short is true when the log does not reach back to the time asked
	// (it was overwritten: RequestLogSize requests are kept).
	Short bool
	// Since is how far back the record reaches: the time asked, or later
	// when the log began to record since (limiterd started: Started is
	// then true) or had overwritten what came before (Short).
	Since   time.Time
	Started bool
}

// Replay runs every request of group g logged since through each Stepper,
// one (peer, group) at a time in the order they were decided, and counts
// what each would have rejected. It runs on the caller's goroutine: one
// core, so that a what-if never takes both cores of a small node from its
// data plane (measured: 75–90 ms for 1 000 000 requests and two Steppers,
// docs/benchmarks.md).
func (l *RequestLog) Replay(g limiter.GroupID, since time.Time, steppers []Stepper) ReplayResult {
	recs, shift, short, oldest := l.collect(g, since.UnixMilli(), nil)
	k := len(steppers)
	res := ReplayResult{Logged: len(recs), Rejected: make([]int64, k), Shift: shift, Short: short, Since: since}
	switch {
	case short:
		res.Since = time.UnixMilli(oldest)
	case l.start.After(since):
		res.Since, res.Started = l.start, true
	}
	if len(recs) == 0 {
		return res
	}
	first, last := recs[0].ms, recs[0].ms
	var idx idTable
	states := make([]ReplayState, 0, (len(recs)/64+16)*k)
	for _, r := range recs {
		first, last = min(first, r.ms), max(last, r.ms)
		i, ok := idx.get(r.id, int32(len(states)/max(k, 1)))
		if !ok {
			for range k {
				states = append(states, ReplayState{})
			}
		}
		if r.reason != limiter.ReasonNone {
			res.Observed++
		}
		if r.reason == limiter.ReasonConcurrency || r.reason == limiter.ReasonAdaptive {
			res.Concurrency++
			for j := range res.Rejected {
				res.Rejected[j]++
			}
			continue
		}
		st := states[int(i)*k:]
		for j, s := range steppers {
			if s.Step(&st[j], r.ms) {
				res.Rejected[j]++
			}
		}
	}
	scale := int64(1) << shift
	res.Requests = int64(len(recs)) * scale
	res.Observed *= scale
	res.Concurrency *= scale
	for j := range res.Rejected {
		res.Rejected[j] *= scale
	}
	res.From, res.To = time.UnixMilli(first), time.UnixMilli(last)
	return res
}

// CurrentReplaySettings returns what group g of lim decides with at now,
// for NewStepper: its settings, and tick schedules through its next ticks
// at its current intervals. ok is false for an unknown group.
func CurrentReplaySettings(lim *limiter.Limiter, g limiter.GroupID, now time.Time) (ReplaySettings, bool) {
	s, ok := lim.Settings(g)
	if !ok || g == limiter.LocalPeers {
		return ReplaySettings{}, false
	}
	leaky, cleanup := lim.NextTicks(g, now)
	return ReplaySettings{
		Settings: s,
		Leaky:    limiter.NewSchedule(leaky.UnixMilli(), s.LeakyTickInterval),
		Cleanup:  limiter.NewSchedule(cleanup.UnixMilli(), s.CleanupInterval),
	}, true
}

// idTable numbers the (peer, group) ids of a replay: an open-addressing
// table (the ids are hashes already), several times faster than a map for
// the one lookup every replayed request makes. The zero value is empty.
type idTable struct {
	keys []uint64 // 0: free (an id of 0 is stored as idZero)
	vals []int32
	n    int
}

// idZero stands for the id 0 in the table.
const idZero = ^uint64(0)

// get returns the number of id, or gives it next (ok false) when new.
func (t *idTable) get(id uint64, next int32) (int32, bool) {
	if id == 0 {
		id = idZero
	}
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := uint64(len(t.keys) - 1)
	for i := id & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case id:
			return t.vals[i], true
		case 0:
			t.keys[i], t.vals[i] = id, next
			t.n++
			return next, false
		}
	}
}

func (t *idTable) grow() {
	keys, vals := t.keys, t.vals
	size := max(1024, 2*len(keys))
	t.keys, t.vals = make([]uint64, size), make([]int32, size)
	mask := uint64(size - 1)
	for j, k := range keys {
		if k == 0 {
			continue
		}
		i := k & mask
		for t.keys[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i], t.vals[i] = k, vals[j]
	}
}
