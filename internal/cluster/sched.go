package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/limiter"
)

// Shared tick schedules. Each group's leaky and cleanup ticks fall on one
// timeline for every instance: limiter.Schedules stored once in Redis
// (the hash ld:sched, field = group name), seeded by the first instance
// that needs them from its own (persisted) schedule, so that the phase
// survives a switch from the local backend; retimed, when an operator
// changes an interval, by the first instance that sees the change, as the
// local backend retimes its own (the new interval from the next tick of
// the old one). A decision carries the schedule as script arguments:
// nothing is read from a key outside the (peer, group)'s hash tag.

// sharedSched is one group's shared schedules, as cached by an instance,
// with the group's algorithm and its generation: the key names of the
// group's state carry the generation, which a change of algorithm moves
// on, so that the state of the old algorithm is dropped at once on every
// instance (docs/limiting.md, "Changing algorithm or limits"; decision
// 146) and expires by its TTL.
type sharedSched struct {
	name    string // the group's
	version uint64 // the limiter.Group version it was checked for
	Leaky   limiter.Schedule
	Cleanup limiter.Schedule
	algo    string
	gen     string // the generation, as key names carry it
	raw     string // as stored in Redis
	args    [12]any
	// switches is schedules.switches of the group when it was read.
	switches uint64
}

type storedSched struct {
	Leaky     limiter.Schedule `json:"leaky"`
	Cleanup   limiter.Schedule `json:"cleanup"`
	Algorithm string           `json:"algorithm,omitempty"`
	Gen       int64            `json:"generation,omitempty"`
}

// target returns the interval s runs at once any pending change applies.
func target(s limiter.Schedule) int64 {
	if s.Switch != 0 {
		return s.NextInterval
	}
	return s.Interval
}

func (s *sharedSched) fits(g *limiter.Group) bool {
	return target(s.Leaky) == g.LeakyTickInterval && target(s.Cleanup) == g.CleanupInterval && s.algo == g.Algorithm.String()
}

func schedArgs(s limiter.Schedule) [6]any {
	return [6]any{s.Anchor, s.Index, s.Interval, s.Switch, s.SwitchIndex, s.NextInterval}
}

func decodeSched(raw string) (*sharedSched, error) {
	var st storedSched
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %v", ErrReply, raw, err)
	}
	if !st.Leaky.Valid() || !st.Cleanup.Valid() {
		return nil, fmt.Errorf("%w: invalid schedule %q", ErrReply, raw)
	}
	if st.Algorithm == "" {
		st.Algorithm = "hybrid"
	}
	s := &sharedSched{Leaky: st.Leaky, Cleanup: st.Cleanup, algo: st.Algorithm, gen: strconv.FormatInt(st.Gen, 10), raw: raw}
	l, c := schedArgs(st.Leaky), schedArgs(st.Cleanup)
	copy(s.args[:6], l[:])
	copy(s.args[6:], c[:])
	return s, nil
}

// schedules caches the shared schedules of every group. It is safe for
// concurrent use.
type schedules struct {
	t   *transport
	now func(ctx context.Context) (int64, error) // Redis time
	tab [limiter.MaxGroups]atomic.Pointer[sharedSched]
	mu  [limiter.MaxGroups]sync.Mutex
	// failed is the last failure to establish a group's schedules: the
	// decisions that waited for it fail at once rather than try in turn,
	// each for a whole timeout.
	failed [limiter.MaxGroups]atomic.Pointer[schedFailure]
	// switches counts the changes of each group's algorithm this instance
	// was configured with (Backend.Reconfigured): each moves the shared
	// generation on once, even a change undone before any decision.
	switches [limiter.MaxGroups]atomic.Uint64
	// params are the groups' entries' shared arguments, made once per
	// settings version and schedule.
	params paramsCache
}

type schedFailure struct {
	at  time.Time
	err error
}

