package fleet

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Board is where the instances' summaries are kept: Redis in cluster mode
// (RedisBoard). Implementations must be safe for concurrent use.
type Board interface {
	// Put publishes instance id's summary for TTL, and returns the
	// board's clock as it wrote it (zero when unknown).
	Put(ctx context.Context, id string, summary []byte) (boardNow time.Time, err error)
	// List returns the summaries on the board, by instance id (at most
	// MaxInstances, the first by id; more is the count of the others),
	// and the board's clock.
	List(ctx context.Context) (boardNow time.Time, summaries map[string][]byte, more int, err error)
}

// Redis is the part of a go-redis client a RedisBoard uses: cluster mode's
// own client (redis.UniversalClient) has it, so that the summaries share
// its connections, its servers and their credentials.
type Redis interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// Keys of the board in Redis: one string per instance, living TTL, and the
// set of the instances that wrote one, which lives 10 TTL after the last
// write. Every key carries the hash tag {fleet}, so that one MGET reads
// them all on a Redis Cluster too; the prefix is cluster mode's
// (docs/cluster.md, "Keys in Redis").
const (
	keyIDs     = "ld:{fleet}:ids"
	keyPrefix  = "ld:{fleet}:i:"
	idsTTLMult = 10
)

// RedisBoard is a Board in Redis: a write is one round trip (TIME, SET
// with its TTL, SADD to the set of ids, its expiry), a read two (TIME and
// the ids, then one MGET). It is safe for concurrent use.
type RedisBoard struct {
	r Redis
}

// NewRedisBoard returns the Board kept in r.
func NewRedisBoard(r Redis) *RedisBoard { return &RedisBoard{r: r} }

// Put implements Board.
func (b *RedisBoard) Put(ctx context.Context, id string, summary []byte) (time.Time, error) {
	var tc *redis.TimeCmd
	_, err := b.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		tc = p.Time(ctx)
		p.Set(ctx, keyPrefix+id, summary, TTL)
		p.SAdd(ctx, keyIDs, id)
		p.PExpire(ctx, keyIDs, idsTTLMult*TTL)
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return tc.Val(), nil
}

// List implements Board. The ids whose summary has expired leave the set.
func (b *RedisBoard) List(ctx context.Context) (time.Time, map[string][]byte, int, error) {
	var tc *redis.TimeCmd
	var ids *redis.StringSliceCmd
	_, err := b.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		tc = p.Time(ctx)
		ids = p.SMembers(ctx, keyIDs)
		return nil
	})
	if err != nil {
		return time.Time{}, nil, 0, err
	}
	now := tc.Val()
	all := ids.Val()
	slices.Sort(all)
	more := max(0, len(all)-MaxInstances)
	all = all[:min(len(all), MaxInstances)]
	out := make(map[string][]byte, len(all))
	if len(all) == 0 {
		return now, out, more, nil
	}
	keys := make([]string, len(all))
	for i, id := range all {
		keys[i] = keyPrefix + id
	}
	vals, err := b.r.MGet(ctx, keys...).Result()
	if err != nil {
		return now, nil, 0, err
	}
	var gone []any
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			gone = append(gone, all[i])
			continue
		}
		out[all[i]] = []byte(s)
	}
	if len(gone) > 0 {
		// Best effort: the next read tries again.
		_, _ = b.r.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SRem(ctx, keyIDs, gone...)
			return nil
		})
	}
	return now, out, more, nil
}
