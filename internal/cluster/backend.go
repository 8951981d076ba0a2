package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/limiter"
)

// Mode is how decisions use Redis (docs/cluster.md).
type Mode uint8

// The modes.
const (
	// Strict: one atomic script call per decision.
	Strict Mode = iota
	// LocalFirst: local decisions, admissions pushed in batches.
	LocalFirst
)

// String returns the configuration name of m.
func (m Mode) String() string { return [...]string{"strict", "local_first"}[m] }

// OnFailure is what a decision does while Redis cannot be used.
type OnFailure uint8

// The answers while Redis is down.
const (
	// FailLocal decides with this instance's own state.
	FailLocal OnFailure = iota
	// FailOpen admits, as unlimited.
	FailOpen
	// FailClosed rejects with 503.
	FailClosed
)

// String returns the configuration name of f.
func (f OnFailure) String() string { return [...]string{"local", "open", "closed"}[f] }

// ParseMode parses "strict" or "local_first".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "strict":
		return Strict, nil
	case "local_first":
		return LocalFirst, nil
	}
	return 0, fmt.Errorf("cluster.mode: %q is not one of strict, local_first", s)
}

// ParseOnFailure parses "local", "open" or "closed".
func ParseOnFailure(s string) (OnFailure, error) {
	switch s {
	case "local":
		return FailLocal, nil
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("cluster.on_failure: %q is not one of open, closed, local", s)
}

// Options configure a Backend: the [cluster] and [cluster.redis] tables.
type Options struct {
	// Addrs are the Redis servers: one address for a single Redis (or a
	// Valkey), several for the seed nodes of a Redis Cluster.
	Addrs    []string
	Username string
	Password string
	// PasswordFile, when set, holds the password instead (read at Open
	// and at each Reload).
	PasswordFile string
	DB           int
	// TLS, when not nil, is TLS to Redis and the sentinels.
	TLS *TLSOptions
	// MasterName, when set, names the master of a Sentinel deployment:
	// SentinelAddrs are then the sentinels asked for it (Addrs is not
	// used), and SentinelPassword their own password.
	MasterName       string
	SentinelAddrs    []string
	SentinelPassword string

	Mode      Mode
	OnFailure OnFailure
	// Timeout bounds every wait for Redis on a request's path.
	Timeout time.Duration
	// Lease is how long the in-flight slots of an instance that stopped
	// renewing them are kept.
	Lease time.Duration
	// SyncInterval is how often local_first pushes its admissions.
	SyncInterval time.Duration
	// MaxUnsynced caps the admissions local_first makes per key on one
	// read of the shared state (0: no cap).
	MaxUnsynced int
	// Fallback is the local state decided on while Redis is down, for
	// on_failure = "local" (required then): a Limiter's own slab
	// (limiter.Limiter.Backend of a Limiter of its own).
	Fallback limiter.Backend
	// Instance names this instance in Redis (its slots and counts); empty:
	// a random one.
	Instance string
	Logger   *slog.Logger
}

func (o *Options) check() error {
	var errs []string
	if len(o.Addrs) == 0 && o.MasterName == "" {
		errs = append(errs, "cluster.redis.addrs: at least one address is needed")
	}
	if o.MasterName != "" && len(o.SentinelAddrs) == 0 {
		errs = append(errs, "cluster.redis.sentinel.addrs: master_name needs at least one sentinel address")
	}
	if o.Timeout <= 0 {
		errs = append(errs, "cluster.timeout: must be > 0")
	}
	if o.Lease < time.Second {
		errs = append(errs, "cluster.lease: must be at least 1s")
	}
	if o.SyncInterval <= 0 {
		errs = append(errs, "cluster.sync_interval: must be > 0")
	}
	if o.MaxUnsynced < 0 {
		errs = append(errs, "cluster.max_unsynced: must be ≥ 0")
	}
	if len(o.Instance) > 255 {
		errs = append(errs, "cluster instance name: at most 255 bytes (its requests in flight are named by it in redis)")
	}
	if o.OnFailure == FailLocal && o.Fallback == nil {
		errs = append(errs, `cluster.on_failure: "local" needs a local state to decide on`)
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// engine is where a mode keeps and decides the state.
type engine interface {
	admit(ms int64, k limiter.Key, g *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle, error)
	release(s slot)
	reduce(ms int64, k limiter.Key, g *limiter.Group) (limiter.ReduceResult, error)
	forget(ctx context.Context, k limiter.Key, g *limiter.Group) (bool, error)
	// probe runs the mode's script on a canary key.
	probe(ctx context.Context) error
	// run runs the mode's background work until ctx ends.
	run(ctx context.Context)
	tracked() int
}

// counters are a group's decisions made with Redis, and those admitted
// unlimited by on_failure = "open".
type counters struct {
	requests, sliding, leaky, conc, rate, open atomic.Uint64
	_                                          [16]byte
}

// Backend is the limiter.Backend of cluster mode: the group state in
// Redis, in the Mode of its Options, behind a breaker that answers as
// OnFailure says while Redis is down. It also implements limiter.Sweeper
// and limiter.StatsReporter. It is safe for concurrent use; Close stops
// its goroutines.
type Backend struct {
	opts   Options
	log    *slog.Logger
	inst   string
	rdb    redis.UniversalClient
	sec    *secrets
	t      *transport
	h      *health
	cut    *slotBreaker // Redis Cluster's slots, nil otherwise
	eng    engine
	fb     limiter.Backend // on_failure = "local"
	slots  slotTable
	keeper *slotKeeper
	sched  schedules

	stats     [limiter.MaxGroups]counters
	failOpen  atomic.Uint64
	failClose atomic.Uint64
	failLocal atomic.Uint64
	lastEvict atomic.Int64 // evicted_keys at the last probe, -1 before the first
	drift     atomic.Pointer[[]Drift]

	// clock, when set (tests), is Redis's clock: scripts are given it
	// instead of reading TIME.
	clock func() int64
	// localNow is this instance's clock, Unix ms (the one Admit's ms comes
	// from).
	localNow func() int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

var (
	_ limiter.Backend       = (*Backend)(nil)
	_ limiter.Sweeper       = (*Backend)(nil)
	_ limiter.StatsReporter = (*Backend)(nil)
	_ limiter.Reconfigurer  = (*Backend)(nil)
)

// Open connects to Redis as o says and starts the backend's goroutines
// (pipelining, pushes or lease renewals, the breaker's prober). It checks
// Redis once, for at most a few seconds: a Redis that cannot be used yet
// is logged and the backend starts with the breaker down, deciding as
// o.OnFailure says until Redis answers. Only invalid options are an error.
func Open(o Options) (*Backend, error) {
	return open(o, nil)
}

func open(o Options, clock func() int64) (*Backend, error) {
	localNow := func() int64 { return time.Now().UnixMilli() }
	if clock != nil {
		localNow = clock
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Instance == "" {
		var raw [6]byte
		_, _ = rand.Read(raw[:])
		o.Instance = hex.EncodeToString(raw[:])
	}
	sec := &secrets{}
	if err := sec.load(&o); err != nil {
		return nil, err
	}
	b := &Backend{opts: o, log: o.Logger.With("component", "cluster"), inst: o.Instance, clock: clock, localNow: localNow, sec: sec}
	b.lastEvict.Store(-1)
	addrs := o.Addrs
	if o.MasterName != "" {
		addrs = o.SentinelAddrs
	}
	username := o.Username
	b.rdb = redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs: addrs,
		CredentialsProvider: func() (string, string) {
			return username, *sec.password.Load()
		},
		DB:               o.DB,
		TLSConfig:        sec.tlsConfig(&o),
		MasterName:       o.MasterName,
		SentinelPassword: o.SentinelPassword,
		// A retried script call could apply an admission twice.
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DialTimeout:           max(o.Timeout, time.Second),
		DialerRetries:         1,
		ReadTimeout:           max(2*o.Timeout, 2*time.Second),
		WriteTimeout:          max(2*o.Timeout, 2*time.Second),
		PoolSize:              numWorkers + 8,
		MaxActiveConns:        numWorkers + 8,
		MinIdleConns:          numWorkers,
		PoolTimeout:           o.Timeout,
		DisableIdentity:       true,
	})
	b.h = newHealth(b.log, o.Timeout)
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		b.cut = newSlotBreaker(cc, b.log)
	}
	b.t = newTransport(b.rdb, o.Timeout, b.h.ok)
	b.sched = schedules{t: b.t, now: b.redisNow}
	if o.OnFailure == FailLocal {
		b.fb = o.Fallback
	}
	b.keeper = newSlotKeeper(b)
	b.t.inst, b.t.lease, b.t.clock = b.inst, b.keeper.lease, b.clockArg
	b.t.repair = func(_ context.Context, failed []*call) {
		for _, c := range failed {
			b.keeper.repair(c.keys)
		}
	}
	switch o.Mode {
	case LocalFirst:
		b.eng = newLocalFirst(b)
	default:
		b.eng = newStrict(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.t.run(ctx, &b.wg)

	pctx, pcancel := context.WithTimeout(ctx, max(2*time.Second, o.Timeout))
	if kind, err := b.probe(pctx); err != nil {
		b.h.errs[kindIndex[kind]].Add(1)
		b.h.setReason(kind + ": " + err.Error())
		b.log.Error("redis unavailable at start: deciding as cluster.on_failure says until it answers",
			"addrs", strings.Join(addrs, ","), "on_failure", o.OnFailure.String(), "kind", kind, "err", err)
	} else {
		b.h.markUp()
	}
	pcancel()
	b.wg.Add(3)
	go func() {
		defer b.wg.Done()
		b.h.probeLoop(ctx, b.probe, o.Timeout)
	}()
	go func() {
		defer b.wg.Done()
		b.keeper.run(ctx)
	}()
	go func() {
		defer b.wg.Done()
		b.eng.run(ctx)
	}()
	if b.cut != nil {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.cut.probeLoop(ctx, o.Timeout)
		}()
	}
	return b, nil
}

// Close stops the backend's goroutines and closes its connections. The
// slots it holds are no longer renewed and expire within the lease.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.cancel()
	b.wg.Wait()
	return b.rdb.Close()
}

// explain returns err's text with the configuration key it most likely
// concerns (Hint).
func (b *Backend) explain(kind string, err error) string {
	if h := Hint(kind, err, &b.opts); h != "" {
		return err.Error() + " (check " + h + ")"
	}
	return err.Error()
}

// Reload reads the password file and the TLS files again (SIGHUP): the
// connections dialled from now on use them. It then checks them on a new
// connection of their own, within timeout; the error, a
// *limiter.FieldError, names the key (a file that cannot be read, a
// password Redis refuses, a certificate that does not verify). Files that
// cannot be read leave the ones in use in place.
func (b *Backend) Reload(timeout time.Duration) error {
	if err := b.sec.load(&b.opts); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := b.rdb.Ping(ctx).Result(); err != nil {
		kind := classify(err)
		field := Hint(kind, err, &b.opts)
		if field == "" {
			field = "cluster.redis.addrs"
		}
		field, _, _ = strings.Cut(field, " ")
		return &limiter.FieldError{Field: field, Problem: b.explain(kind, err), Err: err}
	}
	return nil
}

// Instance returns the name of this instance in Redis.
func (b *Backend) Instance() string { return b.inst }

// clockArg is the script argument for "now": empty (Redis TIME) but in
// tests.
func (b *Backend) clockArg() string {
	if b.clock != nil {
		return strconv.FormatInt(b.clock(), 10)
	}
	return ""
}

// refreshSchedules reloads the shared schedules (another instance may have
// retimed them, or changed the algorithm).
func (b *Backend) refreshSchedules(ctx context.Context) {
	if !b.h.up.Load() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.sched.refresh(rctx); err != nil {
		// On a Redis Cluster, the master of ld:sched failing trips its
		// slot, not every decision's: the schedules stay cached.
		b.fail(keySchedules, err, fmt.Errorf("reading the shared tick schedules: %w", err))
	}
}

// keyFailed returns err as the failure of keys alone: a *KeyError as it is
// (the script found the key of the wrong type or corrupt, and it is being
// repaired), a reply no decision can have given (checked here) as a
// *KeyError whose keys are repaired; any other error as it is.
func (b *Backend) keyFailed(keys []string, err error) error {
	if isKeyError(err) {
		return err
	}
	if errors.Is(err, ErrReply) {
		b.keeper.repair(keys)
		return &KeyError{Keys: keys, Msg: err.Error()}
	}
	return err
}

// redisNow returns Redis's clock in Unix ms.
func (b *Backend) redisNow(ctx context.Context) (int64, error) {
	if b.clock != nil {
		return b.clock(), nil
	}
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	return redisTime(ctx, b.rdb)
}

// probe checks that Redis can be used: the version, the mode's script on a
// canary key, and that no key was evicted since the last probe.
func (b *Backend) probe(ctx context.Context) (string, error) {
	kind, err := b.probeOnce(ctx)
	if err != nil {
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			// The client routes by the slot map it read last, refreshed only
			// on a MOVED reply (or every minute): a master that stopped
			// answers none, so its replica's promotion would go unseen.
			cc.ReloadState(ctx)
		}
		if h := Hint(kind, err, &b.opts); h != "" {
			err = fmt.Errorf("%w (check %s)", err, h)
		}
	}
	return kind, err
}

func (b *Backend) probeOnce(ctx context.Context) (string, error) {
	infos, failed, err := b.infos(ctx)
	if err != nil {
		return classify(err), err
	}
	if len(failed) > 0 {
		// Some masters of a Redis Cluster answer, others not: the others'
		// slots are tripped (decision 236), and their eviction counters
		// cannot be summed this time.
		b.cut.tripNodes(ctx, failed)
	}
	evicted, counted := int64(0), false
	for _, info := range infos {
		// (A server that does not say its version is left to the canary call.)
		if v := infoField(info, "redis_version"); v != "" && !versionAtLeast(v, 6, 2) {
			return KindScript, fmt.Errorf("redis %s: 6.2 or later is needed (ZADD GT, effect replication of scripts)", v)
		}
		if n, err := strconv.ParseInt(infoField(info, "evicted_keys"), 10, 64); err == nil {
			evicted += n
			counted = len(failed) == 0
		}
	}
	// (The canary's slot may be one of a master that does not answer: the
	// others said Redis can be used.)
	if !b.cut.keyDown(canaryTag(b.inst)) {
		if err := b.eng.probe(ctx); err != nil {
			return classify(err), err
		}
	}
	if n := evicted; counted {
		prev := b.lastEvict.Swap(n)
		if prev >= 0 && n > prev {
			return KindEvicted, fmt.Errorf("redis evicted %d keys since the last check: limiter state may have been lost (give limiterd a Redis with maxmemory-policy noeviction, or more memory)", n-prev)
		}
	}
	return "", nil
}

// infos returns the INFO of the Redis in use: of every master of a Redis
// Cluster (a cluster client sends INFO to a master picked at random, and
// the eviction counters of two masters are not one counter), else of the
// one server. The masters of a Redis Cluster that did not answer are in
// failed, by address; err is set when none did (or the one server did
// not).
func (b *Backend) infos(ctx context.Context) (infos []string, failed map[string]error, err error) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		b.t.roundTrips.Add(1)
		b.t.commands.Add(1)
		info, err := b.rdb.Info(ctx).Result()
		return []string{info}, nil, err
	}
	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		b.t.roundTrips.Add(1)
		b.t.commands.Add(1)
		info, err := c.Info(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			err = fmt.Errorf("%s: %w", c.Options().Addr, err)
			if failed == nil {
				failed = map[string]error{}
			}
			failed[c.Options().Addr] = err
			return err
		}
		infos = append(infos, info)
		return nil
	})
	if len(infos) > 0 {
		err = nil
	}
	return infos, failed, err
}

