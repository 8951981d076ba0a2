package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/bench"
	"github.com/redis/go-redis/v9"
)

// floorReq is one caller's decision waiting in the floor's queue.
type floorReq struct {
	key  string
	done chan error
}

// newFloor returns the batch_floor contender: callers queue their
// decision and two workers send whatever is queued (at most 64) as one
// EVALSHA of bench.BatchFloorScript with the arguments of as many gcra entries (the
// header, then per entry its op, count, params reference, release count and
// rescale flag, the group's params once), as internal/cluster's transport
// does; a caller waits for its answer at most the timeout.
func newFloor() contender {
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 12})
	sha, err := rdb.ScriptLoad(context.Background(), bench.BatchFloorScript).Result()
	if err != nil {
		panic(err)
	}
	q := make(chan *floorReq, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	var trips atomic.Int64
	for range 2 {
		go func() {
			batch := make([]*floorReq, 0, 64)
			for {
				select {
				case <-ctx.Done():
					return
				case r := <-q:
					batch = append(batch[:0], r)
				}
			fill:
				for len(batch) < 64 {
					select {
					case r := <-q:
						batch = append(batch, r)
					default:
						break fill
					}
				}
				keys := make([]string, len(batch))
				args := []any{"", "bench-inst", 10000, len(batch)}
				for i, r := range batch {
					keys[i] = r.key
					if i == 0 {
						args = append(args, "a", 9, 0, 2, 1_000_000, 1000, 1_000_000, 1<<30, "0", 0, 0)
					} else {
						args = append(args, "a", 3, 1, 0, 0)
					}
				}
				bctx, bcancel := context.WithTimeout(ctx, *timeout)
				pipe := rdb.Pipeline()
				cmd := pipe.EvalSha(bctx, sha, keys, args...)
				_, _ = pipe.Exec(bctx)
				bcancel()
				trips.Add(1)
				res, err := cmd.Result()
				if err == nil {
					if a, ok := res.([]any); !ok || len(a) != len(batch) {
						err = errors.New("short reply")
					}
				}
				for _, r := range batch {
					r.done <- err
				}
			}
		}()
	}
	var n atomic.Int64
	return contender{name: "batch_floor", ownDeadline: true, trips: trips.Load, cmds: trips.Load,
		close: func() { cancel(); rdb.Close() },
		decide: func(_ context.Context, i int) error {
			n.Add(1)
			r := &floorReq{key: "ld:{" + peers[i%len(peers)].Key.String() + "|general}:ps", done: make(chan error, 1)}
			select {
			case q <- r:
			default:
				return errors.New("busy")
			}
			t := time.NewTimer(*timeout)
			defer t.Stop()
			select {
			case err := <-r.done:
				return err
			case <-t.C:
				return errors.New("timeout")
			}
		}}
}
