package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// Records keeps the records across restarts, in the instance's
	// database (nil: in memory only, as decision 193 had it).
	Records RecordStore
	// Check refuses the fields a record read from Redis or Records may
	// not hold (the daemon's: live.CheckField); nil takes any.
	Check func(field, value string, removed bool) error
}

// Record is one field of the live state as the instances agree on it: its
// value or its removal (a tombstone), and the stamp of the edit that made
// it. Stamps compare as strings: the greater is the newer edit.
type Record struct {
	Stamp   string
	Value   string
	Removed bool
}

// Newer reports whether r is a newer edit than old.
func (r Record) Newer(old Record) bool { return r.Stamp > old.Stamp }

// RecordStore keeps a Replicator's records and the clock's high-water
// mark (the greatest stamp made or seen) across restarts: the daemon's
// database (decision 221).
type RecordStore interface {
	// LoadRecords returns every record kept, by field, and the clock. A
	// record that cannot be read is left out, never an error of the whole.
	LoadRecords(ctx context.Context) (recs map[string]Record, clock string, err error)
	// SaveRecords keeps each of recs newer than the one kept for its field,
	// and clock if greater, durably, in one transaction.
	SaveRecords(ctx context.Context, recs map[string]Record, clock string) error
}

// encodeRecord writes r as the shared hash holds it: the stamp, a space,
// then "s" and the value, or "d" for a removal.
func encodeRecord(r Record) string {
	if r.Removed {
		return r.Stamp + " d"
	}
	return r.Stamp + " s" + r.Value
}

func decodeRecord(s string) (Record, bool) {
	st, rest, ok := strings.Cut(s, " ")
	if !ok || st == "" || rest == "" || (rest[0] != 's' && rest[0] != 'd') || rest[0] == 'd' && len(rest) > 1 {
		return Record{}, false
	}
	return Record{Stamp: st, Value: rest[1:], Removed: rest[0] == 'd'}, true
}