// infoField returns field name of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// versionAtLeast reports whether version v ("7.0.15") is at least
// major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Admit decides one request on the shared state, or, while Redis is down
// or when this call fails, as OnFailure says.
func (b *Backend) Admit(ms int64, k limiter.Key, g *limiter.Group) (limiter.Outcome, limiter.Usage, limiter.Handle) {
	if b.h.up.Load() && !b.cut.isDown(k, g.Name) {
		out, u, h, err := b.eng.admit(ms, k, g)
		if err == nil {
			c := &b.stats[g.ID]
			c.requests.Add(1)
			switch {
			case out.Via == limiter.ViaSliding:
				c.sliding.Add(1)
			case out.Via == limiter.ViaLeaky:
				c.leaky.Add(1)
			case out.Reason == limiter.ReasonConcurrency:
				c.conc.Add(1)
			default:
				c.rate.Add(1)
			}
			return out, u, h
		}
		b.fail(failedKey(k, g, err), err, fmt.Errorf("group %s: %w", g.Name, err))
	}
	switch b.opts.OnFailure {
	case FailOpen:
		b.failOpen.Add(1)
		b.stats[g.ID].open.Add(1)
		return limiter.Outcome{Via: limiter.ViaUnlimited}, limiter.Usage{}, limiter.Handle{}
	case FailClosed:
		b.failClose.Add(1)
		return limiter.Outcome{Reason: limiter.ReasonUnavailable, RetryAfter: 1}, limiter.Usage{}, limiter.Handle{}
	}
	b.failLocal.Add(1)
	return b.fb.Admit(ms, k, g)
}

