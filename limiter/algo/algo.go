// Package algo holds the rate-limiting algorithms a group may choose: the
// Arweave hybrid (docs/limiting.md, "The hybrid decision") and token bucket,
// GCRA, fixed window, sliding log and the estimated sliding window
// (docs/limiting.md, "Other algorithms"), each as pure functions of a (peer,
// group)'s state, the group's limits and the time, behind one dispatch on
// Kind (Step, Reduce, Tick, Idle, Fresh, QuotaOf, PressureAt: decision 230).
//
// A state is two words (State); the hybrid and the sliding log also keep a
// log of timestamps, which stays with the holder of the state (the local
// slab's ring, a Redis sorted set, a replay's slice): a step reads a summary
// of it (Held) and says when to append to it (Result.Append).
//
// Everything is integer arithmetic on Unix milliseconds: a token bucket
// counts tokens in units of 1/P of a token (it refills L units per ms) and a
// GCRA keeps its theoretical arrival time in units of 1/L ms (one emission
// interval T = P/L is P units), so that both are exact, admit the same
// sequences for the same L, P and B, and give the same answers as the integer
// Lua scripts of a Redis backend.
//
// The package imports the standard library only, never reads the clock and
// never allocates on a decision: the local backend of package limiter calls
// it under its shard lock, a cluster backend may run the same functions (or
// their Lua transcriptions) elsewhere.
package algo

import "fmt"

// Kind is a group's algorithm.
type Kind uint8

// The algorithms. The zero Kind is the hybrid.
const (
	Hybrid        Kind = iota // the Arweave hybrid: window, then leaky bucket (docs/limiting.md)
	TokenBucket               // tokens refilled continuously at L/P per ms, capped at B
	GCRA                      // a theoretical arrival time, T = P/L, τ = (B−1)·T
	FixedWindow               // a count per clock-aligned window [k·P, (k+1)·P)
	SlidingLog                // the timestamps of the admissions of the last P ms
	SlidingWindow             // the PSPDFKit/Cloudflare estimate over two fixed windows
	nKinds
)

var kindNames = [nKinds]string{"hybrid", "token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window"}

// String returns k's configuration name.
func (k Kind) String() string {
	if k < nKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Names returns the configuration names of every algorithm, hybrid first.
func Names() []string { return kindNames[:] }

// Parse parses a configuration name.
func Parse(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not one of hybrid, token_bucket, gcra, fixed_window, sliding_log, sliding_window", s)
}

// Valid reports whether k is one of the algorithms.
func (k Kind) Valid() bool { return k < nKinds }

// HasBurst reports whether k takes a burst: the token bucket and GCRA.
func (k Kind) HasBurst() bool { return k == TokenBucket || k == GCRA }

// Scaled reports whether k's State is measured in units made of the
// limits (the token bucket's of P, the GCRA's of L): Rescale converts it
// when they change.
func (k Kind) Scaled() bool { return k == TokenBucket || k == GCRA }

// Measured reports whether k's state, or what a holder caches of it, is
// measured against the limits: the token bucket's and GCRA's units
// (Scaled), the sliding log's gate (the Limit-th newest timestamp). A
// change of limits converts or drops it; for the other kinds only a
// change of algorithm invalidates a state.
func (k Kind) Measured() bool { return k.Scaled() || k == SlidingLog }

// Logged reports whether k keeps a log of timestamps (the hybrid's window,
// the sliding log) rather than a fixed-size State.
func (k Kind) Logged() bool { return k == Hybrid || k == SlidingLog }

// Ticked reports whether k's state also changes on a schedule of ticks
// (the hybrid's leaky ticks, Tick, and its window's cleanup ticks) rather
// than only with the time it is read at.
func (k Kind) Ticked() bool { return k == Hybrid }

// MarshalText returns k's name.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("unknown algorithm %d", k)
	}
	return []byte(k.String()), nil
}