// same reports whether r holds value (removed: the removal).
func same(r Record, value string, removed bool) bool {
	return r.Removed == removed && (removed || r.Value == value)
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
// answers, and a removal is never inferred from Redis's silence.
//
// With ReplicatorOptions.Records, the records and the clock's high-water
// mark are also kept in the instance's database (decision 221): a local
// edit's record in the edit's own transaction (Stamp and Stamped, which
// the store calls), the records learned from Redis once per sync,
// before they are applied. Load reads them back before anything is
// stamped, so that a restart forgets neither a tombstone nor which edit
// is the newer, and stamps never go backwards. Its methods are safe for
// concurrent use; Run does the work.
type Replicator struct {
	b    *Backend
	opts ReplicatorOptions
	kick chan struct{}

	// load runs Load's work once.
	load    sync.Once
	loadErr error

	mu      sync.Mutex
	known   map[string]Record // every record this instance knows
	unsaved map[string]bool   // the fields of known not yet in Records
	lastMS  int64
	ctr     int64
	applied int64
	last    lastRead
	lastErr time.Time
	// reads and peeks count the full reads and the peeks (for tests).
	reads, peeks atomic.Int64
	// lastRefused is when shared records that are not fields were last
	// logged.
	lastRefused time.Time
}

// NewReplicator returns a Replicator over b's Redis.
func (b *Backend) NewReplicator(o ReplicatorOptions) *Replicator {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Replicator{b: b, opts: o, kick: make(chan struct{}, 1), known: map[string]Record{}, unsaved: map[string]bool{}}
}

// maxCtr is the greatest counter a stamp's six digits hold.
const maxCtr = 999_999

// stampLocked returns a new stamp, greater than every stamp this instance
// has made or seen. Past the counter's six digits (a million edits within
// one millisecond, or while a stamp from a clock far ahead holds the
// milliseconds), the milliseconds move on by one: stamps compare as
// strings, and a seventh digit would sort below.
func (r *Replicator) stampLocked() string {
	ms := r.opts.Now().UnixMilli()
	switch {
	case ms > r.lastMS:
		r.lastMS, r.ctr = ms, 0
	case r.ctr < maxCtr:
		r.ctr++
	default:
		r.lastMS, r.ctr = r.lastMS+1, 0
	}
	return r.clockLocked()
}

// clockLocked returns the clock's high-water mark as a stamp: the greatest
// this instance has made or seen.
func (r *Replicator) clockLocked() string { return fmtStamp(r.lastMS, r.ctr, r.b.inst) }

func fmtStamp(ms, ctr int64, inst string) string {
	return fmt.Sprintf("%013d.%06d.%s", ms, ctr, inst)
}

// parseStamp returns a stamp's milliseconds and counter: 13 digits, a
// dot, 6 digits, a dot and the instance, as fmtStamp writes them (only
// stamps of that width compare as strings in their order).
func parseStamp(st string) (ms, ctr int64, ok bool) {
	m, rest, ok1 := strings.Cut(st, ".")
	c, _, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(m) != 13 || len(c) != 6 || !digits(m) || !digits(c) {
		return 0, 0, false
	}
	n, _ := strconv.ParseInt(m, 10, 64)
	k, _ := strconv.ParseInt(c, 10, 64)
	return n, k, true
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// seeLocked moves the clock past stamp st, so that an edit made here after
// this instance took st wins over it.
func (r *Replicator) seeLocked(st string) bool {
	n, k, ok := parseStamp(st)
	if !ok {
		return false
	}
	if n > r.lastMS || n == r.lastMS && k > r.ctr {
		r.lastMS, r.ctr = n, k
	}
	return true
}

// Load reads the records kept in the database (ReplicatorOptions.Records)
// and gives the fields of the local state that have none the lowest stamp.
// It must run before the first edit is stamped (the daemon calls it before
// it serves); Run calls it if it has not run. A record that cannot be read
// was left out by the store; one that is not a field is left out here,
// logged: either is a field without a record, never an error of the start.
// It runs once; later calls return the first one's error.
func (r *Replicator) Load(ctx context.Context) error {
	r.load.Do(func() { r.loadErr = r.loadOnce(ctx) })
	return r.loadErr
}

func (r *Replicator) loadOnce(ctx context.Context) error {
	var recs map[string]Record
	var clock string
	if r.opts.Records != nil {
		var err error
		if recs, clock, err = r.opts.Records.LoadRecords(ctx); err != nil {
			r.adopt()
			return fmt.Errorf("live records: %w", err)
		}
	}
	r.mu.Lock()
	if clock != "" && !r.seeLocked(clock) {
		r.b.log.Warn("the live records' clock is not a stamp: left out", "clock", clock)
	}
	for _, f := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[f]
		if err := r.check(f, rec); err != nil {
			r.b.log.Warn("a kept live record is not one limiterd writes: left out (the field is one without a record)", "field", f, "err", err)
			continue
		}
		r.seeLocked(rec.Stamp)
		r.known[f] = rec
	}
	loaded := len(r.known)
	r.mu.Unlock()
	if len(recs) > 0 {
		r.b.log.Info("live records loaded", "records", loaded)
	}
	r.adopt()
	return nil
}

// check refuses a record that cannot be a field's (ReplicatorOptions.Check)
// or whose stamp is not one.
func (r *Replicator) check(f string, rec Record) error {
	if _, _, ok := parseStamp(rec.Stamp); !ok {
		return fmt.Errorf("stamp %q", rec.Stamp)
	}
	if r.opts.Check != nil {
		return r.opts.Check(f, rec.Value, rec.Removed)
	}
	return nil
}

// maxAhead is how far ahead of this instance's clock a shared record's
// stamp may be: a day, far beyond any clock skew an edit could carry. A
// record from further ahead would win over every edit until that time
// and, kept, hold the clock there: a clock set years ahead, or a record
// planted in Redis, is refused instead (decision 221).
const maxAhead = 24 * time.Hour

// checkAhead refuses a stamp more than maxAhead past this instance's
// clock.
func (r *Replicator) checkAhead(st string) error {
	ms, _, _ := parseStamp(st)
	now := r.opts.Now()
	if ahead := time.Duration(ms-now.UnixMilli()) * time.Millisecond; ahead > maxAhead {
		return fmt.Errorf("stamp %s is %s ahead of this instance's clock (%s), more than %s", st, ahead.Round(time.Second), now.UTC().Format(time.RFC3339), maxAhead)
	}
	return nil
}

// Records returns a copy of every record this instance knows, by field.
func (r *Replicator) Records() map[string]Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.known)
}