// failedKey returns the key a call of peer k in group g that failed with
// err failed on: the shared schedules' when reading or establishing them
// failed, else the (peer, group)'s hash tag.
func failedKey(k limiter.Key, g *limiter.Group, err error) string {
	var se *scheduleError
	if errors.As(err, &se) {
		return keySchedules
	}
	return tagOf(k.Peer().String(), g.Name)
}

// fail records a call on key (any key of one (peer, group), or its hash
// tag) that failed with err (cause), described by err: in Redis Cluster, a
// failure that says the key's master is unwell trips the key's slot alone
// (decision 236), and has the breaker's prober look at once whether any
// master answers; anything else goes to the breaker.
func (b *Backend) fail(key string, cause, err error) {
	kind := classify(cause)
	if b.cut != nil && slotScoped(kind) {
		b.h.errs[kindIndex[kind]].Add(1)
		if b.cut.tripKey(key, kind, err) {
			b.h.probeSoon()
		}
		return
	}
	b.h.fail(kind, err)
}

// keyScoped reports whether err, failing a call on one key, is that key's
// alone (corrupt or of the wrong type) or its slot's (decision 236), so
// that calls on other keys go on.
func (b *Backend) keyScoped(err error) bool {
	kind := classify(err)
	return kind == KindKey || b.cut != nil && slotScoped(kind)
}

