package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared live state: one hash of records and its version, under one
// hash tag, and the channel versions are announced on. (ld:{cfg}:state
// held the fields without stamps before; it is not read any more.)
const (
	keyCfgVersion = keyPrefix + "{cfg}:ver"
	keyCfgState   = keyPrefix + "{cfg}:live"
	cfgChannel    = keyPrefix + "cfg"
)

// ReplicatorOptions connect a Replicator to the instance's live settings,
// as flat fields (live.Fields).
type ReplicatorOptions struct {
	// Local returns this instance's live state.
	Local func() map[string]string
	// Apply makes merge(local) this instance's live state, where local is
	// its state at that moment (under the lock that orders its edits).
	Apply func(ctx context.Context, merge func(local map[string]string) map[string]string) error
	// Now is the clock edits are stamped with (nil: time.Now).
	Now func() time.Time
}

// record is one field of the live state as the instances agree on it: its
// value or its removal (a tombstone), and the stamp of the edit that made
// it so.
type record struct {
	stamp string
	val   string
	del   bool
}

func (r record) encode() string {
	if r.del {
		return r.stamp + " d"
	}
	return r.stamp + " s" + r.val
}

func decodeRecord(s string) (record, bool) {
	st, rest, ok := strings.Cut(s, " ")
	if !ok || rest == "" || (rest[0] != 's' && rest[0] != 'd') {
		return record{}, false
	}
	return record{stamp: st, val: rest[1:], del: rest[0] == 'd'}, true
}

// Replicator carries the operators' live edits between the instances
// sharing a Redis (docs/cluster.md, "Live edits") so that they converge
// whatever Redis loses (decision 193). Every field of the live state (a
// group's override, an exemption, the switch) is a record stamped by the
// edit that made it (a hybrid clock: milliseconds, a counter, the
// instance), removals included (tombstones): the greater stamp wins,
// here and in Redis. Each instance keeps every record it knows and, once a
// second and whenever it hears of a new version, reads the shared records,
// takes the newer ones and writes back every record of its own that Redis
// lacks or holds older — so an edit acknowledged while Redis was down, or
// lost by a Redis that restarted empty, reaches every instance once Redis
// answers, and a removal is never inferred from Redis's silence. Its
// methods are safe for concurrent use; Run does the work.
type Replicator struct {
	b    *Backend
	opts ReplicatorOptions
	kick chan struct{}

	mu      sync.Mutex
	known   map[string]record // every record this instance knows
	lastMS  int64
	ctr     int64
	applied int64
	lastErr time.Time
}

// NewReplicator returns a Replicator over b's Redis.
func (b *Backend) NewReplicator(o ReplicatorOptions) *Replicator {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Replicator{b: b, opts: o, kick: make(chan struct{}, 1), known: map[string]record{}}
}

// stampLocked returns a new stamp, greater than every stamp this instance
// has made or seen.
func (r *Replicator) stampLocked() string {
	ms := r.opts.Now().UnixMilli()
	if ms > r.lastMS {
		r.lastMS, r.ctr = ms, 0
	} else {
		r.ctr++
	}
	return fmtStamp(r.lastMS, r.ctr, r.b.inst)
}

func fmtStamp(ms, ctr int64, inst string) string {
	return fmt.Sprintf("%013d.%06d.%s", ms, ctr, inst)
}

// seeLocked moves the clock past stamp st, so that an edit made here after
// this instance took st wins over it.
func (r *Replicator) seeLocked(st string) {
	ms, rest, ok := strings.Cut(st, ".")
	if !ok {
		return
	}
	n, err1 := strconv.ParseInt(ms, 10, 64)
	c, _, _ := strings.Cut(rest, ".")
	k, err2 := strconv.ParseInt(c, 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	if n > r.lastMS || n == r.lastMS && k > r.ctr {
		r.lastMS, r.ctr = n, k
	}
}

// Publish hears of a local edit (old and new states, as fields): each
// field it changed gets a record with a new stamp, and Run publishes it. It
// never waits for Redis.
func (r *Replicator) Publish(old, new map[string]string) {
	if maps.Equal(old, new) {
		return
	}
	r.mu.Lock()
	for f := range unionFields(old, new) {
		ov, ook := old[f]
		nv, nok := new[f]
		switch {
		case nok && (!ook || ov != nv):
			r.known[f] = record{stamp: r.stampLocked(), val: nv}
		case ook && !nok:
			r.known[f] = record{stamp: r.stampLocked(), del: true}
		}
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Version returns the shared version this instance last read.
func (r *Replicator) Version() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// adopt gives the fields of the local state no record is known for one
// of unknown age (the lowest stamp): any recorded edit wins over them, and
// Redis gets them when it lacks them.
func (r *Replicator) adopt() {
	local := r.opts.Local()
	r.mu.Lock()
	defer r.mu.Unlock()
	for f, v := range local {
		if _, ok := r.known[f]; !ok {
			r.known[f] = record{stamp: fmtStamp(0, 0, r.b.inst), val: v}
		}
	}
}

// Run subscribes to the channel and keeps this instance's live state and
// the shared one converging until ctx ends.
func (r *Replicator) Run(ctx context.Context) {
	r.adopt()
	ps := r.b.rdb.Subscribe(ctx, cfgChannel)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(time.Second))
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	r.sync(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					r.sync(ctx) // a (re)subscription: what was missed meanwhile
				}
			case *redis.Message:
				v, _, _ := strings.Cut(m.Payload, " ")
				if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != r.Version() {
					r.sync(ctx)
				}
			}
		case <-r.kick:
			r.sync(ctx)
		case <-poll.C:
			r.sync(ctx)
		}
	}
}

