package cluster

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// localFirst decides on this instance's view of each (peer, group) — the
// shared state as last read from Redis, aged on the group's schedule, plus
// this instance's admissions not yet part of it — and pushes its
// admissions every sync interval, one merge script per key, all keys in
// one pipeline, reading the shared state back in the same reply
// (docs/cluster.md, "local_first: local decisions, pushes in batches"). A key
// first seen is read before it is decided (one round trip); a key that made
// max_unsynced admissions on one read is pushed and read again before the next.
// A key Redis reports limited is not refreshed until its limitedUntil (its
// requests are answered by the view, with no round trip, as every request is).
// Groups of the other algorithms are decided strictly (Backend.admitAlgo). It
// is safe for concurrent use.
type localFirst struct {
	b      *Backend
	shards [lfShards]lfShard
	seed   maphash.Seed
	batch  atomic.Uint64
	offset atomic.Int64 // Redis's clock minus this instance's, ms
	lease  int64

	// idle is how long an entry nothing is held for stays after its last
	// use.
	idle int64
}

const lfShards = 64

type lfShard struct {
	mu sync.Mutex
	m  map[lfKey]*lfEntry
	_  [48]byte
}

type lfKey struct {
	k limiter.Key
	g limiter.GroupID
}

// tickN is n bucket admissions at leaky tick index k.
type tickN struct{ k, n int64 }

// pending is admissions not yet in the shared state as read, on Redis's
// clock.
type pending struct {
	ts   []int64 // window admissions
	toks []tickN // bucket admissions, by tick, ascending
}

func (p *pending) count() int {
	n := len(p.ts)
	for _, t := range p.toks {
		n += int(t.n)
	}
	return n
}

func (p *pending) addTok(k int64) {
	if n := len(p.toks); n > 0 && p.toks[n-1].k >= k {
		p.toks[n-1].n++
		return
	}
	p.toks = append(p.toks, tickN{k, 1})
}

// flight is a push on its way: its admissions stay in the view until the
// reply says they are in the shared state.
type flight struct {
	pending
	id uint64
}

// lfEntry is one (peer, group) in this instance, guarded by its shard's
// lock.
type lfEntry struct {
	sh   *lfShard
	g    *limiter.Group // as last used
	base string
	gen  string // the generation of the group's state base names

	// The shared state as last read, on Redis's clock.
	read    bool
	readAt  int64
	tok, tk int64
	wc      int64
	oldest  int64
	soon    []int64 // window timestamps that expire soon after readAt, ascending
	others  int64   // other instances' requests in flight
	until   int64   // limitedUntil (0: not limited)
	untilV  uint64  // the group version until was computed for

	open      int64 // this instance's requests in flight
	openDirty bool
	pend      pending
	fly       []*flight
	used      int64 // local ms
	synced    int64 // local ms of the last read
}

func (e *lfEntry) unsynced() int {
	n := e.pend.count()
	for _, f := range e.fly {
		n += f.count()
	}
	return n
}

func newLocalFirst(b *Backend) *localFirst {
	l := &localFirst{b: b, seed: maphash.MakeSeed(), lease: b.opts.Lease.Milliseconds(), idle: 30_000}
	for i := range l.shards {
		l.shards[i].m = map[lfKey]*lfEntry{}
	}
	return l
}

func (l *localFirst) shardOf(key lfKey) *lfShard {
	return &l.shards[maphash.Comparable(l.seed, key)%lfShards]
}

