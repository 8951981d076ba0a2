package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	KindConnection = "connection" // refused, reset, unreachable; a Redis Cluster down (CLUSTERDOWN)
	KindAuth       = "auth"       // NOAUTH, WRONGPASS, NOPERM
	KindScript     = "script"     // the script failed: CROSSSLOT, NOSCRIPT after loading, a Lua error
	KindMemory     = "memory"     // OOM: maxmemory reached under noeviction
	KindEvicted    = "evicted"    // Redis evicted keys: limiter state may be lost
	KindReadOnly   = "readonly"   // a replica, or a server loading its data
	KindKey        = "key"        // one key of the wrong type or holding a corrupt value (repaired)
	KindReply      = "reply"      // a reply the script cannot have given
	KindLimits     = "limits"     // a group's limits beyond what the scripts compute exactly
)

// Kinds lists every kind of failure, for metrics.
var Kinds = []string{KindTimeout, KindBusy, KindConnection, KindAuth, KindScript, KindMemory, KindEvicted, KindReadOnly, KindKey, KindReply, KindLimits, KindTLS}

const numKinds = 12

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
	case isKeyError(err):
		return KindKey
	case isTLSError(err):
		return KindTLS
	case strings.Contains(err.Error(), "sentinels"):
		return KindConnection // no sentinel answered, or none knows the master
	case errors.As(err, &re):
		msg := re.Error()
		switch {
		case hasPrefix(msg, "NOAUTH", "WRONGPASS", "NOPERM"), strings.Contains(msg, "AUTH"):
			return KindAuth
		case hasPrefix(msg, "OOM"):
			return KindMemory
		case hasPrefix(msg, "READONLY", "LOADING", "MASTERDOWN"):
			return KindReadOnly
		case hasPrefix(msg, "CLUSTERDOWN", "TRYAGAIN"):
			return KindConnection // a Redis Cluster that cannot serve the key's slot
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

// call is one script call, or one entry of a batch of decisions
// (lua/decide.lua): what to run, and, once done is signalled, its result.
type call struct {
	s        *script
	keys     []string
	args     []any
	ent      *entry // an entry of the decision batch (s is nil then)
	deadline time.Time
	res      any
	err      error
	// done (capacity 1) is signalled once, when res and err are set; nil
	// for the calls of a background batch. A call of the request path
	// comes from callPool with its done and timer, and goes back there
	// once its caller has read them (never after a timeout: the worker
	// may still hold it then).
	done  chan struct{}
	timer *time.Timer
	// e and argBuf hold the entry of a call of entryCall.
	e      entry
	argBuf [11]any
	// parts are the entries a batch call carries, and pkeys the keys of
	// their shared params, numbered from 1 in order; buf holds the
	// entries' arguments one after the other, and ents each one's (in
	// buf, not copied).
	parts []*call
	pkeys []any
	buf   []byte
	ents  []string
}

// callPool holds the calls of the request path between two uses.
var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// signal tells c's caller its result is set: the last the worker does
// with c.
func (c *call) signal() {
	if c.done != nil {
		c.done <- struct{}{}
	}
}

// entry is one operation of the decision batch script (lua/decide.lua):
// its op, its keys, the arguments it may share with the other entries of
// its batch (params, packed by packNums, shared when pkey is equal: the
// same group and schedule) and its own (numbers, then a string at most);
// seq, when not 0, makes the member its admission adds to a window: this
// instance's id, ':' and seq in base 36, unique across instances.
type entry struct {
	op     string
	keys   []string
	pkey   any
	params []byte
	args   []any
	seq    uint64
}

// maxEntries caps the entries of one batch script call: Redis runs one
// script at a time, and a batch holds it for the sum of its entries.
const maxEntries = 64

// Pipelining of the request path: a caller queues its call and waits for
// it at most the timeout; a few workers take whatever is queued and send it
// as one pipeline, so that 64 concurrent callers cost a few round trips
// rather than 64. The queue is bounded and a worker drops the calls whose
// caller has already gone, so a stalled Redis costs a bounded number of
// goroutines and connections (envoyproxy/ratelimit #978). Two workers: one
// batch runs in Redis while the next one gathers, and a batch call costs
// Redis a fixed part (the script's set-up, reading the call, writing the
// answer) that a larger batch shares among more decisions — four workers
// halved the batches and raised Redis's CPU per decision by a third
// (decision 231).
const (
	maxBatch   = 256
	queueLen   = 4096
	numWorkers = 2
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
	// clustered: rdb is a Redis Cluster client (a batch holds the keys of
	// one hash slot).
	clustered bool
	// inst, lease and clock are the batch script's header: this instance,
	// its lease (ms), and "now" ('' but in tests).
	inst  string
	lease int64
	clock func() string
	// repair is given the calls and entries whose key failed (wrong type,
	// corrupt): their keys are c.keys.
	repair func(ctx context.Context, failed []*call)

	roundTrips atomic.Uint64 // pipelines and single commands sent
	commands   atomic.Uint64 // commands sent (a pipeline of n counts n)
	entries    atomic.Uint64 // operations sent (a batch of n entries counts n)

	loadMu sync.Mutex
}

func newTransport(rdb redis.UniversalClient, timeout time.Duration, answered func()) *transport {
	_, clustered := rdb.(*redis.ClusterClient)
	return &transport{rdb: rdb, timeout: timeout, q: make(chan *call, queueLen), answered: answered,
		clustered: clustered, clock: func() string { return "" }}
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
	c := callPool.Get().(*call)
	c.s, c.keys, c.args = s, keys, args
	return t.wait(deadline, c)
}

// doEntry runs e in the next decision batch, as do runs a script.
func (t *transport) doEntry(deadline time.Time, e *entry) (any, error) {
	c := callPool.Get().(*call)
	c.ent, c.keys = e, e.keys
	return t.wait(deadline, c)
}

// entryCall returns a call of callPool for an entry op on keys with the
// shared params p; its own arguments go in c.e.args (c.argBuf holds
// them), then t.wait(deadline, c) runs it as doEntry does, without an
// entry or its arguments made on the heap for it.
func entryCall(op string, keys []string, p *entryParams) *call {
	c := callPool.Get().(*call)
	c.e = entry{op: op, keys: keys, pkey: p, params: p.packed, args: c.argBuf[:0]}
	c.ent, c.keys = &c.e, keys
	return c
}

// wait queues c, a call of callPool, and waits for its result until
// deadline; c goes back to the pool unless the worker may still hold it.
func (t *transport) wait(deadline time.Time, c *call) (any, error) {
	wait := time.Until(deadline)
	if wait <= 0 {
		c.recycle()
		return nil, ErrTimeout
	}
	c.deadline = deadline
	select {
	case t.q <- c:
	default:
		c.recycle()
		return nil, ErrBusy
	}
	if c.timer == nil {
		c.timer = time.NewTimer(wait)
	} else {
		c.timer.Reset(wait)
	}
	select {
	case <-c.done:
		c.timer.Stop()
		res, err := c.res, c.err
		c.recycle()
		return res, err
	case <-c.timer.C:
		return nil, ErrTimeout // c stays the worker's: not recycled
	}
}

// recycle clears c, a call of callPool its worker is done with, and puts
// it back.
func (c *call) recycle() {
	done, timer := c.done, c.timer
	*c = call{done: done, timer: timer}
	callPool.Put(c)
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
				c.signal()
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

// exec sends calls as one pipeline, the entries of decision batches
// gathered into batch script calls (one per hash slot on a Redis Cluster,
// at most maxEntries each); the calls that find their script not loaded
// (NOSCRIPT) load it and are sent again, once.
func (t *transport) exec(ctx context.Context, calls []*call) {
	wire := t.assemble(calls)
	cmds := t.send(ctx, wire)
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		again := make([]*call, len(retry))
		for j, i := range retry {
			again[j] = wire[i]
		}
		// Sent again even when the load failed: on a Redis Cluster it
		// fails when one master does not answer, though the others took
		// the script.
		_ = t.load(ctx, again)
		for j, cmd := range t.send(ctx, again) {
			cmds[retry[j]] = cmd
		}
	}
	answered, reload := false, false
	var repairs []*call
	for i, w := range wire {
		res, err := cmds[i].Result()
		var re redis.Error
		if err == nil || errors.As(err, &re) {
			answered = true
		}
		if err != nil && (re == nil || hasPrefix(re.Error(), "CLUSTERDOWN", "TRYAGAIN")) {
			reload = true
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		if err == redis.Nil && (w.parts != nil || w.s.perKey) {
			err = fmt.Errorf("%w: nil from the %s script, which returns an array", ErrReply, w.s.name)
		}
		if w.parts == nil {
			w.res, w.err = res, err
			if errors.As(err, &re) && w.s.perKey {
				if w.err = entryError(re.Error(), w.keys); isKeyError(w.err) {
					repairs = append(repairs, w)
				} else {
					w.err = err // as Redis answered it
				}
			}
			continue
		}
		repairs = distribute(w, res, err, repairs)
	}
	if len(repairs) > 0 && t.repair != nil {
		t.repair(ctx, repairs)
	}
	for _, c := range calls {
		c.signal()
	}
	if answered {
		t.answered()
	}
	if cc, ok := t.rdb.(*redis.ClusterClient); ok && reload {
		// The client routes by the slot map it read last, refreshed only
		// on a MOVED reply (or every minute): a master that stopped
		// answers none, so its replica's promotion would go unseen. (One
		// reload at a time, in the background.)
		cc.ReloadState(ctx)
	}
}

// assemble returns what calls put on the wire: the plain script calls as
// they are, and the entries gathered into batch calls of scriptDecide.
func (t *transport) assemble(calls []*call) []*call {
	wire := make([]*call, 0, len(calls))
	var open map[uint16]*call
	var single *call
	for _, c := range calls {
		if c.ent == nil {
			wire = append(wire, c)
			continue
		}
		var b *call
		if t.clustered {
			if open == nil {
				open = map[uint16]*call{}
			}
			slot := keySlot(c.ent.keys[0])
			b = open[slot]
			if b == nil || len(b.parts) == maxEntries {
				b = newBatchCall(t.clock(), t.inst, t.lease)
				open[slot] = b
				wire = append(wire, b)
			}
		} else {
			if single == nil || len(single.parts) == maxEntries {
				single = newBatchCall(t.clock(), t.inst, t.lease)
				wire = append(wire, single)
			}
			b = single
		}
		b.add(c, t.inst)
	}
	for _, b := range wire {
		if b.parts != nil {
			b.args[3] = len(b.parts)
			for j := range b.ents {
				b.args = append(b.args, &b.ents[j])
			}
		}
	}
	return wire
}

func newBatchCall(clock string, inst string, lease int64) *call {
	args := make([]any, 4, 4+maxEntries)
	args[0], args[1], args[2], args[3] = clock, inst, lease, 0
	return &call{s: scriptDecide, args: args, keys: make([]string, 0, 16), parts: make([]*call, 0, 16),
		buf: make([]byte, 0, 1024), ents: make([]string, 0, 16)}
}

// add appends c's entry to batch call b, whose instance is inst: its
// keys, and its one argument (lua/decide.lua; decision 237) — its op,
// the number of its params block in b (their values too when it is the
// block's first entry), its own numbers, then its string or member.
func (b *call) add(c *call, inst string) {
	e := c.ent
	b.parts = append(b.parts, c)
	b.keys = append(b.keys, e.keys...)
	start := len(b.buf)
	b.buf = append(b.buf, e.op...)
	if e.pkey != nil {
		ref := b.paramRef(e.pkey)
		b.buf = append(b.buf, byte(ref))
		if ref == 0 {
			b.buf = append(b.buf, e.params...)
		}
	}
	for _, a := range e.args {
		b.buf = appendArg(b.buf, a)
	}
	if e.seq != 0 {
		b.buf = append(b.buf, inst...)
		b.buf = append(b.buf, ':')
		b.buf = strconv.AppendUint(b.buf, e.seq, 36)
	}
	// The entry's bytes are never written again (b.buf only grows past
	// them; a larger array leaves them in the old one): a string of them
	// costs no copy.
	b.ents = append(b.ents, unsafe.String(&b.buf[start], len(b.buf)-start))
}

// paramRef returns the number of the params block pkey names in b, or 0
// (and numbers it) when this is its first entry. (A batch holds the
// entries of a group or two: a search beats a map.)
func (b *call) paramRef(pkey any) int {
	for i, k := range b.pkeys {
		if k == pkey {
			return i + 1
		}
	}
	b.pkeys = append(b.pkeys, pkey)
	return 0
}

// distribute hands the reply of batch call w (or its error) to its
// entries, and returns repairs with the entries whose key failed added.
func distribute(w *call, res any, err error, repairs []*call) []*call {
	if err == nil {
		a, ok := res.([]any)
		if !ok {
			err = fmt.Errorf("%w: %T from the decision batch, want an array of %d replies", ErrReply, res, len(w.parts))
		} else if len(a) != len(w.parts) {
			err = fmt.Errorf("%w: %d replies from the decision batch, want %d", ErrReply, len(a), len(w.parts))
		} else {
			for j, c := range w.parts {
				c.res, c.err = a[j], nil
				if r, ok := a[j].([]any); ok && len(r) == 2 && r[0] == int64(-1) {
					msg, _ := r[1].(string)
					c.res, c.err = nil, entryError(msg, c.ent.keys)
					if isKeyError(c.err) {
						repairs = append(repairs, c)
					}
				}
			}
			return repairs
		}
	}
	for _, c := range w.parts {
		c.res, c.err = nil, err
	}
	return repairs
}

func (t *transport) send(ctx context.Context, calls []*call) []*redis.Cmd {
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	n := 0
	for i, c := range calls {
		// EVALSHA sha numkeys keys… args…, the keys as pointers into
		// c.keys (a string boxed in an interface is a copy on the heap).
		argv := make([]any, 0, 3+len(c.keys)+len(c.args))
		argv = append(argv, "evalsha", &c.s.sha, len(c.keys))
		for j := range c.keys {
			argv = append(argv, &c.keys[j])
		}
		argv = append(argv, c.args...)
		cmds[i] = redis.NewCmd(ctx, argv...)
		if len(c.keys) > 0 {
			cmds[i].SetFirstKeyPos(3) // routed by its first key on a Redis Cluster
		}
		_ = pipe.Process(ctx, cmds[i])
		n += max(1, len(c.parts))
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	t.roundTrips.Add(1)
	t.commands.Add(uint64(len(calls)))
	t.entries.Add(uint64(n))
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