// failed logs a replication failure, at most once in 10 s.
func (r *Replicator) failed(what string, err error) {
	r.mu.Lock()
	quiet := time.Since(r.lastErr) < 10*time.Second
	if !quiet {
		r.lastErr = time.Now()
	}
	r.mu.Unlock()
	if !quiet {
		r.b.log.Warn("live edits not replicated: "+what+" (they apply here and are published when redis answers)", "err", err)
	}
}

// sync reads the shared records, takes the newer ones into this instance's
// live state, and writes back the records of its own Redis lacks or holds
// older.
func (r *Replicator) sync(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, max(r.b.opts.Timeout, time.Second))
	defer cancel()
	ver, shared, err := r.read(octx)
	if err != nil {
		r.failed("reading the shared live state", err)
		return
	}
	r.mu.Lock()
	changed := false
	for f, rec := range shared {
		r.seeLocked(rec.stamp)
		if cur, ok := r.known[f]; !ok || cur.stamp < rec.stamp {
			r.known[f] = rec
			changed = true
		}
	}
	var push []any
	for _, f := range slices.Sorted(maps.Keys(r.known)) {
		rec := r.known[f]
		if sh, ok := shared[f]; !ok || sh.stamp < rec.stamp {
			push = append(push, f, rec.encode())
		}
	}
	desired := map[string]string{}
	for f, rec := range r.known {
		if !rec.del {
			desired[f] = rec.val
		}
	}
	r.mu.Unlock()
	if changed || !maps.Equal(desired, r.opts.Local()) {
		err := r.opts.Apply(ctx, func(local map[string]string) map[string]string {
			r.mu.Lock()
			defer r.mu.Unlock()
			out := make(map[string]string, len(r.known))
			for f, v := range local {
				if _, ok := r.known[f]; !ok {
					r.known[f] = record{stamp: fmtStamp(0, 0, r.b.inst), val: v}
				}
			}
			for f, rec := range r.known {
				if !rec.del {
					out[f] = rec.val
				}
			}
			return out
		})
		if err != nil {
			r.failed(fmt.Sprintf("the shared live state (version %d) does not apply over this instance's config file: keeping this instance's", ver), err)
		} else {
			r.b.log.Info("live state brought up to the shared one", "version", ver)
		}
	}
	r.mu.Lock()
	r.applied = ver
	r.mu.Unlock()
	if len(push) == 0 {
		return
	}
	args := append([]any{cfgChannel, r.b.inst}, push...)
	v, err := r.b.t.runOne(octx, scriptMerge, []string{keyCfgVersion, keyCfgState}, args...)
	if err == nil {
		var res []int64
		if res, err = ints(v); err == nil && len(res) == 2 {
			r.mu.Lock()
			r.applied = res[0]
			r.mu.Unlock()
			if res[1] > 0 {
				r.b.log.Info("live edits published to the other instances", "version", res[0], "records", res[1])
			}
			return
		}
	}
	r.failed("publishing live edits", err)
}

func unionFields(a, b map[string]string) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// read returns the shared version (0: none) and records.
func (r *Replicator) read(ctx context.Context) (int64, map[string]record, error) {
	v, err := r.b.t.runOne(ctx, scriptRead, []string{keyCfgVersion, keyCfgState})
	if err != nil {
		return 0, nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a)%2 != 1 {
		return 0, nil, fmt.Errorf("%w: %T from the live state read", ErrReply, v)
	}
	ver, ok := a[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("%w: version %T", ErrReply, a[0])
	}
	recs := make(map[string]record, len(a)/2)
	for i := 1; i < len(a); i += 2 {
		f, ok1 := a[i].(string)
		val, ok2 := a[i+1].(string)
		if !ok1 || !ok2 {
			return 0, nil, fmt.Errorf("%w: field %T %T", ErrReply, a[i], a[i+1])
		}
		rec, ok := decodeRecord(val)
		if !ok {
			r.b.log.Warn("a shared live record is not one limiterd writes: ignored", "field", f)
			continue
		}
		recs[f] = rec
	}
	return ver, recs, nil
}