// forDecision returns g's shared schedules for a request that must have its
// answer by deadline: the cached ones, or those get establishes by then.
func (s *schedules) forDecision(g *limiter.Group, deadline time.Time) (*sharedSched, error) {
	if c := s.tab[g.ID].Load(); c != nil && c.version == g.Version {
		return c, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c, err := s.get(ctx, g)
	if err != nil {
		return nil, &scheduleError{err}
	}
	return c, nil
}

// scheduleError is a decision's failure to read or establish its group's
// shared schedules: a failure of ld:sched, not of the (peer, group)'s
// keys (on a Redis Cluster, they are on different masters).
type scheduleError struct{ err error }

func (e *scheduleError) Error() string { return "the group's shared tick schedule: " + e.err.Error() }
func (e *scheduleError) Unwrap() error { return e.err }

// get returns group g's shared schedules, establishing them in Redis when
// this instance has none that fit g's intervals (a round trip or three,
// bounded by ctx).
func (s *schedules) get(ctx context.Context, g *limiter.Group) (*sharedSched, error) {
	if c := s.tab[g.ID].Load(); c != nil && c.version == g.Version {
		return c, nil
	}
	s.mu[g.ID].Lock()
	defer s.mu[g.ID].Unlock()
	c := s.tab[g.ID].Load()
	if c != nil && c.version == g.Version {
		return c, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: waiting for the group's shared schedule", ErrTimeout)
	}
	switches := s.switches[g.ID].Load()
	if c != nil && c.fits(g) && c.switches == switches {
		n := *c
		n.version = g.Version
		s.tab[g.ID].Store(&n)
		return &n, nil
	}
	if f := s.failed[g.ID].Load(); f != nil && time.Since(f.at) < s.t.timeout {
		return nil, f.err
	}
	// The algorithm was changed (and maybe back) since this instance read
	// the generation it knows: the state of that generation goes.
	drop := ""
	if c != nil && c.switches != switches {
		drop = c.gen
	}
	n, err := s.establish(ctx, g, drop)
	if err != nil {
		s.failed[g.ID].Store(&schedFailure{time.Now(), err})
		return nil, err
	}
	n.name, n.version, n.switches = g.Name, g.Version, switches
	s.tab[g.ID].Store(n)
	return n, nil
}

// establish reads g's schedules from Redis, seeding or retiming them when
// they do not fit g, and moving the generation on when the algorithm is
// not the stored one or when drop is the stored generation (compare and
// set: the first instance wins, the others take its result).
func (s *schedules) establish(ctx context.Context, g *limiter.Group, drop string) (*sharedSched, error) {
	for range 4 {
		s.t.roundTrips.Add(1)
		s.t.commands.Add(1)
		raw, err := s.t.rdb.HGet(ctx, keySchedules, g.Name).Result()
		var proposal storedSched
		switch {
		case err == redis.Nil:
			raw = ""
			proposal = storedSched{Leaky: g.Leaky, Cleanup: g.Cleanup, Algorithm: g.Algorithm.String()}
		case err != nil:
			return nil, err
		default:
			cur, err := decodeSched(raw)
			if err != nil {
				return nil, err
			}
			bump := cur.algo != g.Algorithm.String() || (drop != "" && cur.gen == drop)
			if cur.fits(g) && !bump {
				return cur, nil
			}
			now, err := s.now(ctx)
			if err != nil {
				return nil, err
			}
			gen, _ := strconv.ParseInt(cur.gen, 10, 64)
			if bump {
				gen++ // the old generation's state is dropped
			}
			proposal = storedSched{
				Leaky:     retime(cur.Leaky, g.Leaky, g.LeakyTickInterval, now),
				Cleanup:   retime(cur.Cleanup, g.Cleanup, g.CleanupInterval, now),
				Algorithm: g.Algorithm.String(),
				Gen:       gen,
			}
		}
		b, err := json.Marshal(proposal)
		if err != nil {
			return nil, err
		}
		v, err := s.t.runOne(ctx, scriptCAS, []string{keySchedules}, g.Name, raw, string(b))
		if err != nil {
			return nil, err
		}
		got, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %T from the schedule update", ErrReply, v)
		}
		n, err := decodeSched(got)
		if err != nil {
			return nil, err
		}
		if n.fits(g) && n.gen != drop {
			return n, nil
		}
		// Another instance changed it in between: look again.
	}
	return nil, fmt.Errorf("group %s: the shared tick schedule keeps changing (do the instances' configs differ?)", g.Name)
}

// retime returns the shared schedule cur changed to interval, as of now,
// following the changes this instance's own schedule local shows: its
// interval from its anchor (a settled change, or the interval the instance
// started with) and a pending switch, each from the tick of cur that
// follows it, as the local backend changes its own (the new interval from
// the next tick of the old one). When the two timelines agree (one
// instance, or instances started from one persisted schedule) the shared
// one changes at the very ticks the local one does.
func retime(cur, local limiter.Schedule, interval, now int64) limiter.Schedule {
	s := cur
	if local.Interval != target(s) && local.Anchor-1 <= now {
		s = s.Retimed(local.Anchor-1, local.Interval)
	}
	if local.Switch != 0 && local.NextInterval != target(s) && local.Switch-1 <= now {
		s = s.Retimed(local.Switch-1, local.NextInterval)
	}
	if target(s) != interval {
		s = s.Retimed(now, interval)
	}
	return s
}

// refresh reloads every cached group's schedules from Redis (another
// instance may have retimed them).
func (s *schedules) refresh(ctx context.Context) error {
	s.t.roundTrips.Add(1)
	s.t.commands.Add(1)
	all, err := s.t.rdb.HGetAll(ctx, keySchedules).Result()
	if err != nil {
		return err
	}
	for id := range s.tab {
		c := s.tab[id].Load()
		if c == nil {
			continue
		}
		raw, ok := all[c.name]
		if !ok || raw == c.raw {
			continue
		}
		n, err := decodeSched(raw)
		if err != nil {
			return err
		}
		// Keep it tied to the version it was checked for only when it still
		// fits; otherwise the next decision establishes afresh.
		n.name, n.version = c.name, c.version
		if !n.sameIntervals(c) {
			n.version = 0
		}
		s.tab[id].CompareAndSwap(c, n)
	}
	return nil
}

// sameIntervals reports whether n runs at the intervals c runs at, with
// the same algorithm.
func (n *sharedSched) sameIntervals(c *sharedSched) bool {
	return target(n.Leaky) == target(c.Leaky) && target(n.Cleanup) == target(c.Cleanup) && n.algo == c.algo
}

// redisTime returns Redis's clock in Unix ms.
func redisTime(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}