func (l *localFirst) admit(ms int64, k limiter.Key, g *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle, error) {
	var h limiter.Handle
	deadline := time.Now().Add(l.b.opts.Timeout)
	sc, err := l.b.sched.forDecision(g, deadline)
	if err != nil {
		return limiter.Outcome{}, limiter.Usage{}, h, err
	}
	if g.Algorithm != algo.Hybrid {
		return l.b.admitAlgo(deadline, ms, k, g, sc)
	}
	key := lfKey{k, g.ID}
	sh := l.shardOf(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e != nil && e.gen != sc.gen {
		// The group changed algorithm (and back) since: its state went.
		delete(sh.m, key)
		e = nil
	}
	if e == nil || !e.read || (l.b.opts.MaxUnsynced > 0 && e.unsynced() >= l.b.opts.MaxUnsynced) {
		sh.mu.Unlock()
		if err := l.syncNow(deadline, key, k, g, sc); err != nil {
			return limiter.Outcome{}, limiter.Usage{}, h, err
		}
		sh.mu.Lock()
		if e = sh.m[key]; e == nil || !e.read {
			sh.mu.Unlock()
			return limiter.Outcome{}, limiter.Usage{}, h, fmt.Errorf("%w: the entry read from redis went away", ErrReply)
		}
	}
	e.g, e.used = g, ms
	t := ms + l.offset.Load()
	var post algo.Result
	var next int64
	post.State, post.Held, next = e.view(t, g, sc)
	algo.Step(g.Algorithm, &post, g.Limits(), t, next)
	out := limiter.OutcomeOf(&post)
	switch out.Via {
	case limiter.ViaSliding:
		e.pend.ts = append(e.pend.ts, t)
	case limiter.ViaLeaky:
		e.pend.addTok(sc.Leaky.IndexAt(t))
	}
	if out.Allowed() {
		e.open++
		e.openDirty = true
	}
	sh.mu.Unlock()
	if out.Allowed() {
		h = l.b.slots.put(slot{group: g.ID, lf: e})
	}
	u := limiter.Usage{Tokens: post.State.A, Window: post.Held.Count, ResetAt: ms + next - t}
	if post.Held.Count > 0 {
		u.Oldest = ms + post.Held.Mark - t
	}
	return out, u, h, nil
}

// view returns e's state as this instance sees it at t (Redis's clock):
// the shared state aged to t plus this instance's pushes in flight and
// admissions not pushed; and the group's next leaky tick.
func (e *lfEntry) view(t int64, g *limiter.Group, sc *sharedSched) (algo.State, algo.Held, int64) {
	kt := sc.Leaky.IndexAt(t)
	tok, cur := e.tok, e.tk
	replay := func(recs []tickN) {
		for _, r := range recs {
			if r.k > cur {
				tok = max(0, tok-(r.k-cur)*g.LeakyTickReduction)
				cur = r.k
			}
			tok += r.n
		}
	}
	for _, f := range e.fly {
		replay(f.toks)
	}
	replay(e.pend.toks)
	if kt > cur {
		tok = max(0, tok-(kt-cur)*g.LeakyTickReduction)
	}

	// A timestamp counts while ts + duration > t and the cleanup tick in
	// force has not dropped it.
	lo := max(t-g.SlidingWindowDuration+1, sc.Cleanup.TimeOf(sc.Cleanup.IndexAt(t))-g.CleanupAge())
	w, oldest := e.wc, int64(0)
	for _, ts := range e.soon {
		if ts >= lo {
			oldest = ts
			break
		}
		w--
	}
	if w > 0 && oldest == 0 {
		oldest = max(e.oldest, lo)
	}
	own := func(ts []int64) {
		for _, x := range ts {
			if x >= lo {
				if w == 0 || x < oldest {
					oldest = x
				}
				w++
			}
		}
	}
	for _, f := range e.fly {
		own(f.ts)
	}
	own(e.pend.ts)
	return algo.State{A: tok}, algo.Held{Inflight: e.others + e.open, Count: max(0, w), Mark: oldest}, sc.Leaky.TimeOf(kt + 1)
}

// prepare moves e's pending admissions into a new flight and returns the
// merge call that pushes them. The shard's lock must be held.
func (l *localFirst) prepare(e *lfEntry, g *limiter.Group, sc *sharedSched) (*flight, *call) {
	f := &flight{pending: e.pend, id: l.batch.Add(1)}
	e.pend = pending{}
	e.fly = append(e.fly, f)
	e.openDirty = false
	args := make([]any, 0, 26+2*len(f.toks)+len(f.ts))
	args = append(args, l.b.clockArg())
	args = append(args, sc.args[:]...)
	horizon := 2*l.b.opts.SyncInterval.Milliseconds() + l.b.opts.Timeout.Milliseconds()
	args = append(args, g.CleanupAge(), g.SlidingWindowLimit, g.SlidingWindowDuration, g.LeakyLimit,
		g.LeakyTickReduction, l.b.inst, f.id, e.open, l.lease, horizon, len(f.toks))
	for _, r := range f.toks {
		args = append(args, r.k, r.n)
	}
	args = append(args, len(f.ts))
	for _, ts := range f.ts {
		args = append(args, ts)
	}
	keys := []string{e.base + sufHybrid, e.base + sufHybridWin, e.base + sufCounts}
	return f, &call{s: scriptLFHybrid, keys: keys, args: args}
}

// finish takes a push's reply into e: the flight leaves the view, and the
// shared state read back replaces the one held unless a later read came
// back first. A failed push gives its admissions back to pending (pushed
// again: counting one twice is safer than losing it). The shard's lock
// must be held.
func (l *localFirst) finish(e *lfEntry, f *flight, v any, err error, ver uint64, sent, recv int64) error {
	for i, x := range e.fly {
		if x == f {
			e.fly = append(e.fly[:i], e.fly[i+1:]...)
			break
		}
	}
	var r []int64
	if err == nil {
		r, err = ints(v)
		if err == nil && (len(r) < 9 || int64(len(r)) != 9+r[8]) {
			err = fmt.Errorf("%w: %d integers from the local_first merge script", ErrReply, len(r))
		}
	}
	if err != nil {
		e.pend.ts = append(f.ts, e.pend.ts...)
		e.pend.toks = mergeToks(f.toks, e.pend.toks)
		e.openDirty = true
		if isKeyError(err) {
			// The shared state is corrupt (being repaired): the view held
			// is not decided on any more; the next decision reads it
			// again, and is answered by on_failure until it is repaired.
			e.read = false
		}
		return err
	}
	if now := r[0]; !e.read || now >= e.readAt {
		e.read, e.readAt = true, now
		e.others, e.wc, e.oldest, e.tok, e.tk = r[1], r[2], r[3], r[4], r[5]
		e.until, e.untilV = r[7], ver
		e.soon = append(e.soon[:0], r[9:]...)
		l.offset.Store(now - (sent+recv)/2)
	}
	e.synced = recv
	return nil
}

func mergeToks(a, b []tickN) []tickN {
	out := make([]tickN, 0, len(a)+len(b))
	out = append(out, a...)
	for _, r := range b {
		if n := len(out); n > 0 && out[n-1].k >= r.k {
			out[n-1].n += r.n
		} else {
			out = append(out, r)
		}
	}
	return out
}

// syncNow pushes key's pending admissions and reads its shared state, on
// the request's path (bounded by the timeout), creating the entry first.
func (l *localFirst) syncNow(deadline time.Time, key lfKey, k limiter.Key, g *limiter.Group, sc *sharedSched) error {
	sh := l.shardOf(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e == nil || e.gen != sc.gen {
		e = &lfEntry{sh: sh, g: g, base: baseKey(k, g.Name, sc), gen: sc.gen}
		sh.m[key] = e
	}
	f, c := l.prepare(e, g, sc)
	sh.mu.Unlock()
	sent := l.b.localNow()
	v, err := l.b.t.do(deadline, c.s, c.keys, c.args)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return l.finish(e, f, v, err, g.Version, sent, l.b.localNow())
}

func (l *localFirst) release(s slot) {
	e := s.lf
	e.sh.mu.Lock()
	if e.open > 0 {
		e.open--
		e.openDirty = true
	}
	e.sh.mu.Unlock()
}

func (l *localFirst) reduce(ms int64, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error) {
	if g.Algorithm != algo.Hybrid {
		deadline := time.Now().Add(l.b.opts.Timeout)
		sc, err := l.b.sched.forDecision(g, deadline)
		if err != nil {
			return limiter.ReduceNoop, err
		}
		return l.b.reduceAlgo(deadline, k, g, sc)
	}
	key := lfKey{k, g.ID}
	if g.Arweave == limiter.Arweave297 && g.LeakyLimit == 0 {
		return l.reduceWindow(key, k, g)
	}
	sh := l.shardOf(key)
	sh.mu.Lock()
	if e := sh.m[key]; e != nil {
		// A token not pushed yet is given back here.
		if n := len(e.pend.toks); n > 0 {
			if e.pend.toks[n-1].n--; e.pend.toks[n-1].n == 0 {
				e.pend.toks = e.pend.toks[:n-1]
			}
			sh.mu.Unlock()
			return limiter.Reduced, nil
		}
	}
	sh.mu.Unlock()
	deadline := time.Now().Add(l.b.opts.Timeout)
	sc, err := l.b.sched.forDecision(g, deadline)
	if err != nil {
		return limiter.ReduceNoop, err
	}
	r, err := reduceShared(l.b, deadline, sc, k, g)
	if err == nil && r == limiter.Reduced {
		sh.mu.Lock()
		if e := sh.m[key]; e != nil {
			e.tok = max(0, e.tok-1)
			e.until = 0
		}
		sh.mu.Unlock()
	}
	return r, err
}

// reduceWindow is the Arweave 2.9.7 reduction of a hybrid group without a
// bucket (the strict mode's reduceWindow): this instance's admissions not
// pushed yet are pushed first, so that the oldest timestamp of all goes,
// and the entry is read again after it. A failed read leaves this
// instance's view as a missed sync does, until the next one.
func (l *localFirst) reduceWindow(key lfKey, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error) {
	deadline := time.Now().Add(l.b.opts.Timeout)
	sc, err := l.b.sched.forDecision(g, deadline)
	if err != nil {
		return limiter.ReduceNoop, err
	}
	if err := l.syncNow(deadline, key, k, g, sc); err != nil {
		return limiter.ReduceNoop, err
	}
	r, err := reduceWindow(l.b, deadline, sc, k, g)
	if err == nil && r == limiter.Reduced {
		_ = l.syncNow(time.Now().Add(l.b.opts.Timeout), key, k, g, sc)
	}
	return r, err
}

func (l *localFirst) forget(ctx context.Context, k limiter.Key, g *limiter.Group) (bool, error) {
	key := lfKey{k, g.ID}
	sh := l.shardOf(key)
	sh.mu.Lock()
	_, had := sh.m[key]
	delete(sh.m, key)
	sh.mu.Unlock()
	ok, err := forgetShared(ctx, l.b, k, g)
	return had || ok, err
}

func (l *localFirst) probe(ctx context.Context) error {
	return l.b.probeScript(ctx, scriptLFHybrid, sufCounts, "the local_first merge script",
		1000, 1, 1000, 1, 1, l.b.inst, 0, 0, l.lease, 0, 0, 0)
}

// run pushes every sync interval until ctx ends.
func (l *localFirst) run(ctx context.Context) {
	tick := time.NewTicker(l.b.opts.SyncInterval)
	defer tick.Stop()
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.syncAll(ctx, l.b.localNow())
		case <-refresh.C:
			l.b.refreshSchedules(ctx)
		}
	}
}

