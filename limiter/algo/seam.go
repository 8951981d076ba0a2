package algo

import "math"

// Limits are everything a kind decides with: its Params (the token bucket,
// GCRA, the windows and the sliding log), the peer's concurrency limit
// (every kind), and the hybrid's keys. A group builds them once, with its
// settings.
type Limits struct {
	Params
	// Concurrency is the most requests of one peer in flight at once.
	Concurrency int64
	// The hybrid's (docs/limiting.md, "The hybrid decision"):
	// sliding_window_limit and sliding_window_duration (ms), leaky_limit,
	// leaky_tick_reduction and leaky_tick_interval (ms).
	WindowLimit, WindowDuration int64
	LeakyLimit, LeakyReduction  int64
	LeakyInterval               int64
	// ReduceOldest makes a reduction of the hybrid drop the oldest window
	// timestamp held, expired or not (Arweave 2.9.7 without a bucket:
	// docs/arweave297.md), instead of giving a token back.
	ReduceOldest bool
}

// Held is what the holder of a (peer, group)'s state reads for a step
// besides its State: the requests in flight and, for the kinds that keep
// a log (Kind.Logged), a summary of the log at the step's time.
type Held struct {
	// Inflight is the requests admitted and not yet released.
	Inflight int64
	// Count is the log's timestamps that count at the step's time: the
	// hybrid's those t with t + WindowDuration > now, the sliding log's
	// those with t + Period > now.
	Count int64
	// Mark is, for the hybrid, the oldest of them (when Count > 0); for the
	// sliding log the (Count − Limit)-th oldest of them, 0-based, which must
	// expire before the next admission (when Count ≥ Limit).
	Mark int64
}

// Via says how a step admitted a request.
type Via uint8

// The ways a step admits.
const (
	ViaNone      Via = iota // rejected
	ViaWindow               // the hybrid's sliding window: Result.Append
	ViaBucket               // the hybrid's leaky bucket: a token taken
	ViaAlgorithm            // the other kinds (the sliding log with Result.Append)
)

// Result is what Step decided.
type Result struct {
	// State is the state after the step; a rejection returns it unchanged.
	State State
	// Held is the summary after the step: Inflight and Count one more on an
	// admission (counting the appended timestamp), the hybrid's Mark
	// updated. A sliding log's Mark after an append is its holder's to read.
	Held Held
	// Via is how the request was admitted, ViaNone when it was not.
	Via Via
	// Concurrency is true when the peer's requests in flight rejected it.
	Concurrency bool
	// Append is true when the holder must add the step's time to its log.
	Append bool
	// Wait is, for a rejection, the ms until an admission may be possible
	// (the Retry-After is made of it: whole seconds rounded up, at least 1).
	Wait int64
}

// Step decides one request of a (peer, group) whose state is r.State and
// whose log and requests in flight r.Held summarises (what its holder
// read; r's other fields zero), at now, with the hybrid's next leaky tick
// at next (the other kinds ignore it), and leaves the decision in r. The
// concurrency limit first, for every kind, then the kind's rule:
//
//	Hybrid       the window while it has room (Append), else a leaky token,
//	             else rate_limit: Wait until the sooner of the next leaky
//	             tick and the oldest timestamp's expiry
//	SlidingLog   while fewer than Limit timestamps count (Append), else
//	             Wait until Mark expires
//	the others   their State (docs/limiting.md, "Other algorithms"): Wait
//	             until the bucket holds a token, tat − τ − now, the
//	             window's end, or the estimate's limitedUntil
//
// A rejection leaves State and Held as they were. Step is pure: no clock,
// no lock, no allocation.
func Step(k Kind, r *Result, l *Limits, now, next int64) {
	h := &r.Held
	if h.Inflight+1 > l.Concurrency {
		r.Concurrency, r.Wait = true, 1
		return
	}
	switch k {
	case Hybrid:
		// docs/limiting.md, "The hybrid decision":
		//
		//	window + 1 > sliding_window_limit:
		//	    tokens + 1 > leaky_limit         → reject (rate_limit)
		//	    else tokens += 1                 → allow via leaky_bucket
		//	else window += [now]                 → allow via sliding_window
		if h.Count+1 <= l.WindowLimit {
			if h.Count == 0 || now < h.Mark {
				h.Mark = now
			}
			h.Count++
			r.Via, r.Append = ViaWindow, true
		} else if r.State.A+1 <= l.LeakyLimit {
			r.State = State{A: r.State.A + 1, B: 1}
			r.Via = ViaBucket
		} else {
			r.Wait = hybridWait(h, l, now, next)
			return
		}
	case SlidingLog:
		if h.Count+1 > l.Limit {
			r.Wait = h.Mark + l.Period - now
			return
		}
		h.Count++
		r.Via, r.Append = ViaAlgorithm, true
	default:
		s, ok, wait := decides[k](r.State, l.Params, now)
		if !ok {
			r.Wait = wait
			return
		}
		r.State, r.Via = s, ViaAlgorithm
	}
	h.Inflight++
}

