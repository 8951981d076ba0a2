package cluster

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// The algorithms other than the hybrid (docs/limiting.md, "Other
// algorithms"), decided in Redis one
// script call each, in both modes (local_first batches the hybrid only):
// lua/algo.lua for the four of a fixed-size state (token_bucket, gcra,
// fixed_window, sliding_window), lua/slog.lua for the sliding log. The
// scripts transcribe package algo's integer step functions and return the
// state before the decision; the decision's outcome and usage are then
// computed here by algo.Decide itself on that state, so that both backends
// share one formulation (a verdict the step function does not reach is an
// error, never an admission). A state measured in other limits (a live
// edit of limit, period or burst) is rescaled here with algo.Rescale and
// written back by a second call that checks it is still the one read.

// maxExact bounds the products the scripts form (burst·period for the
// token bucket and GCRA, limit·period for the sliding window): Lua
// computes in doubles, exact up to 2⁵³.
const maxExact = 1 << 53

// CheckLimits returns an error, wrapping ErrLimits and naming the group and
// its keys, when a group's limits are too large for the scripts to compute
// exactly: burst × period (token_bucket, gcra) or limit × period
// (sliding_window) over 2⁵³. The daemon refuses such a config in cluster
// mode; a decision meeting one (a live edit) is answered as on_failure
// says, and counted.
func CheckLimits(name string, s *limiter.GroupSettings) error {
	p := s.Params()
	switch s.Algorithm {
	case algo.TokenBucket, algo.GCRA:
		if p.Burst > maxExact/p.Period {
			return fmt.Errorf("http_api.limiter.%s: burst × period = %d × %d is over 2⁵³, more than cluster mode's scripts compute exactly: %w", name, p.Burst, p.Period, ErrLimits)
		}
	case algo.SlidingWindow:
		if p.Limit > maxExact/p.Period {
			return fmt.Errorf("http_api.limiter.%s: limit × period = %d × %d is over 2⁵³, more than cluster mode's scripts compute exactly: %w", name, p.Limit, p.Period, ErrLimits)
		}
	}
	return nil
}

// Verdicts of the algorithm scripts.
const (
	verdictConcurrency = 0
	verdictRateLimit   = 1
	verdictAdmitted    = 4
	verdictReduced     = 5
	verdictNothing     = 6
	verdictRescale     = 9
)

// packSliding is algo's layout of a sliding window's counts in State.B:
// the current window's count | the previous one's << 32.
func packSliding(curr, prev int64) int64 {
	return int64(uint64(uint32(curr)) | uint64(uint32(prev))<<32)
}

func unpackSliding(b int64) (curr, prev int64) {
	return int64(uint32(b)), int64(uint32(uint64(b) >> 32))
}

// algoKeys returns the keys of (k, g)'s algorithm entry: its state (with
// the in-flight counts), and for the sliding log its log then its counts.
func algoKeys(k limiter.Key, g *limiter.Group, sc *sharedSched) []string {
	if g.Algorithm == algo.SlidingLog {
		return []string{genKey(k, g.Name, sc, sufLog), stableKey(k, g.Name, sufLogCounts)}
	}
	return []string{stableKey(k, g.Name, sufState)}
}

// countsKey is the key of algoKeys holding the in-flight counts.
func countsKey(keys []string) string { return keys[len(keys)-1] }

// algoParams returns the arguments g's algorithm entries share.
func algoParams(g *limiter.Group, sc *sharedSched) []any {
	p := g.Params()
	if g.Algorithm == algo.SlidingLog {
		return []any{p.Limit, p.Period, g.PeerConcurrencyLimit()}
	}
	return []any{int(g.Algorithm), p.Limit, p.Period, p.Burst, g.PeerConcurrencyLimit(), numArg(sc.gen)}
}

