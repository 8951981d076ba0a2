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

// The shared live state: one hash of fields and its version, under one
// hash tag, and the channel versions are announced on.
const (
	keyCfgVersion = keyPrefix + "{cfg}:ver"
	keyCfgState   = keyPrefix + "{cfg}:state"
	cfgChannel    = keyPrefix + "cfg"
)

// ReplicatorOptions connect a Replicator to the instance's live settings,
// as flat fields (live.Fields).
type ReplicatorOptions struct {
	// Local returns this instance's live state.
	Local func() map[string]string
	// Apply makes merge(local) this instance's live state, where local is
	// its state at that moment (under the lock that orders its edits):
	// merge keeps the local edits not published yet and takes the others'
	// for the rest.
	Apply func(ctx context.Context, merge func(local map[string]string) map[string]string) error
}

// Replicator carries the operators' live edits between the instances
// sharing a Redis (docs/cluster.md, "Live edits"): an edit is written into a
// shared hash with a new version, announced on a channel, and every instance
// brings its own state (stored in its own database, as any edit) up to the
// shared one when it hears of a version it has not applied, on every
// (re)subscription and on a poll every second (messages are lost while an
// instance is disconnected; the version is not). A Redis found empty (new, or
// restarted without its data) is given the state of the first instance to find
// it so. Edits made while Redis cannot be reached are applied here and
// published when it can; when two instances changed the same thing, the last
// one published wins. Its methods are safe for concurrent use; Run does the
// work.
type Replicator struct {
	b    *Backend
	opts ReplicatorOptions
	kick chan struct{}

	mu      sync.Mutex // guards what follows (written by Run only)
	synced  bool
	applied int64
	base    map[string]string // the shared state as of applied
	lastErr time.Time
}

// NewReplicator returns a Replicator over b's Redis.
func (b *Backend) NewReplicator(o ReplicatorOptions) *Replicator {
	return &Replicator{b: b, opts: o, kick: make(chan struct{}, 1)}
}

// Publish hears of a local edit (old and new states, as fields) and has
// Run publish it; it never waits for Redis.
func (r *Replicator) Publish(old, new map[string]string) {
	if maps.Equal(old, new) {
		return
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Version returns the shared version this instance has applied.
func (r *Replicator) Version() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// Run subscribes to the channel and keeps this instance's live state in
// step with the shared one until ctx ends.
func (r *Replicator) Run(ctx context.Context) {
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
			r.push(ctx)
		case <-poll.C:
			r.sync(ctx)
		}
	}
}

func (r *Replicator) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(r.b.opts.Timeout, time.Second))
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

// sync brings this instance up to the shared state when its version moved
// (or Redis lost it), then publishes what is left of the local edits.
func (r *Replicator) sync(ctx context.Context) {
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	r.mu.Lock()
	synced, applied := r.synced, r.applied
	r.mu.Unlock()
	if synced {
		n, err := r.b.rdb.Get(octx, keyCfgVersion).Int64()
		if err == redis.Nil {
			n, err = 0, nil
		}
		if err != nil {
			r.failed("reading the shared version", err)
			return
		}
		if n == applied && n != 0 {
			r.push(ctx)
			return
		}
	}
	ver, fields, err := r.read(octx)
	if err != nil {
		r.failed("reading the shared live state", err)
		return
	}
	if ver == 0 {
		local := r.opts.Local()
		args := []any{cfgChannel, r.b.inst}
		for _, f := range slices.Sorted(maps.Keys(local)) {
			args = append(args, f, local[f])
		}
		v, err := r.b.t.runOne(octx, scriptSeed, []string{keyCfgVersion, keyCfgState}, args...)
		if err != nil {
			r.failed("seeding an empty redis with the live state", err)
			return
		}
		if res, err := ints(v); err == nil && len(res) == 2 && res[0] == 1 {
			r.b.log.Info("redis had no live state: gave it this instance's", "fields", len(local))
			r.mu.Lock()
			r.synced, r.applied, r.base = true, 1, local
			r.mu.Unlock()
			return
		}
		if ver, fields, err = r.read(octx); err != nil || ver == 0 {
			r.failed("reading the shared live state", fmt.Errorf("%v (version %d)", err, ver))
			return
		}
	}
	r.mu.Lock()
	base, wasSynced := r.base, r.synced
	r.mu.Unlock()
	err = r.opts.Apply(ctx, func(local map[string]string) map[string]string {
		if !wasSynced {
			// Nothing here was ever published: the shared state wins.
			return fields
		}
		// Three-way: a field this instance changed since base and has not
		// published keeps its local value; every other one takes the
		// shared value.
		out := maps.Clone(fields)
		for f := range unionFields(base, local) {
			lv, lok := local[f]
			bv, bok := base[f]
			if lok == bok && lv == bv {
				continue
			}
			if lok {
				out[f] = lv
			} else {
				delete(out, f)
			}
		}
		return out
	})
	if err != nil {
		r.failed(fmt.Sprintf("the shared live state (version %d) does not apply over this instance's config file: keeping this instance's", ver), err)
		return
	}
	r.mu.Lock()
	if r.applied != ver {
		r.b.log.Info("live state brought up to the shared one", "version", ver)
	}
	r.synced, r.applied, r.base = true, ver, fields
	r.mu.Unlock()
	r.push(ctx)
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

// read returns the shared version (0: none) and state.
func (r *Replicator) read(ctx context.Context) (int64, map[string]string, error) {
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
	fields := make(map[string]string, len(a)/2)
	for i := 1; i < len(a); i += 2 {
		f, ok1 := a[i].(string)
		val, ok2 := a[i+1].(string)
		if !ok1 || !ok2 {
			return 0, nil, fmt.Errorf("%w: field %T %T", ErrReply, a[i], a[i+1])
		}
		fields[f] = val
	}
	return ver, fields, nil
}

// push publishes the local edits not in the shared state as last applied.
func (r *Replicator) push(ctx context.Context) {
	r.mu.Lock()
	synced, base := r.synced, r.base
	r.mu.Unlock()
	if !synced {
		return // what to publish is known once the shared state has been read
	}
	local := r.opts.Local()
	var sets, dels []string
	for _, f := range slices.Sorted(maps.Keys(unionFields(base, local))) {
		lv, lok := local[f]
		bv, bok := base[f]
		switch {
		case lok && (!bok || lv != bv):
			sets = append(sets, f)
		case !lok && bok:
			dels = append(dels, f)
		}
	}
	if len(sets)+len(dels) == 0 {
		return
	}
	args := []any{cfgChannel, r.b.inst, len(sets)}
	for _, f := range sets {
		args = append(args, f, local[f])
	}
	for _, f := range dels {
		args = append(args, f)
	}
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	v, err := r.b.t.runOne(octx, scriptPublish, []string{keyCfgVersion, keyCfgState}, args...)
	n, ok := v.(int64)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %T from the publish script", ErrReply, v)
	}
	if err != nil {
		r.failed("publishing a live edit", err)
		return
	}
	r.mu.Lock()
	next := maps.Clone(r.base)
	for _, f := range sets {
		next[f] = local[f]
	}
	for _, f := range dels {
		delete(next, f)
	}
	r.base = next
	behind := n != r.applied+1
	r.applied = n
	r.mu.Unlock()
	r.b.log.Info("live edit published to the other instances", "version", n, "changed", len(sets)+len(dels))
	if behind {
		// Others published in between: take their edits too.
		r.mu.Lock()
		r.applied = -1
		r.mu.Unlock()
		r.sync(ctx)
	}
}