// Stamp returns the record the store keeps with an edit of field to value
// (removed: its removal), and the clock (the store's Recorder): the record this
// instance holds when it already says so (an edit of another instance
// being applied here keeps its stamp), else one with a new stamp, which
// this instance takes once the edit commits (Stamped).
func (r *Replicator) Stamp(field, value string, removed bool) (Record, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.known[field]; ok && same(cur, value, removed) {
		return cur, r.clockLocked()
	}
	if removed {
		value = ""
	}
	rec := Record{Stamp: r.stampLocked(), Value: value, Removed: removed}
	return rec, r.clockLocked()
}

// Stamped takes the record of an edit the store committed with it
// (the store's Recorder), unless a newer one for its field came meanwhile; Run
// publishes it.
func (r *Replicator) Stamped(field string, rec Record) {
	r.mu.Lock()
	if cur, ok := r.known[field]; !ok || rec.Newer(cur) || cur == rec {
		r.known[field] = rec
		delete(r.unsaved, field)
	}
	r.mu.Unlock()
	r.poke()
}

func (r *Replicator) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Publish hears of a local edit (old and new states, as fields): each
// field it changed gets a record with a new stamp, unless the store
// already gave it one (Stamp), and Run publishes it. The records it
// stamps are kept in Records before it returns (the edit is acknowledged
// after); it never waits for Redis.
func (r *Replicator) Publish(old, new map[string]string) {
	if maps.Equal(old, new) {
		return
	}
	r.mu.Lock()
	stamped := false
	for f := range unionFields(old, new) {
		ov, ook := old[f]
		nv, nok := new[f]
		cur, known := r.known[f]
		switch {
		case nok && (!ook || ov != nv):
			if !known || !same(cur, nv, false) {
				r.known[f] = Record{Stamp: r.stampLocked(), Value: nv}
				r.unsaved[f], stamped = true, true
			}
		case ook && !nok:
			if !known || !same(cur, "", true) {
				r.known[f] = Record{Stamp: r.stampLocked(), Removed: true}
				r.unsaved[f], stamped = true, true
			}
		}
	}
	r.mu.Unlock()
	if stamped {
		r.save(context.Background())
	}
	r.poke()
}

// save keeps the records not yet kept in Records (nil: nothing to do), in
// one transaction, with the clock.
func (r *Replicator) save(ctx context.Context) {
	if r.opts.Records == nil {
		r.mu.Lock()
		clear(r.unsaved) // nowhere to keep them
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	if len(r.unsaved) == 0 {
		r.mu.Unlock()
		return
	}
	batch := make(map[string]Record, len(r.unsaved))
	for f := range r.unsaved {
		batch[f] = r.known[f]
	}
	clock := r.clockLocked()
	r.mu.Unlock()
	// Not under r.mu: the store calls Stamp inside its transactions.
	if err := r.opts.Records.SaveRecords(ctx, batch, clock); err != nil {
		r.failed("keeping the live records in the database (kept in memory, saved at the next sync)", err)
		return
	}
	r.mu.Lock()
	for f, rec := range batch {
		if r.known[f] == rec {
			delete(r.unsaved, f)
		}
	}
	r.mu.Unlock()
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
			r.known[f] = Record{Stamp: fmtStamp(0, 0, r.b.inst), Value: v}
		}
	}
}

// Run subscribes to the channel and keeps this instance's live state and
// the shared one converging until ctx ends.
func (r *Replicator) Run(ctx context.Context) {
	if err := r.Load(ctx); err != nil {
		r.b.log.Error("live records not loaded: the fields of this instance's live state have the lowest stamp", "err", err)
	}
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
			r.poll(ctx)
		}
	}
}

// due reports whether a message last logged at *last may be logged
// again (at most once in 10 s), and if so moves *last to now.
func (r *Replicator) due(last *time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(*last) < 10*time.Second {
		return false
	}
	*last = time.Now()
	return true
}

// failed logs a replication failure, at most once in 10 s.
func (r *Replicator) failed(what string, err error) {
	if r.due(&r.lastErr) {
		r.b.log.Warn("live edits not replicated: "+what+" (they apply here and are published when redis answers)", "err", err)
	}
}