// algoCall runs a decision (decide) or a manual reduction of g's
// algorithm on (k, g), whose keys are keys (algoKeys), as an entry of the
// decision batch, rescaling a state measured in other limits (one more
// entry), and returns its reply in buf.
func (b *Backend) algoCall(deadline time.Time, decide bool, keys []string, g *limiter.Group, sc *sharedSched, buf *[9]int64) ([]int64, error) {
	if err := CheckLimits(g.Name, &g.GroupSettings); err != nil {
		return nil, err
	}
	p := g.Params()
	rel := 0
	if decide {
		rel = b.keeper.take(countsKey(keys))
	}
	ep := b.sched.params.get(g, sc, algoParams)
	op, member := "A", false
	switch {
	case g.Algorithm == algo.SlidingLog && decide:
		op, member = "l", true
	case g.Algorithm == algo.SlidingLog:
		op = "L"
	case decide:
		op = "a"
	}
	var rescaled []any // the rescaled state's arguments, on a second attempt
	for attempt := 0; ; attempt++ {
		c := entryCall(op, keys, ep)
		switch {
		case g.Algorithm == algo.SlidingLog:
			c.e.args = append(c.e.args, rel)
			if member {
				c.e.seq = b.keeper.seq.Add(1)
			}
		case rescaled != nil:
			c.e.args = append(c.e.args, rescaled...)
		default:
			c.e.args = append(c.e.args, rel, 0)
		}
		v, err := b.t.wait(deadline, c)
		if err != nil {
			if attempt == 0 {
				b.keeper.untake(countsKey(keys), rel, err)
			}
			return nil, err
		}
		n, err := replyInts(v, buf[:])
		r := buf[:n]
		want := 6
		if g.Algorithm == algo.SlidingLog {
			want = 5
		} else if len(r) > 0 && r[0] == verdictRescale {
			want = 9
		}
		if err == nil && len(r) != want {
			err = fmt.Errorf("%w: %d integers from the %s entry, want %d", ErrReply, len(r), g.Algorithm, want)
		}
		if err != nil {
			return nil, b.keyFailed(keys, err)
		}
		if r[0] != verdictRescale {
			return r, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("%w: the %s state of %s changed limits twice in a row", ErrReply, g.Algorithm, g.Name)
		}
		// r: {9, 0, A, B, C, now, l, p, u}: rescale to the group's limits
		// and have the script check it replaces the state it read.
		from := algo.Params{Limit: r[6], Period: r[7], Burst: r[8]}
		s := algo.Rescale(g.Algorithm, stateOf(g.Algorithm, r[2], r[3], r[4]), from, p)
		A, B, C := s.A, s.B, int64(0)
		if g.Algorithm == algo.SlidingWindow {
			B, C = unpackSliding(s.B)
		}
		rescaled = []any{0, 1, r[2], r[3], r[4], r[6], r[7], r[8], A, B, C}
	}
}

// stateOf is the algo.State of a script's A, B, C.
func stateOf(k algo.Kind, a, b, c int64) algo.State {
	if k == algo.SlidingWindow {
		return algo.State{A: a, B: packSliding(b, c)}
	}
	return algo.State{A: a, B: b}
}

// admitAlgo decides one request of a group whose algorithm is not the
// hybrid, as the local backend does (limiter's admitAlgo): concurrency
// first, then algo.Decide; the usage is the state after (before, for a
// rejection), its times moved to ms's clock.
func (b *Backend) admitAlgo(deadline time.Time, ms int64, k limiter.Key, g *limiter.Group, sc *sharedSched) (limiter.Outcome, limiter.Usage, limiter.Handle, error) {
	var h limiter.Handle
	keys := algoKeys(k, g, sc)
	var buf [9]int64
	r, err := b.algoCall(deadline, true, keys, g, sc, &buf)
	if err != nil {
		return limiter.Outcome{}, limiter.Usage{}, h, err
	}
	var out limiter.Outcome
	var u limiter.Usage
	if g.Algorithm == algo.SlidingLog {
		out, u, err = slogOutcome(r, g, ms)
	} else {
		out, u, err = algoOutcome(r, g, ms)
	}
	if err != nil {
		return out, u, h, b.keyFailed(keys, err)
	}
	if out.Allowed() {
		h = b.slots.put(slot{group: g.ID, key: countsKey(keys)})
	}
	return out, u, h, nil
}

