package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/limiter"
)

// numSlots is the number of Redis Cluster hash slots.
const numSlots = 16384

// slotBreaker is the breaker of each hash slot of a Redis Cluster, beside
// the one of the whole Redis (decision 236). A master that stops, refuses
// connections, runs out of memory or is read-only while it fails over
// takes its slots' decisions to on_failure, not every peer's: the peers
// whose keys hash to the other masters' slots stay shared. A slot is
// tripped by a failure of that kind on one of its keys (and the backend's
// prober told to look at once whether any master answers: if none does,
// the whole Redis is down), and every slot of a master that the backend's
// probe finds not answering while the others do. One prober looks at the tripped slots — every 100 ms at first,
// backing off to 1 s — by the master that serves them now (a promoted
// replica counts), and closes those whose master answers. It is safe for
// concurrent use.
type slotBreaker struct {
	cc   *redis.ClusterClient
	log  *slog.Logger
	down [numSlots]atomic.Bool
	n    atomic.Int64 // slots tripped
	kick chan struct{}

	mu    sync.Mutex
	trips map[uint16]slotTrip
}

// slotTrip is why one slot is tripped: the key that failed, if any, and
// the failure.
type slotTrip struct {
	key    string
	since  time.Time
	reason string
}

func newSlotBreaker(cc *redis.ClusterClient, log *slog.Logger) *slotBreaker {
	return &slotBreaker{cc: cc, log: log, kick: make(chan struct{}, 1), trips: map[uint16]slotTrip{}}
}

// slotScoped reports whether a failure of kind says that a key's master is
// unwell rather than the whole Redis: refused or reset connections,
// CLUSTERDOWN for its slot, OOM, a read-only or loading node. Timeouts are
// not (a late answer on a busy host is not a dead master: they keep the
// rule of the backend's breaker), nor are authentication, TLS or script
// errors, which every master shares.
func slotScoped(kind string) bool {
	switch kind {
	case KindConnection, KindMemory, KindReadOnly:
		return true
	}
	return false
}

// isDown reports whether the slot of peer k's keys in group g is tripped.
// It costs one load while no slot is (and nothing outside Redis Cluster,
// where s is nil).
func (s *slotBreaker) isDown(k limiter.Key, g string) bool {
	if s == nil || s.n.Load() == 0 {
		return false
	}
	return s.down[keySlot(tagOf(k.Peer().String(), g))].Load()
}

// keyDown reports whether key's slot is tripped.
func (s *slotBreaker) keyDown(key string) bool {
	if s == nil || s.n.Load() == 0 {
		return false
	}
	return s.down[keySlot(key)].Load()
}

// tripKey trips key's slot, and reports whether it was not tripped yet.
func (s *slotBreaker) tripKey(key, kind string, err error) bool {
	return s.trip(keySlot(key), key, kind, err)
}