// UnmarshalText parses a name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// Bounds of the limits, chosen so that no product the algorithms form
// (B·P, L·P, a count times P) can overflow an int64.
const (
	// MaxValue bounds limit, period (ms: about 24.8 days) and burst.
	MaxValue = 1<<31 - 1
	// MaxLogLimit bounds the limit of a sliding log: the log is kept per
	// peer, 8 bytes a timestamp, so a peer at the limit holds up to 80 KB.
	MaxLogLimit = 10_000
)

// Params are a group's limits: Limit admissions per Period ms, with a
// burst of Burst (token bucket, GCRA). Make them with Resolve.
type Params struct {
	Limit  int64
	Period int64
	// Burst is the bucket's capacity; Resolve turns the configured 0 into
	// Limit.
	Burst int64
}

// Resolve returns the Params of limit, period and a configured burst (0:
// the limit).
func Resolve(limit, period, burst int64) Params {
	if burst == 0 {
		burst = limit
	}
	return Params{Limit: limit, Period: period, Burst: burst}
}

// Problem returns what is wrong with limit, period and burst for kind k,
// and the key at fault ("" when nothing is): limit and period integers from
// 1 to MaxValue (only checked when k is not the hybrid, which ignores
// them), burst from 0 to MaxValue and 0 for an algorithm without burst, a
// sliding log's limit at most MaxLogLimit.
func Problem(k Kind, limit, period, burst int64) (key, problem string) {
	if !k.Valid() {
		return "algorithm", fmt.Sprintf("unknown algorithm %d", k)
	}
	if burst < 0 || burst > MaxValue {
		return "burst", fmt.Sprintf("must be an integer from 0 (= limit) to %d, got %d", MaxValue, burst)
	}
	if burst != 0 && !k.HasBurst() {
		return "burst", fmt.Sprintf("%s has no burst (only token_bucket and gcra do); remove the key or set it to 0, got %d", k, burst)
	}
	if k == Hybrid {
		return "", ""
	}
	if limit == 0 {
		return "limit", fmt.Sprintf("is required by algorithm %s: an integer from 1 to %d requests per period", k, MaxValue)
	}
	if limit < 1 || limit > MaxValue {
		return "limit", fmt.Sprintf("must be an integer from 1 to %d requests with algorithm %s, got %d", MaxValue, k, limit)
	}
	if period == 0 {
		return "period", fmt.Sprintf("is required by algorithm %s: an integer from 1 to %d ms", k, MaxValue)
	}
	if period < 1 || period > MaxValue {
		return "period", fmt.Sprintf("must be an integer from 1 to %d ms with algorithm %s, got %d", MaxValue, k, period)
	}
	if k == SlidingLog && limit > MaxLogLimit {
		return "limit", fmt.Sprintf("a sliding_log keeps one timestamp per admission per peer: at most %d, got %d (use sliding_window or gcra for larger limits)", MaxLogLimit, limit)
	}
	return "", ""
}

// State is one (peer, group)'s state: two words, whose meaning is the
// algorithm's.
//
//	Hybrid         A: leaky tokens consumed            B: 1 while in the leaky-token register, else 0
//	TokenBucket    A: tokens, in units of 1/P token   B: the last refill, ms
//	GCRA           A: a time Base, ms                 B: TAT − Base, in units of 1/L ms
//	FixedWindow    A: the end of the window, ms       B: its count
//	SlidingWindow  A: the end of the current window   B: its count | the previous one's << 32
//
// The sliding log keeps timestamps instead, and the hybrid its window's,
// in a log held beside the State (Held summarises it). A state never goes
// back in time: a decision at a time before the state's
// own is taken at the state's time.
type State struct{ A, B int64 }

