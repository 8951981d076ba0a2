package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// strict decides every request atomically in Redis (docs/cluster.md,
// "strict: one script call per decision"): the hybrid decision
// (docs/limiting.md, "The rule") on Redis's state, Redis's clock and the
// group's shared schedule. Concurrent callers' decisions travel as entries
// of one batch script call (transport.doEntry). An admission counts one
// more request of this instance in flight in the (peer, group)'s state
// hash, under this instance's lease: this instance renews the lease of the
// keys it holds requests on every third of the lease, releases them in
// batches off the response's path, and a dead instance's counts drop out
// when its lease ends. It is safe for concurrent use.
type strict struct {
	b *Backend
}

func newStrict(b *Backend) *strict { return &strict{b: b} }

// hybridKeys returns the keys of the hybrid decision for (k, g): its
// tokens (and in-flight counts), its window.
func hybridKeys(k limiter.Key, g *limiter.Group, sc *sharedSched) []string {
	return []string{stableKey(k, g.Name, sufTokens), genKey(k, g.Name, sc, sufHybridWin)}
}

// hybridParams returns the arguments of g's hybrid entries.
func hybridParams(g *limiter.Group, sc *sharedSched) []any {
	params := make([]any, 0, 20)
	params = append(params, sc.args[:]...)
	return append(params, g.CleanupAge(), g.PeerConcurrencyLimit(), g.SlidingWindowLimit, g.SlidingWindowDuration,
		g.LeakyLimit, g.LeakyTickReduction, windowTTL(g, sc), numArg(sc.gen))
}

func (s *strict) admit(ms int64, k limiter.Key, g *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle, error) {
	var h limiter.Handle
	deadline := time.Now().Add(s.b.opts.Timeout)
	sc, err := s.b.sched.forDecision(g, deadline)
	if err != nil {
		return limiter.Outcome{}, limiter.Usage{}, h, err
	}
	if g.Algorithm != algo.Hybrid {
		return s.b.admitAlgo(deadline, ms, k, g, sc)
	}
	keys := hybridKeys(k, g, sc)
	rel := s.b.keeper.take(keys[0])
	p := s.b.sched.params.get(g, sc, hybridParams)
	c := entryCall("h", keys, p)
	c.e.args = append(c.e.args, rel)
	c.e.seq = s.b.keeper.seq.Add(1)
	v, err := s.b.t.wait(deadline, c)
	if err != nil {
		s.b.keeper.untake(keys[0], rel, err)
		return limiter.Outcome{}, limiter.Usage{}, h, err
	}
	var buf [9]int64
	n, err := replyInts(v, buf[:])
	if err == nil && n != 7 {
		err = fmt.Errorf("%w: %d integers from the hybrid decision, want 7", ErrReply, n)
	}
	var out limiter.Outcome
	var u limiter.Usage
	if err == nil {
		out, u, err = hybridOutcome(buf[:7], g, ms)
	}
	if err != nil {
		return out, u, h, s.b.keyFailed(keys, err)
	}
	if out.Allowed() {
		h = s.b.slots.put(slot{group: g.ID, key: keys[0]})
	}
	return out, u, h, nil
}

// hybridOutcome reads the hybrid script's reply {verdict, inflight,
// window, oldest, tokens, now, next_tick} as algo.Step decides it on the
// same state (so that the Retry-After and the usage are computed the one
// way they are written), with the times moved from Redis's clock to ms's.
// A verdict the step does not reach is an error.
func hybridOutcome(r []int64, g *limiter.Group, ms int64) (limiter.Outcome, limiter.Usage, error) {
	pre := algo.Held{Inflight: r[1], Count: r[2], Mark: r[3]}
	now, next := r[5], r[6]
	post := algo.Result{State: algo.State{A: r[4]}, Held: pre}
	algo.Step(g.Algorithm, &post, g.Limits(), now, next)
	out := limiter.OutcomeOf(&post)
	want := [...]limiter.Outcome{
		{Reason: limiter.ReasonConcurrency}, {Reason: limiter.ReasonRateLimit},
		{Via: limiter.ViaSliding}, {Via: limiter.ViaLeaky},
	}
	if r[0] < 0 || r[0] >= int64(len(want)) || want[r[0]].Via != out.Via || want[r[0]].Reason != out.Reason {
		return out, limiter.Usage{}, fmt.Errorf("%w: the script decided %d where the hybrid rule decides %v/%v on %+v, tokens %d", ErrReply, r[0], out.Via, out.Reason, pre, r[4])
	}
	u := limiter.Usage{Tokens: post.State.A, Window: post.Held.Count, ResetAt: ms + next - now}
	if post.Held.Count > 0 {
		u.Oldest = ms + post.Held.Mark - now
	}
	return out, u, nil
}

func (s *strict) release(sl slot) { s.b.keeper.release(sl) }

func (s *strict) reduce(ms int64, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error) {
	deadline := time.Now().Add(s.b.opts.Timeout)
	sc, err := s.b.sched.forDecision(g, deadline)
	if err != nil {
		return limiter.ReduceNoop, err
	}
	if g.Algorithm != algo.Hybrid {
		return s.b.reduceAlgo(deadline, k, g, sc)
	}
	if g.Arweave == limiter.Arweave297 && g.LeakyLimit == 0 {
		return reduceWindow(s.b, deadline, sc, k, g)
	}
	keys := hybridKeys(k, g, sc)
	p := s.b.sched.params.get(g, sc, hybridParams)
	v, err := s.b.t.doEntry(deadline, &entry{op: "H", keys: keys, pkey: p, params: p.packed})
	r, err := reduceReply(v, err)
	if err != nil {
		return r, s.b.keyFailed(keys, err)
	}
	return r, nil
}