// Release gives back an admission's slot: in Redis (batched, never on the
// response's path) or in the local state it was admitted on.
func (b *Backend) Release(h limiter.Handle) {
	if h == (limiter.Handle{}) {
		return // admitted by on_failure = "open": nothing held
	}
	if isOurs(h) {
		if s, ok := b.slots.take(h); ok {
			if s.lf != nil {
				b.eng.release(s)
			} else {
				b.keeper.release(s)
			}
		}
		return
	}
	if b.fb != nil {
		b.fb.Release(h)
	}
}

// Reduce gives back one token of the peer's shared state, or of the local
// one while Redis is down (on_failure = "local"; otherwise nothing).
func (b *Backend) Reduce(ms int64, k limiter.Key, g *limiter.Group) limiter.ReduceResult {
	if b.h.up.Load() && !b.cut.isDown(k, g.Name) {
		r, err := b.eng.reduce(ms, k, g)
		if err == nil {
			return r
		}
		b.fail(failedKey(k, g, err), err, fmt.Errorf("group %s: reduce: %w", g.Name, err))
	}
	if b.fb != nil {
		return b.fb.Reduce(ms, k, g)
	}
	return limiter.ReduceNoop
}

// Forget deletes the peer's state in Redis and in the local state.
func (b *Backend) Forget(k limiter.Key, g *limiter.Group) bool {
	found := false
	if b.fb != nil {
		found = b.fb.Forget(k, g)
	}
	if b.h.up.Load() && !b.cut.isDown(k, g.Name) {
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.Timeout)
		ok, err := b.eng.forget(ctx, k, g)
		cancel()
		if err != nil {
			b.fail(failedKey(k, g, err), err, fmt.Errorf("group %s: forget: %w", g.Name, err))
		}
		found = found || ok
	}
	return found
}