// Fresh returns the state of a (peer, group) seen for the first time at
// now: a full bucket, a TAT at now, empty windows; for the hybrid no
// leaky tokens (outside the register) and for the sliding log nothing (its
// timestamps are its holder's).
func Fresh(k Kind, p Params, now int64) State {
	switch k {
	case TokenBucket:
		return State{A: p.Burst * p.Period, B: now}
	case GCRA:
		return State{A: now}
	}
	return State{}
}

// Decide decides one request on s for a kind whose state is its State
// (the token bucket, GCRA, the fixed and the sliding window), without a
// concurrency limit: Step's rule with Params p. It returns the
// state after (a rejection returns s unchanged), whether the request is
// admitted and, for a rejection, the ms until an admission is possible
// (≥ 1). It panics for the hybrid and the sliding log.
func Decide(k Kind, s State, p Params, now int64) (State, bool, int64) {
	return decides[k](s, p, now)
}

// decides are the rules of the kinds whose state is their State (Step
// and Decide).
var decides = [nKinds]func(State, Params, int64) (State, bool, int64){
	TokenBucket:   decideBucket,
	GCRA:          decideGCRA,
	FixedWindow:   decideFixed,
	SlidingWindow: decideSliding,
}

// Give says what a reduction gives back.
type Give uint8

// The answers of Reduce.
const (
	// GiveNone: nothing to give back.
	GiveNone Give = iota
	// GiveState: the returned State gives one admission back.
	GiveState
	// GiveNewest: the holder of a sliding log drops its newest timestamp
	// that still counts, if it holds one.
	GiveNewest
	// GiveOldest: the holder of the hybrid's window drops its oldest
	// timestamp, expired or not, if it holds one (Limits.ReduceOldest).
	GiveOldest
)

// Reduce gives back one admission of s at now (docs/limiting.md, "Reduce"
// and "Other algorithms"): the hybrid one leaky token, when any was
// consumed; a token of a token bucket (capped at B), T off a GCRA's TAT
// (not below now), one off a window's current count; the sliding log its
// newest timestamp (GiveNewest, the holder's); with Limits.ReduceOldest
// the hybrid its window's oldest (GiveOldest). With GiveNone s is
// returned unchanged.
func Reduce(k Kind, s State, l *Limits, now int64) (State, Give) {
	p := l.Params
	switch k {
	case Hybrid:
		if l.ReduceOldest {
			return s, GiveOldest
		}
		if s.A > 0 {
			return State{A: s.A - 1, B: s.B}, GiveState
		}
	case TokenBucket:
		u, last := bucketAt(s, p, now)
		if cap := p.Burst * p.Period; u < cap {
			return State{A: min(cap, u+p.Period), B: last}, GiveState
		}
	case GCRA:
		if d, t := debt(s, p, now); d > 0 {
			return State{A: t, B: max(0, d-p.Period)}, GiveState
		}
	case FixedWindow:
		if now < s.A && s.B > 0 {
			return State{A: s.A, B: s.B - 1}, GiveState
		}
	case SlidingLog:
		return s, GiveNewest
	case SlidingWindow:
		end, curr, prev := roll(s, p, now)
		if curr > 0 {
			return packSliding(end, curr-1, prev), GiveState
		}
	}
	return s, GiveNone
}

// Idle reports whether s holds no information at now: the hybrid's bucket
// is out of the register, a token bucket is full, the TAT is not after
// now, the windows are empty; a sliding log's State never holds any (its
// timestamps are its holder's). An idle state is what a new (peer, group)
// would have, so its entry may go when its log is empty too.
func Idle(k Kind, s State, p Params, now int64) bool {
	switch k {
	case Hybrid:
		return s.B == 0
	case TokenBucket:
		u, _ := bucketAt(s, p, now)
		return u >= p.Burst*p.Period
	case GCRA:
		d, _ := debt(s, p, now)
		return d == 0
	case FixedWindow:
		return now >= s.A || s.B == 0
	case SlidingWindow:
		_, curr, prev := roll(s, p, now)
		return curr == 0 && prev == 0
	}
	return true
}