// hybridWait is the wait of a rate_limit rejection: the sooner of the next
// leaky tick (when the bucket can take tokens at all) and the expiry of the
// oldest window timestamp (when the window admits at all).
func hybridWait(h *Held, l *Limits, now, next int64) int64 {
	wait := int64(math.MaxInt64)
	if l.LeakyLimit > 0 {
		wait = next - now
	}
	if l.WindowLimit > 0 && h.Count > 0 {
		wait = min(wait, h.Mark+l.WindowDuration-now)
	}
	if wait == math.MaxInt64 {
		wait = next - now
	}
	return wait
}

// Ticked is what Tick did.
type Ticked struct {
	// Reducing is how many ticks reduced the bucket (those before it left
	// the register); Taken the tokens they took away.
	Reducing, Taken int64
	// Left is true when a tick found the bucket at 0 and took it out of the
	// register.
	Left bool
}

// Tick applies n ≥ 0 ticks of the kind's schedule to s: the hybrid's leaky
// ticks (docs/limiting.md, "The hybrid decision"), each taking
// LeakyReduction tokens away, floored at 0, a tick that finds the bucket
// at 0 taking it out of the register. The other kinds have no ticks (their
// states age with the time they are read at): s is returned as is.
func Tick(k Kind, s State, l *Limits, n int64) (State, Ticked) {
	if k != Hybrid || n <= 0 || s.B == 0 {
		return s, Ticked{}
	}
	r := l.LeakyReduction
	// m ticks drain the bucket, the next one takes it out.
	if m := (s.A + r - 1) / r; n > m {
		return State{}, Ticked{Reducing: m, Taken: s.A, Left: true}
	}
	left := max(0, s.A-n*r)
	return State{A: left, B: 1}, Ticked{Reducing: n, Taken: s.A - left}
}

// Span returns how long a timestamp of k's log counts, in ms: the hybrid's
// WindowDuration, the sliding log's Period; 0 for a kind without a log.
// A timestamp t counts at now while t + Span > now.
func (l *Limits) Span(k Kind) int64 {
	switch k {
	case Hybrid:
		return l.WindowDuration
	case SlidingLog:
		return l.Period
	}
	return 0
}

// HeldOf summarises a log of k held as a sorted slice, at now: how many of
// its timestamps count and its Mark (see Held); Inflight is left 0.
func HeldOf(k Kind, l *Limits, log []int64, now int64) Held {
	cut := now - l.Span(k) + 1
	i := 0
	for i < len(log) && log[i] < cut {
		i++
	}
	h := Held{Count: int64(len(log) - i)}
	switch {
	case h.Count == 0:
	case k == Hybrid:
		h.Mark = log[i]
	case k == SlidingLog && h.Count >= l.Limit:
		h.Mark = log[int64(len(log))-l.Limit]
	}
	return h
}