// fullReadEvery bounds how long a poll goes on trusting the version and
// the number of records: a record written into Redis by hand, without
// the merge script's version bump, is read within it.
const fullReadEvery = time.Minute

// lastRead is what the last sync read and whether it left anything to do.
type lastRead struct {
	ver, count int64
	at         time.Time
	clean      bool
}

// poll is the periodic sync: a full one when the last left something to
// do, the last full read is fullReadEvery old, a record is not yet kept
// in the database, or this instance's live state is not what its records
// say; else only when Redis's version or number of records moved since
// the last full read (a message missed, Redis restarted or flushed, the
// records deleted). A fleet at rest thus costs Redis a GET and an HLEN
// per instance and second, not a read of every record, during which Redis
// does nothing else (milliseconds with thousands of deny entries).
func (r *Replicator) poll(ctx context.Context) {
	r.mu.Lock()
	last, unsaved := r.last, len(r.unsaved)
	r.mu.Unlock()
	if !last.clean || unsaved > 0 || time.Since(last.at) >= fullReadEvery || !r.applies() {
		r.sync(ctx)
		return
	}
	octx, cancel := context.WithTimeout(ctx, max(r.b.opts.Timeout, time.Second))
	defer cancel()
	ver, n, err := r.peek(octx)
	if err != nil {
		r.failed("reading the shared live state's version", err)
		r.mu.Lock()
		r.last.clean = false // a full sync once Redis answers
		r.mu.Unlock()
		return
	}
	if ver != last.ver || n != last.count {
		r.sync(ctx)
	}
}

// applies reports whether this instance's live state holds exactly the
// fields its records say are set, with their values.
func (r *Replicator) applies() bool {
	local := r.opts.Local()
	r.mu.Lock()
	defer r.mu.Unlock()
	set := 0
	for f, rec := range r.known {
		if rec.Removed {
			continue
		}
		if v, ok := local[f]; !ok || v != rec.Value {
			return false
		}
		set++
	}
	return set == len(local)
}

// sync reads the shared records, takes the newer ones (kept in Records
// first) into this instance's live state, and writes back the records of
// its own Redis lacks or holds older.
func (r *Replicator) sync(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, max(r.b.opts.Timeout, time.Second))
	defer cancel()
	// What a failed save left, and records stamped without the store.
	r.save(ctx)
	ver, count, shared, refused, err := r.read(octx)
	if err != nil {
		r.failed("reading the shared live state", err)
		r.mu.Lock()
		r.last.clean = false
		r.mu.Unlock()
		return
	}
	// clean: nothing left to do, Redis holding count records at version
	// ver as read; a poll then reads the records again only once either
	// changes (poll).
	clean := true
	defer func() {
		r.mu.Lock()
		r.last = lastRead{ver: ver, count: count, at: time.Now(), clean: clean}
		r.mu.Unlock()
	}()
	r.mu.Lock()
	changed := false
	for f, rec := range shared {
		r.seeLocked(rec.Stamp)
		if cur, ok := r.known[f]; !ok || rec.Newer(cur) {
			r.known[f] = rec
			r.unsaved[f] = true
			changed = true
		}
	}
	var push []any
	for _, f := range slices.Sorted(maps.Keys(r.known)) {
		rec := r.known[f]
		if sh, ok := shared[f]; !ok || rec.Newer(sh) {
			if _, bad := refused[f]; !bad {
				push = append(push, f, encodeRecord(rec))
			}
		}
	}
	// A refused shared record would win over every record of its field
	// by its stamp: it is replaced by this instance's, if unchanged since
	// it was read.
	var replace [][3]string
	for _, f := range slices.Sorted(maps.Keys(refused)) {
		if rec, ok := r.known[f]; ok {
			replace = append(replace, [3]string{f, refused[f], encodeRecord(rec)})
		}
	}
	desired := map[string]string{}
	for f, rec := range r.known {
		if !rec.Removed {
			desired[f] = rec.Value
		}
	}
	r.mu.Unlock()
	if changed {
		// Kept before they apply: a restart meanwhile still knows them.
		r.save(ctx)
	}
	if changed || !maps.Equal(desired, r.opts.Local()) {
		err := r.opts.Apply(ctx, func(local map[string]string) map[string]string {
			r.mu.Lock()
			defer r.mu.Unlock()
			out := make(map[string]string, len(r.known))
			for f, v := range local {
				if _, ok := r.known[f]; !ok {
					r.known[f] = Record{Stamp: fmtStamp(0, 0, r.b.inst), Value: v}
				}
			}
			for f, rec := range r.known {
				if !rec.Removed {
					out[f] = rec.Value
				}
			}
			return out
		})
		if err != nil {
			clean = false
			r.failed(fmt.Sprintf("the shared live state (version %d) does not apply over this instance's config file: keeping this instance's", ver), err)
		} else {
			r.b.log.Info("live state brought up to the shared one", "version", ver)
		}
	}
	r.mu.Lock()
	r.applied = ver
	r.mu.Unlock()
	for _, x := range replace {
		clean = false // read back at the next poll
		if _, err := r.b.t.runOne(octx, scriptCAS, []string{keyCfgState}, x[0], x[1], x[2]); err != nil {
			r.failed("replacing a refused shared record", err)
			break
		}
	}
	if len(push) == 0 {
		return
	}
	clean = false // the records pushed: read back at the next poll
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

