package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// slotKeeper looks after this instance's in-flight slots in Redis (the
// members of a (peer, group)'s slot ZSET, scored by their lease expiry):
// it names new ones, releases them in batches off the response's path
// (a release that cannot be sent is left to its lease), and renews the
// leases of the open ones every third of the lease. It is safe for
// concurrent use; run does the work.
type slotKeeper struct {
	b     *Backend
	seq   atomic.Uint64
	lease int64 // ms
	rel   chan slot
	// syncRelease (tests) releases on the caller's goroutine.
	syncRelease bool

	dropped atomic.Uint64
}

func newSlotKeeper(b *Backend) *slotKeeper {
	return &slotKeeper{b: b, lease: b.opts.Lease.Milliseconds(), rel: make(chan slot, queueLen)}
}

// member returns a new slot id, unique across instances.
func (k *slotKeeper) member() string {
	return k.b.inst + ":" + strconv.FormatUint(k.seq.Add(1), 36)
}

func (k *slotKeeper) release(sl slot) {
	if k.syncRelease {
		k.releaseBatch(context.Background(), []slot{sl})
		return
	}
	select {
	case k.rel <- sl:
	default:
		// Not renewed any more: it drops out when its lease ends.
		k.dropped.Add(1)
	}
}

// run releases slots in batches and renews the leases of the open ones
// until ctx ends.
func (k *slotKeeper) run(ctx context.Context) {
	renew := time.NewTicker(time.Duration(k.lease) * time.Millisecond / 3)
	defer renew.Stop()
	batch := make([]slot, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case sl := <-k.rel:
			batch = append(batch[:0], sl)
		fill:
			for len(batch) < maxBatch {
				select {
				case sl := <-k.rel:
					batch = append(batch, sl)
				default:
					break fill
				}
			}
			k.releaseBatch(ctx, batch)
		case <-renew.C:
			k.renew(ctx)
		}
	}
}

// releaseBatch removes released slots from Redis, one pipeline of ZREMs.
// A failure leaves them to their lease (they are no longer renewed).
func (k *slotKeeper) releaseBatch(ctx context.Context, batch []slot) {
	if !k.b.h.up.Load() {
		k.dropped.Add(uint64(len(batch)))
		return
	}
	rctx, cancel := context.WithTimeout(ctx, max(k.b.opts.Timeout, time.Second))
	defer cancel()
	pipe := k.b.rdb.Pipeline()
	for _, sl := range batch {
		pipe.ZRem(rctx, sl.key, sl.member)
	}
	_, err := pipe.Exec(rctx)
	k.b.t.roundTrips.Add(1)
	k.b.t.commands.Add(uint64(len(batch)))
	if err != nil {
		k.dropped.Add(uint64(len(batch)))
		k.b.h.fail(classify(err), fmt.Errorf("releasing in-flight slots: %w", err))
	}
}

// renew extends the lease of every slot this instance holds.
func (k *slotKeeper) renew(ctx context.Context) {
	if !k.b.h.up.Load() {
		return
	}
	byKey := map[string][]any{}
	k.b.slots.each(func(sl *slot) {
		if sl.key != "" {
			byKey[sl.key] = append(byKey[sl.key], sl.member)
		}
	})
	if len(byKey) == 0 {
		return
	}
	clock := k.b.clockArg()
	calls := make([]*call, 0, len(byKey))
	for key, members := range byKey {
		for len(members) > 0 {
			n := min(len(members), 500)
			args := append([]any{clock, k.lease}, members[:n]...)
			calls = append(calls, &call{s: scriptRenew, keys: []string{key}, args: args})
			members = members[n:]
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(k.lease)*time.Millisecond/3)
	defer cancel()
	for len(calls) > 0 {
		n := min(len(calls), 512)
		k.b.t.batch(rctx, calls[:n])
		for _, c := range calls[:n] {
			if c.err != nil {
				k.b.h.fail(classify(c.err), fmt.Errorf("renewing the leases of in-flight slots: %w", c.err))
				return
			}
		}
		calls = calls[n:]
	}
}
