package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of the cluster backend.
var (
	// ErrTimeout: Redis did not answer within cluster.timeout.
	ErrTimeout = errors.New("redis did not answer within cluster.timeout")
	// ErrBusy: the calls waiting for Redis are at their cap; the call was
	// not sent.
	ErrBusy = errors.New("too many calls waiting for redis")
	// ErrReply: Redis answered something the script cannot have returned.
	ErrReply = errors.New("unexpected reply from redis")
)

// Kinds of failure, the values of the kind label of
// limiterd_cluster_redis_errors_total.
const (
	KindTimeout    = "timeout"    // no answer in time (a stalled or overloaded Redis)
	KindBusy       = "busy"       // too many calls waiting: not sent
	KindConnection = "connection" // refused, reset, unreachable
	KindAuth       = "auth"       // NOAUTH, WRONGPASS, NOPERM
	KindScript     = "script"     // the script failed: CROSSSLOT, NOSCRIPT after loading, a Lua error
	KindMemory     = "memory"     // OOM: maxmemory reached under noeviction
	KindEvicted    = "evicted"    // Redis evicted keys: limiter state may be lost
	KindReadOnly   = "readonly"   // a replica, or a server loading its data
	KindKey        = "key"        // WRONGTYPE: a key of another application in the ld: namespace
	KindReply      = "reply"      // a reply the script cannot have given
	KindLimits     = "limits"     // a group's limits beyond what the scripts compute exactly
)

// Kinds lists every kind of failure, for metrics.
var Kinds = []string{KindTimeout, KindBusy, KindConnection, KindAuth, KindScript, KindMemory, KindEvicted, KindReadOnly, KindKey, KindReply, KindLimits}

const numKinds = 11

// ErrLimits: a group's limits are too large for the scripts to compute
// exactly in Lua's doubles (burst × period, or limit × period, over 2⁵³).
var ErrLimits = errors.New("limits too large for cluster mode")

// classify returns the kind of a failed call's error.
func classify(err error) string {
	var re redis.Error
	switch {
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return KindTimeout
	case errors.Is(err, ErrBusy):
		return KindBusy
	case errors.Is(err, ErrReply):
		return KindReply
	case errors.Is(err, ErrLimits):
		return KindLimits
	case errors.As(err, &re):
		msg := re.Error()
		switch {
		case hasPrefix(msg, "NOAUTH", "WRONGPASS", "NOPERM"), strings.Contains(msg, "AUTH"):
			return KindAuth
		case hasPrefix(msg, "OOM"):
			return KindMemory
		case hasPrefix(msg, "READONLY", "LOADING", "MASTERDOWN"):
			return KindReadOnly
		case hasPrefix(msg, "WRONGTYPE"):
			return KindKey
		}
		return KindScript
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	return KindConnection
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// call is one script call: what to run, and, once done is closed, its
// result.
type call struct {
	s        *script
	keys     []string
	args     []any
	deadline time.Time
	res      any
	err      error
	done     chan struct{} // nil for the calls of a background batch
}

// Pipelining of the request path: a caller queues its call and waits for
// it at most the timeout; a few workers take whatever is queued and send it
// as one pipeline, so that 64 concurrent callers cost a few round trips
// rather than 64. The queue is bounded and a worker drops the calls whose
// caller has already gone, so a stalled Redis costs a bounded number of
// goroutines and connections (envoyproxy/ratelimit #978).
const (
	maxBatch   = 256
	queueLen   = 4096
	numWorkers = 4
)

// transport sends script calls to Redis: pipelined for the request path
// (do), in explicit batches for background work (batch). It is safe for
// concurrent use.
type transport struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	q       chan *call
	// answered is told of every pipeline Redis answered in time.
	answered func()

	roundTrips atomic.Uint64 // pipelines and single commands sent
	commands   atomic.Uint64 // commands sent (a pipeline of n counts n)

	loadMu sync.Mutex
}

func newTransport(rdb redis.UniversalClient, timeout time.Duration, answered func()) *transport {
	return &transport{rdb: rdb, timeout: timeout, q: make(chan *call, queueLen), answered: answered}
}

// run runs the pipelining workers until ctx ends; wg counts them.
func (t *transport) run(ctx context.Context, wg *sync.WaitGroup) {
	for range numWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.worker(ctx)
		}()
	}
}