// read returns the shared version (0: none), the number of records in
// Redis, and the records, with those it refused (not ones limiterd writes,
// or stamped too far ahead) as they are in Redis, by field. One MULTI of
// GET and HGETALL: the version and the records at once, without a script
// copying every record into a Lua table, which took Redis three to five
// times as long (docs/benchmarks.md, "Reading the live edits").
func (r *Replicator) read(ctx context.Context) (int64, int64, map[string]Record, map[string]string, error) {
	var ver *redis.StringCmd
	var all *redis.MapStringStringCmd
	r.reads.Add(1)
	r.b.t.roundTrips.Add(1)
	r.b.t.commands.Add(2)
	if _, err := r.b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ver, all = p.Get(ctx, keyCfgVersion), p.HGetAll(ctx, keyCfgState)
		return nil
	}); err != nil && err != redis.Nil {
		return 0, 0, nil, nil, err
	}
	v := int64(0)
	if s, err := ver.Result(); err == nil {
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			return 0, 0, nil, nil, fmt.Errorf("%w: the live state's version %q", ErrReply, s)
		}
		v = n
	} else if err != redis.Nil {
		return 0, 0, nil, nil, err
	}
	fields, err := all.Result()
	if err != nil {
		return 0, 0, nil, nil, err
	}
	recs := make(map[string]Record, len(fields))
	var bad map[string]string
	refused, first := 0, ""
	for f, val := range fields {
		rec, ok := decodeRecord(val)
		err := errors.New("not a record")
		if ok {
			err = r.check(f, rec)
		}
		if err == nil {
			err = r.checkAhead(rec.Stamp)
		}
		if err != nil {
			// Left out alone: the other records still apply, and this
			// one is neither taken nor kept.
			if refused++; first == "" {
				first = fmt.Sprintf("%q: %v", f, err)
			}
			if bad == nil {
				bad = map[string]string{}
			}
			bad[f] = val
			continue
		}
		recs[f] = rec
	}
	if refused > 0 {
		r.refused(refused, first)
	}
	return v, int64(len(fields)), recs, bad, nil
}

// peek returns the shared version and the number of records in Redis,
// at once (a script of GET and HLEN).
func (r *Replicator) peek(ctx context.Context) (ver, n int64, err error) {
	r.peeks.Add(1)
	v, err := r.b.t.runOne(ctx, scriptPeek, []string{keyCfgVersion, keyCfgState})
	if err != nil {
		return 0, 0, err
	}
	a, err := ints(v)
	if err != nil {
		return 0, 0, err
	}
	if len(a) != 2 {
		return 0, 0, fmt.Errorf("%w: %d integers from the live state's peek, want 2", ErrReply, len(a))
	}
	return a[0], a[1], nil
}

// refused logs shared records that are not ones limiterd writes, at most
// once in 10 s.
func (r *Replicator) refused(n int, first string) {
	if r.due(&r.lastRefused) {
		r.b.log.Warn("shared live records that are not ones limiterd writes: ignored", "records", n, "first", first)
	}
}
