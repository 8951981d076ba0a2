package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// releaseDelay is the longest a release waits before it is sent on its
// own; meanwhile the next decision of the same key on this instance
// carries it (and applies it first), so that this instance's own
// decisions always count it. A release waits at least half of it: sent at
// the second flush after it, not the first (a release made just before a
// flush would go alone where the key's next decision, a few ms later,
// carries it for nothing).
const releaseDelay = 100 * time.Millisecond

// slotKeeper looks after this instance's requests in flight in Redis (its
// count in each (peer, group)'s state, under its lease): it names slots
// (the window timestamps' members), releases them off the response's path
// — carried by the next decision of the same key, or sent within
// releaseDelay, the releases of one key as one entry (a release that
// cannot be sent is left to the lease) —, renews the lease
// of the keys it holds requests on every third of the lease, and repairs
// the keys found of the wrong type or corrupt. It is safe for concurrent
// use; run does the work.
type slotKeeper struct {
	b     *Backend
	seq   atomic.Uint64
	lease int64 // ms
	fix   chan []string

	pmu     sync.Mutex
	pending map[string]int // releases not sent yet, by key: since the last flush
	older   map[string]int // … and since the one before (sent at the next)
	// syncRelease (tests) releases on the caller's goroutine.
	syncRelease bool

	dropped  atomic.Uint64
	repaired atomic.Uint64
}

func newSlotKeeper(b *Backend) *slotKeeper {
	return &slotKeeper{b: b, lease: b.opts.Lease.Milliseconds(), fix: make(chan []string, 64), pending: map[string]int{}, older: map[string]int{}}
}

func (k *slotKeeper) release(sl slot) {
	if k.syncRelease {
		k.releaseBatch(context.Background(), []slot{sl})
		return
	}
	k.pmu.Lock()
	k.pending[sl.key]++
	k.pmu.Unlock()
}

// take returns the releases of key not sent yet, for a decision of that
// key to carry.
func (k *slotKeeper) take(key string) int {
	k.pmu.Lock()
	defer k.pmu.Unlock()
	n := k.pending[key] + k.older[key]
	if n > 0 {
		delete(k.pending, key)
		delete(k.older, key)
	}
	return n
}

// untake puts back the releases a decision took, when its call was
// certainly not sent (err).
func (k *slotKeeper) untake(key string, n int, err error) {
	if n == 0 || !errors.Is(err, ErrBusy) {
		return
	}
	k.pmu.Lock()
	k.pending[key] += n
	k.pmu.Unlock()
}

// repair has the keys of one (peer, group) deleted, off the request's
// path: its next decision starts from a fresh state.
func (k *slotKeeper) repair(keys []string) {
	select {
	case k.fix <- keys:
	default: // a burst of them: the next failing decision asks again
	}
}

// run releases slots in batches, repairs keys and renews the leases until
// ctx ends.
func (k *slotKeeper) run(ctx context.Context) {
	renew := time.NewTicker(time.Duration(k.lease) * time.Millisecond / 3)
	defer renew.Stop()
	flush := time.NewTicker(releaseDelay / 2)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-flush.C:
			k.pmu.Lock()
			var batch []slot
			for key, n := range k.older {
				for range n {
					batch = append(batch, slot{key: key})
				}
			}
			clear(k.older)
			k.older, k.pending = k.pending, k.older
			k.pmu.Unlock()
			for len(batch) > 0 {
				n := min(len(batch), 64*maxBatch)
				k.releaseBatch(ctx, batch[:n])
				batch = batch[n:]
			}
		case keys := <-k.fix:
			k.deleteKeys(ctx, keys)
		case <-renew.C:
			k.renew(ctx)
		}
	}
}

// deleteKeys repairs one (peer, group)'s keys by deleting them.
func (k *slotKeeper) deleteKeys(ctx context.Context, keys []string) {
	if !k.b.h.up.Load() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, max(k.b.opts.Timeout, time.Second))
	defer cancel()
	k.b.t.roundTrips.Add(1)
	k.b.t.commands.Add(1)
	if err := k.b.rdb.Del(rctx, keys...).Err(); err != nil {
		k.b.fail(keys[0], err, fmt.Errorf("repairing %v: %w", keys, err))
		return
	}
	k.repaired.Add(1)
	k.b.log.Warn("repaired a (peer, group)'s state in redis: deleted, its next decision starts afresh", "keys", keys)
}

// releaseBatch gives back released slots in Redis: one release entry per
// key, in batch script calls. A failure leaves them to their lease (they
// are no longer renewed).
func (k *slotKeeper) releaseBatch(ctx context.Context, batch []slot) {
	if !k.b.h.up.Load() {
		k.dropped.Add(uint64(len(batch)))
		return
	}
	n := map[string]int{}
	var order []string
	for _, sl := range batch {
		if k.b.cut.keyDown(sl.key) {
			k.dropped.Add(1) // its master does not answer (decision 236)
			continue
		}
		if n[sl.key] == 0 {
			order = append(order, sl.key)
		}
		n[sl.key]++
	}
	calls := make([]*call, len(order))
	for i, key := range order {
		e := &entry{op: "r", keys: []string{key}, args: []any{n[key]}}
		calls[i] = &call{ent: e, keys: e.keys}
	}
	rctx, cancel := context.WithTimeout(ctx, max(k.b.opts.Timeout, time.Second))
	defer cancel()
	k.b.t.batch(rctx, calls)
	for i, c := range calls {
		if c.err != nil {
			k.dropped.Add(uint64(n[order[i]]))
			k.b.fail(order[i], c.err, fmt.Errorf("releasing in-flight slots: %w", c.err))
			if !k.b.keyScoped(c.err) {
				return // the whole Redis's failure: told once
			}
		}
	}
}

// renew extends this instance's lease on every key it holds requests on.
func (k *slotKeeper) renew(ctx context.Context) {
	if !k.b.h.up.Load() {
		return
	}
	keys := map[string]bool{}
	k.b.slots.each(func(sl *slot) {
		if sl.key != "" && !k.b.cut.keyDown(sl.key) {
			keys[sl.key] = true
		}
	})
	if len(keys) == 0 {
		return
	}
	calls := make([]*call, 0, len(keys))
	for key := range keys {
		e := &entry{op: "n", keys: []string{key}}
		calls = append(calls, &call{ent: e, keys: e.keys})
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(k.lease)*time.Millisecond/3)
	defer cancel()
	for len(calls) > 0 {
		n := min(len(calls), 512)
		k.b.t.batch(rctx, calls[:n])
		for _, c := range calls[:n] {
			if c.err != nil {
				k.b.fail(c.keys[0], c.err, fmt.Errorf("renewing the leases of in-flight slots: %w", c.err))
				// (a corrupt key is being repaired, a tripped slot waits
				// for its master: the others go on)
				if !k.b.keyScoped(c.err) {
					return
				}
			}
		}
		calls = calls[n:]
	}
}