// trip trips slot (key, when known, is the key that failed), and reports
// whether it was not tripped yet.
func (s *slotBreaker) trip(slot uint16, key, kind string, err error) bool {
	if s.down[slot].Swap(true) {
		return false
	}
	s.mu.Lock()
	s.trips[slot] = slotTrip{key: key, since: time.Now(), reason: kind + ": " + err.Error()}
	s.mu.Unlock()
	if s.n.Add(1) == 1 {
		s.log.Error("a redis cluster master is unavailable: the peers whose keys it serves are decided as cluster.on_failure says until it answers; the others stay shared",
			"slot", slot, "kind", kind, "err", err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

// SlotsDown is the hash slots tripped, for people.
type SlotsDown struct {
	// Count is how many.
	Count int
	// Since is when the oldest was tripped.
	Since time.Time
	// Reason is the oldest trip's failure.
	Reason string
}

func (s *slotBreaker) state() SlotsDown {
	if s == nil || s.n.Load() == 0 {
		return SlotsDown{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var d SlotsDown
	for _, t := range s.trips {
		d.Count++
		if d.Since.IsZero() || t.since.Before(d.Since) {
			d.Since, d.Reason = t.since, t.reason
		}
	}
	return d
}

// probeLoop probes the tripped slots until ctx ends.
func (s *slotBreaker) probeLoop(ctx context.Context, timeout time.Duration) {
	const first, most = 100 * time.Millisecond, time.Second
	wait := first
	for {
		var tick <-chan time.Time
		var timer *time.Timer
		if s.n.Load() > 0 {
			timer = time.NewTimer(wait)
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.kick:
			if timer != nil {
				timer.Stop()
			}
			wait = first
			continue
		case <-tick:
		}
		pctx, cancel := context.WithTimeout(ctx, max(timeout, 500*time.Millisecond))
		closed := s.probe(pctx)
		cancel()
		if closed > 0 {
			wait = first
		} else {
			wait = min(2*wait, most)
		}
	}
}

// probe reads the slot map and asks the master that serves each tripped
// slot now (a replica promoted meanwhile counts) for a key of one of its
// tripped slots: the slots of each master that answers are closed (a
// master that answers PING but not for its keys, such as one restarted
// and not yet back in the cluster, does not count); a slot no master
// serves stays tripped. It returns the number of slots closed.
func (s *slotBreaker) probe(ctx context.Context) int {
	owners, err := s.owners(ctx)
	if err != nil {
		return 0
	}
	s.mu.Lock()
	groups := map[string][]uint16{}
	probeKey := map[string]string{}
	for slot, t := range s.trips {
		node := owners[slot]
		if node == "" {
			continue
		}
		groups[node] = append(groups[node], slot)
		if t.key != "" {
			probeKey[node] = t.key
		}
	}
	s.mu.Unlock()
	if len(groups) == 0 {
		return 0
	}
	for node, slots := range groups {
		if probeKey[node] == "" {
			probeKey[node] = keyInSlot(slots[0])
		}
	}
	var amu sync.Mutex
	answered := map[string]bool{}
	_ = s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		key, ok := probeKey[addr]
		if !ok {
			return nil
		}
		err := c.Exists(ctx, key).Err()
		if err == nil {
			amu.Lock()
			answered[addr] = true
			amu.Unlock()
		}
		return err
	})
	closed := 0
	for node, slots := range groups {
		if !answered[node] {
			continue
		}
		s.mu.Lock()
		for _, slot := range slots {
			if _, ok := s.trips[slot]; ok {
				delete(s.trips, slot)
				s.down[slot].Store(false)
				s.n.Add(-1)
				closed++
			}
		}
		left := len(s.trips)
		s.mu.Unlock()
		s.log.Info("a redis cluster master answers: the peers of its slots are shared again", "node", node, "slots", describeSlots(slots), "still_down", left)
	}
	return closed
}

// keyInSlot returns a key of the probe's whose hash slot is slot.
func keyInSlot(slot uint16) string {
	for i := 0; ; i++ {
		k := keyPrefix + "probe:{" + strconv.Itoa(i) + "}"
		if keySlot(k) == slot {
			return k
		}
	}
}

// owners returns the address of the master serving each slot, as the
// cluster says now ("" for a slot none serves).
func (s *slotBreaker) owners(ctx context.Context) (*[numSlots]string, error) {
	// The client's own map is re-read in the background too: decisions
	// are routed by it.
	s.cc.ReloadState(ctx)
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7.0, and 6.2 is supported
	ranges, err := s.cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out [numSlots]string
	for _, r := range ranges {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= numSlots {
			continue
		}
		for slot := r.Start; slot <= r.End; slot++ {
			out[slot] = r.Nodes[0].Addr
		}
	}
	return &out, nil
}

// tripNodes trips every slot the masters in failed serve (the backend's
// probe found them not answering while others did).
func (s *slotBreaker) tripNodes(ctx context.Context, failed map[string]error) {
	owners, err := s.owners(ctx)
	if err != nil {
		return
	}
	for slot, node := range owners {
		if err, ok := failed[node]; ok {
			s.trip(uint16(slot), "", classify(err), err)
		}
	}
}

// describeSlots lists slots for a log line: the first few, and how many.
func describeSlots(slots []uint16) string {
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	var b strings.Builder
	for i, s := range slots {
		if i == 8 {
			fmt.Fprintf(&b, " … (%d in all)", len(slots))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, s)
	}
	return b.String()
}