type lfJob struct {
	e   *lfEntry
	f   *flight
	c   *call
	ver uint64
}

// syncAll pushes, in pipelines of up to 512 keys, every entry with
// admissions or releases to push, every entry used since its last read
// (unless Redis said it is limited for longer than an interval), and every
// entry holding requests in flight whose lease needs renewing; and drops
// the entries idle long enough. now is this instance's clock, ms.
func (l *localFirst) syncAll(ctx context.Context, now int64) {
	if !l.b.h.up.Load() {
		return
	}
	interval := l.b.opts.SyncInterval.Milliseconds()
	t := now + l.offset.Load()
	var jobs []lfJob
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.open == 0 && len(e.fly) == 0 && e.pend.count() == 0 && now-e.used > l.idle {
				delete(sh.m, key)
				continue
			}
			sc := l.b.sched.tab[e.g.ID].Load()
			if sc == nil || sc.version != e.g.Version || !e.read || l.b.cut.isDown(key.k, e.g.Name) {
				continue
			}
			limited := t+interval < e.until && e.untilV == e.g.Version
			if e.pend.count() > 0 || e.openDirty || (e.used > e.synced && !limited) ||
				(e.open > 0 && now-e.synced >= l.lease/3) {
				f, c := l.prepare(e, e.g, sc)
				jobs = append(jobs, lfJob{e, f, c, e.g.Version})
			}
		}
		sh.mu.Unlock()
	}
	for len(jobs) > 0 {
		n := min(len(jobs), 512)
		calls := make([]*call, n)
		for i := range calls {
			calls[i] = jobs[i].c
		}
		// Off the request path: a generous deadline, so that a busy
		// instance's push is not taken for a Redis that stalled.
		bctx, cancel := context.WithTimeout(ctx, max(l.b.opts.Timeout, 2*l.b.opts.SyncInterval, time.Second))
		sent := l.b.localNow()
		l.b.t.batch(bctx, calls)
		cancel()
		recv := l.b.localNow()
		var failed error
		for _, j := range jobs[:n] {
			j.e.sh.mu.Lock()
			err := l.finish(j.e, j.f, j.c.res, j.c.err, j.ver, sent, recv)
			j.e.sh.mu.Unlock()
			switch {
			case err == nil:
			case l.b.keyScoped(err):
				// one key's failure, or its master's (decision 236):
				// counted and logged, not the whole breaker's
				l.b.fail(j.c.keys[0], err, fmt.Errorf("pushing local_first admissions: %w", err))
			case failed == nil:
				failed = err
			}
		}
		if failed != nil {
			l.b.h.fail(classify(failed), fmt.Errorf("pushing local_first admissions: %w", failed))
		}
		jobs = jobs[n:]
	}
}

func (l *localFirst) tracked() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