// windowTTL is how long a hybrid's window key outlives an admission: the
// window and a second; with arweave.version 2.9.7, whose reduction takes
// the oldest timestamp held even past the window, until the cleanup tick
// that drops it too (one interval more), as the local backend keeps it.
func windowTTL(g *limiter.Group, sc *sharedSched) int64 {
	ttl := g.SlidingWindowDuration + 1000
	if g.Arweave == limiter.Arweave297 {
		ttl += max(sc.Cleanup.Interval, sc.Cleanup.NextInterval)
	}
	return ttl
}

// reduceWindow is the Arweave 2.9.7 reduction of a hybrid group without a
// bucket (docs/arweave297.md, "Cleanup, leaky ticks and reduce"): the
// oldest window timestamp (k, g) holds goes.
func reduceWindow(b *Backend, deadline time.Time, sc *sharedSched, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error) {
	args := make([]any, 0, 8)
	args = append(args, b.clockArg())
	args = append(args, sc.args[6:12]...)
	args = append(args, g.CleanupAge())
	v, err := b.t.do(deadline, scriptReduceW, []string{genKey(k, g.Name, sc, sufHybridWin)}, args)
	return reduceReply(v, err)
}

// reduceShared runs the reduce script on (k, g)'s shared tokens.
func reduceShared(b *Backend, deadline time.Time, sc *sharedSched, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error) {
	args := make([]any, 0, 8)
	args = append(args, b.clockArg())
	args = append(args, sc.args[:6]...)
	args = append(args, g.LeakyTickReduction)
	v, err := b.t.do(deadline, scriptReduce, []string{genKey(k, g.Name, sc, sufHybrid)}, args)
	return reduceReply(v, err)
}

// reduceReply reads a reduce script's reply {1 reduced | 0, now}.
func reduceReply(v any, err error) (limiter.ReduceResult, error) {
	if err != nil {
		return limiter.ReduceNoop, err
	}
	r, err := ints(v)
	if err != nil {
		return limiter.ReduceNoop, err
	}
	if len(r) != 2 {
		return limiter.ReduceNoop, fmt.Errorf("%w: %d integers from the reduce script, want 2", ErrReply, len(r))
	}
	if r[0] == 1 {
		return limiter.Reduced, nil
	}
	return limiter.ReduceNoop, nil
}

func (s *strict) forget(ctx context.Context, k limiter.Key, g *limiter.Group) (bool, error) {
	return forgetShared(ctx, s.b, k, g)
}

// forgetShared deletes (k, g)'s state: every key of its generation (one
// DEL: they share a slot), and the fields of its state strings, whose
// requests in flight keep counting until they are released.
func forgetShared(ctx context.Context, b *Backend, k limiter.Key, g *limiter.Group) (bool, error) {
	deadline, _ := ctx.Deadline()
	sc, err := b.sched.forDecision(g, deadline)
	if err != nil {
		return false, err
	}
	base := baseKey(k, g.Name, sc)
	keys := make([]string, len(algoSuffixes))
	for i, suf := range algoSuffixes {
		keys[i] = base + suf
	}
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	n, err := b.rdb.Del(ctx, keys...).Result()
	if err != nil {
		return false, err
	}
	found := n > 0
	for _, suf := range []string{sufTokens, sufState} {
		v, err := b.t.doEntry(deadline, &entry{op: "f", keys: []string{stableKey(k, g.Name, suf)}})
		r, err2 := ints(v)
		if err == nil {
			err = err2
		}
		if err != nil {
			return found, err
		}
		found = found || len(r) == 1 && r[0] == 1
	}
	return found, nil
}

func (s *strict) probe(ctx context.Context) error {
	base := keyPrefix + canaryTag(s.b.inst)
	sched := schedArgs(limiter.NewSchedule(0, 1000))
	params := append(append(sched[:], sched[:]...), 1000, 1<<30, 1, 1000, 1, 1, 2000, 0)
	keys := []string{base + sufTokens, base + sufHybridWin}
	c := &call{ent: &entry{op: "h", keys: keys, pkey: 1, params: packNums(nil, params), args: []any{0, "probe"}}, keys: keys}
	s.b.t.exec(ctx, []*call{c})
	err := c.err
	if err == nil {
		_, err = ints(c.res)
	}
	if err != nil {
		return fmt.Errorf("the decision script on a canary key: %w", err)
	}
	s.b.t.roundTrips.Add(1)
	s.b.t.commands.Add(1)
	return s.b.rdb.Del(ctx, keys...).Err()
}

// probeScript runs script once on a canary (peer, group) of this instance —
// its hybrid keys and the one named by third — with the clock and two
// schedules of 1 s ticks before tail, and deletes the keys: a script that
// fails there says what is named what.
func (b *Backend) probeScript(ctx context.Context, script *script, third, what string, tail ...any) error {
	base := keyPrefix + canaryTag(b.inst)
	keys := []string{base + sufHybrid, base + sufHybridWin, base + third}
	sched := schedArgs(limiter.NewSchedule(0, 1000))
	args := []any{b.clockArg()}
	args = append(args, sched[:]...)
	args = append(args, sched[:]...)
	args = append(args, tail...)
	v, err := b.t.runOne(ctx, script, keys, args...)
	if err == nil {
		_, err = ints(v)
	}
	if err != nil {
		return fmt.Errorf("%s on a canary key: %w", what, err)
	}
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	return b.rdb.Del(ctx, keys...).Err()
}

// run reloads the shared schedules every second until ctx ends.
func (s *strict) run(ctx context.Context) {
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			s.b.refreshSchedules(ctx)
		}
	}
}

func (s *strict) tracked() int { return 0 }