// do runs s on the request path and returns its result, waiting until
// deadline at most (a request's: now + the timeout when it began): ErrBusy
// at once when too many calls wait already, ErrTimeout when the answer
// comes later (the call may still be executed by Redis).
func (t *transport) do(deadline time.Time, s *script, keys []string, args []any) (any, error) {
	wait := time.Until(deadline)
	if wait <= 0 {
		return nil, ErrTimeout
	}
	c := &call{s: s, keys: keys, args: args, deadline: deadline, done: make(chan struct{})}
	select {
	case t.q <- c:
	default:
		return nil, ErrBusy
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-c.done:
		return c.res, c.err
	case <-timer.C:
		return nil, ErrTimeout
	}
}

func (t *transport) worker(ctx context.Context) {
	batch := make([]*call, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-t.q:
			batch = append(batch[:0], c)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-t.q:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		// A call whose caller has gone is not sent: it would apply an
		// admission nobody is told of.
		now := time.Now()
		live := batch[:0]
		var last time.Time
		for _, c := range batch {
			if !now.Before(c.deadline) {
				c.err = ErrTimeout
				close(c.done)
				continue
			}
			live = append(live, c)
			if c.deadline.After(last) {
				last = c.deadline
			}
		}
		if len(live) == 0 {
			continue
		}
		bctx, cancel := context.WithDeadline(ctx, last)
		t.exec(bctx, live)
		cancel()
	}
}

// batch runs calls as one pipeline (background work: pushes, renewals,
// releases), bounded by ctx, and leaves each call's result in it.
func (t *transport) batch(ctx context.Context, calls []*call) {
	if len(calls) > 0 {
		t.exec(ctx, calls)
	}
}

// exec sends calls as one pipeline; the calls that find their script not
// loaded (NOSCRIPT) load it and are sent again, once.
func (t *transport) exec(ctx context.Context, calls []*call) {
	cmds := t.send(ctx, calls)
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		again := make([]*call, len(retry))
		for j, i := range retry {
			again[j] = calls[i]
		}
		if err := t.load(ctx, again); err == nil {
			for j, cmd := range t.send(ctx, again) {
				cmds[retry[j]] = cmd
			}
		}
	}
	answered := false
	for i, c := range calls {
		c.res, c.err = cmds[i].Result()
		var re redis.Error
		if c.err == nil || errors.As(c.err, &re) {
			answered = true
		}
		if c.err != nil && ctx.Err() != nil {
			c.err = fmt.Errorf("%w: %v", ErrTimeout, c.err)
		}
		if c.done != nil {
			close(c.done)
		}
	}
	if answered {
		t.answered()
	}
}

func (t *transport) send(ctx context.Context, calls []*call) []*redis.Cmd {
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = pipe.EvalSha(ctx, c.s.sha, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	t.roundTrips.Add(1)
	t.commands.Add(uint64(len(calls)))
	return cmds
}

// load loads the scripts of calls (SCRIPT LOAD, one round trip each).
func (t *transport) load(ctx context.Context, calls []*call) error {
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	seen := map[*script]bool{}
	for _, c := range calls {
		if seen[c.s] {
			continue
		}
		seen[c.s] = true
		t.roundTrips.Add(1)
		t.commands.Add(1)
		if err := t.rdb.ScriptLoad(ctx, c.s.src).Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// runOne runs one script call outside the request path, bounded by ctx.
func (t *transport) runOne(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	c := &call{s: s, keys: keys, args: args}
	t.exec(ctx, []*call{c})
	return c.res, c.err
}

// ints reads a script's reply of integers.
func ints(v any) ([]int64, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T, want an array of integers", ErrReply, v)
	}
	out := make([]int64, len(a))
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T, want an integer", ErrReply, i, x)
		}
		out[i] = n
	}
	return out, nil
}