// Reconfigured notes the groups whose algorithm a configuration change
// changed: their state in Redis is dropped (a new generation of key names)
// before their next decision, as the local backend drops its entries.
func (b *Backend) Reconfigured(prev, next *limiter.GroupTable) map[limiter.GroupID]int {
	for id := range limiter.MaxGroups {
		p, okp := prev.Lookup(limiter.GroupID(id))
		n, okn := next.Lookup(limiter.GroupID(id))
		if okp && okn && p.Algorithm != n.Algorithm {
			b.sched.switches[id].Add(1)
		}
	}
	if r, ok := b.fb.(limiter.Reconfigurer); ok {
		return r.Reconfigured(prev, next)
	}
	return nil
}

// Sweep sweeps the local state used while Redis is down.
func (b *Backend) Sweep(ms int64, gt *limiter.GroupTable) {
	if sw, ok := b.fb.(limiter.Sweeper); ok {
		sw.Sweep(ms, gt)
	}
}

// AddStats adds the decisions made with Redis, this instance's requests in
// flight, and the local state's counters.
func (b *Backend) AddStats(sum *[limiter.MaxGroups]limiter.GroupStats) {
	var open [limiter.MaxGroups]int64
	b.slots.openByGroup(&open)
	for g := range sum {
		c, s := &b.stats[g], &sum[g]
		s.Requests += c.requests.Load() + c.open.Load()
		s.Unlimited += c.open.Load()
		s.AllowedSliding += c.sliding.Load()
		s.AllowedLeaky += c.leaky.Load()
		s.RejectedConcurrency += c.conc.Load()
		s.RejectedRateLimit += c.rate.Load()
		s.ItemsConcurrency += open[g]
	}
	if sr, ok := b.fb.(limiter.StatsReporter); ok {
		sr.AddStats(sum)
	}
}

// Tracked returns the (peer, group) entries held in this instance: the
// local_first views and the local state's entries.
func (b *Backend) Tracked() int {
	n := b.eng.tracked()
	if sr, ok := b.fb.(limiter.StatsReporter); ok {
		n += sr.Tracked()
	}
	return n
}