// algoOutcome reads algo.lua's {verdict, inflight, A, B, C, now} as
// algo.Decide decides on that state.
func algoOutcome(r []int64, g *limiter.Group, ms int64) (limiter.Outcome, limiter.Usage, error) {
	now := r[5]
	s := stateOf(g.Algorithm, r[2], r[3], r[4])
	shift := func(s algo.State) limiter.Usage {
		s = algo.Shift(g.Algorithm, s, ms-now)
		return limiter.Usage{Tokens: s.A, Window: s.B}
	}
	if r[0] == verdictConcurrency {
		return limiter.Outcome{Reason: limiter.ReasonConcurrency, RetryAfter: 1}, shift(s), nil
	}
	ns, admitted, wait := algo.Decide(g.Algorithm, s, g.Params(), now)
	if admitted != (r[0] == verdictAdmitted) || (r[0] != verdictAdmitted && r[0] != verdictRateLimit) {
		return limiter.Outcome{}, limiter.Usage{}, fmt.Errorf("%w: the script decided %d where %s decides admitted=%v on %+v", ErrReply, r[0], g.Algorithm, admitted, s)
	}
	if !admitted {
		return limiter.Outcome{Reason: limiter.ReasonRateLimit, RetryAfter: retrySeconds(wait)}, shift(s), nil
	}
	return limiter.Outcome{Via: limiter.ViaAlgorithm}, shift(ns), nil
}

// slogOutcome reads slog.lua's {verdict, inflight, count, gate, now}: the
// timestamps counted before the decision and the one that must expire
// before an admission.
func slogOutcome(r []int64, g *limiter.Group, ms int64) (limiter.Outcome, limiter.Usage, error) {
	count, gate, now := r[2], r[3], r[4]
	p := g.Params()
	u := limiter.Usage{Window: count}
	if count >= p.Limit {
		u.Oldest = gate + ms - now
	}
	switch r[0] {
	case verdictConcurrency:
		return limiter.Outcome{Reason: limiter.ReasonConcurrency, RetryAfter: 1}, u, nil
	case verdictRateLimit:
		if count < p.Limit {
			break
		}
		return limiter.Outcome{Reason: limiter.ReasonRateLimit, RetryAfter: retrySeconds(gate + p.Period - now)}, u, nil
	case verdictAdmitted:
		if count+1 > p.Limit {
			break
		}
		// The admission's timestamp counts now, and the gate is the new
		// log's.
		u = limiter.Usage{Window: count + 1}
		if count+1 >= p.Limit {
			u.Oldest = gate + ms - now
		}
		return limiter.Outcome{Via: limiter.ViaAlgorithm}, u, nil
	}
	return limiter.Outcome{}, limiter.Usage{}, fmt.Errorf("%w: the sliding log script decided %d on %d timestamps (limit %d)", ErrReply, r[0], count, p.Limit)
}

// retrySeconds is the Retry-After of a wait in ms: whole seconds rounded
// up, at least 1.
func retrySeconds(ms int64) int64 { return max(1, (ms+999)/1000) }

// reduceAlgo gives back one admission of (k, g) in Redis (algo.Reduce;
// the sliding log's newest timestamp that counts).
func (b *Backend) reduceAlgo(deadline time.Time, k limiter.Key, g *limiter.Group, sc *sharedSched) (limiter.ReduceResult, error) {
	var buf [9]int64
	r, err := b.algoCall(deadline, false, algoKeys(k, g, sc), g, sc, &buf)
	if err != nil {
		return limiter.ReduceNoop, err
	}
	switch r[0] {
	case verdictReduced:
		return limiter.Reduced, nil
	case verdictNothing:
		return limiter.ReduceNoop, nil
	}
	return limiter.ReduceNoop, fmt.Errorf("%w: the %s script answered %d to a reduction", ErrReply, g.Algorithm, r[0])
}
