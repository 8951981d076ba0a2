package cluster_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestCorruptValues: every value a script reads from Redis is checked
// (an integer, in range) before it decides anything, in local_first's
// merge script as in strict's decision batch: a token count that is not a
// number or is negative, a tick missing, an in-flight count or lease of
// another instance that is not a number or is negative, a window
// timestamp that is not a whole ms (infinite, fractional), a window key of
// the wrong type. Each is that key's failure: its decision is answered by
// on_failure (closed: 503, never a fresh state that admits), the breaker
// stays up for every other peer, and the key is repaired (deleted, logged,
// counted) so that its next decision starts afresh.
func TestCorruptValues(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	// general: a window of 2 a minute in front of a bucket of 3.
	cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		"general": group(2, 60000, 3, 600000, 3, 2, 120000, 120000),
	}}
	key := func(p, suf string) string { return "ld:" + cluster.TagOf(p, "general") + suf }
	soon := float64(time.Now().Add(time.Second).UnixMilli())
	hset := func(suf string, v ...any) func(p string) error {
		return func(p string) error { return rdb.HSet(ctx, key(p, suf), v...).Err() }
	}
	zadd := func(suf string, score float64) func(p string) error {
		return func(p string) error { return rdb.ZAdd(ctx, key(p, suf), redis.Z{Score: score, Member: "x"}).Err() }
	}
	lf, st := cluster.LocalFirst, cluster.Strict
	cases := []struct {
		name  string
		mode  cluster.Mode
		plant func(p string) error
		want  string // in the logged error
	}{
		{"tokens not a number", lf, hset(":0:h", "tok", "abc", "tk", "1"), "tok holds"},
		{"negative tokens", lf, hset(":0:h", "tok", "-5", "tk", "1"), "tok holds"},
		{"tick missing", lf, hset(":0:h", "tok", "2"), "tk holds"},
		{"tick not a number", lf, hset(":0:h", "tok", "2", "tk", "1e400"), "tk holds"},
		{"count not a number", lf, hset(":0:c", "other", "x", "other:e", "99999999999999"), "in-flight count holds"},
		{"negative count", lf, hset(":0:c", "other", "-3", "other:e", "99999999999999"), "in-flight count holds"},
		{"lease not a number", lf, hset(":0:c", "other", "1", "other:e", "soon"), "lease holds"},
		{"window timestamp infinite", lf, zadd(":0:hw", math.Inf(1)), "window timestamp holds"},
		{"window timestamp not whole", lf, zadd(":0:hw", soon+0.5), "window timestamp holds"},
		{"window of the wrong type", lf, func(p string) error { return rdb.Set(ctx, key(p, ":0:hw"), "x", 0).Err() }, "WRONGTYPE"},
		{"window timestamp infinite", st, zadd(":0:hw", math.Inf(1)), "window timestamp holds"},
		{"window timestamp not whole", st, zadd(":0:hw", soon+0.5), "window timestamp holds"},
	}
	for _, tc := range cases {
		t.Run(tc.mode.String()+"/"+tc.name, func(t *testing.T) {
			b, lim, logs := openWith(t, cluster.Options{Addrs: []string{srv.Addr()}, Mode: tc.mode, OnFailure: cluster.FailClosed, Timeout: 2 * time.Second}, cfg)
			bad := "192.0.2.9"
			warm := decide(lim, "192.0.2.200") // the group's schedule established (generation 0)
			warm.Release()
			if err := tc.plant(bad); err != nil {
				t.Fatal(err)
			}
			if d := decide(lim, bad); d.Allowed || d.Reason != limiter.ReasonUnavailable {
				t.Fatalf("decision on a corrupt key: %+v", d)
			}
			for i := range 50 {
				if d := decide(lim, fmt.Sprintf("198.51.100.%d", i)); !d.Allowed {
					t.Fatalf("peer %d: %+v (status %+v), log:\n%s", i, d, b.Status(), logs)
				} else {
					d.Release()
				}
			}
			if !b.Status().Up {
				t.Fatalf("one corrupt key took the breaker down: %+v", b.Status())
			}
			waitFor(t, "the key repaired", func() bool { return b.Stats().Repaired == 1 })
			if d := decide(lim, bad); !d.Allowed {
				t.Fatalf("after the repair: %+v", d)
			}
			s := b.Stats()
			if s.Errors[cluster.KindKey] != 1 || s.FailClosed != 1 || !strings.Contains(logs.String(), "repaired") ||
				!strings.Contains(logs.String(), tc.want) {
				t.Fatalf("stats %+v, log:\n%s", s, logs)
			}
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCorruptReduce: the manual reductions check what they read too: a
// token count that is not a number (local_first's hybrid tokens) or a
// window timestamp that is not a whole ms (Arweave 2.9.7's reduction of a
// window, strict) is that key's failure: nothing reduced, the key
// repaired, the breaker up.
func TestCorruptReduce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	key := func(p, suf string) string { return "ld:" + cluster.TagOf(p, "general") + suf }
	cases := []struct {
		name  string
		mode  cluster.Mode
		cfg   limiter.Config
		plant func(p string) error
	}{
		{"tokens not a number", cluster.LocalFirst,
			limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": group(0, 1000, 3, 600000, 3, 2, 120000, 120000)}},
			func(p string) error { return rdb.HSet(ctx, key(p, ":0:h"), "tok", "abc", "tk", "1").Err() }},
		{"window timestamp infinite", cluster.Strict,
			limiter.Config{IPv6Prefix: 64, ArweaveVersion: limiter.Arweave297, Groups: map[string]limiter.GroupSettings{"general": group(2, 1000, 0, 30000, 1, 10, 120000, 120000)}},
			func(p string) error {
				return rdb.ZAdd(ctx, key(p, ":0:hw"), redis.Z{Score: math.Inf(1), Member: "x"}).Err()
			}},
	}
	for _, tc := range cases {
		t.Run(tc.mode.String()+"/"+tc.name, func(t *testing.T) {
			b, lim, logs := openWith(t, cluster.Options{Addrs: []string{srv.Addr()}, Mode: tc.mode, OnFailure: cluster.FailClosed, Timeout: 2 * time.Second}, tc.cfg)
			warm := decide(lim, "192.0.2.200")
			warm.Release()
			bad := "192.0.2.9"
			if err := tc.plant(bad); err != nil {
				t.Fatal(err)
			}
			g, _ := lim.GroupID("general")
			if r := lim.Reduce(time.Now(), peerOf(bad).Key, g); r != limiter.ReduceNoop {
				t.Fatalf("reduced on a corrupt key: %v", r)
			}
			waitFor(t, "the key repaired", func() bool { return b.Stats().Repaired == 1 })
			if s := b.Stats(); !s.Up || s.Errors[cluster.KindKey] != 1 || !strings.Contains(logs.String(), "corrupt") {
				t.Fatalf("stats %+v, log:\n%s", s, logs)
			}
			if n, err := rdb.Exists(ctx, key(bad, ":0:h"), key(bad, ":0:hw")).Result(); err != nil || n != 0 {
				t.Fatalf("the corrupt key is still there: %d %v", n, err)
			}
			if d := decide(lim, bad); !d.Allowed {
				t.Fatalf("after the repair: %+v", d)
			}
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCorruptRenew: the renewal of this instance's leases checks the count
// it renews: one that is not a number is that key's failure (repaired, the
// breaker up), and the other keys' leases are renewed all the same.
func TestCorruptRenew(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	b, lim, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second})
	key := func(p string) string { return "ld:" + cluster.TagOf(p, "general") + ":pt" }
	held := decide(lim, "192.0.2.1") // held: its lease is renewed
	other := decide(lim, "192.0.2.2")
	defer held.Release()
	defer other.Release()
	if !held.Allowed || !other.Allowed {
		t.Fatalf("%+v %+v", held, other)
	}
	bad := packed(0, 1, 1) + inflight(b.Instance(), math.NaN(), 99999999999999)
	if err := rdb.Set(ctx, key("192.0.2.1"), bad, 0).Err(); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.Get(ctx, key("192.0.2.2")).Result()
	time.Sleep(5 * time.Millisecond)
	b.Renew()
	waitFor(t, "the key repaired", func() bool { return b.Stats().Repaired == 1 })
	if s := b.Stats(); !s.Up || s.Errors[cluster.KindKey] != 1 {
		t.Fatalf("stats %+v", s)
	}
	if after, _ := rdb.Get(ctx, key("192.0.2.2")).Result(); after == before {
		t.Fatalf("the other key's lease was not renewed: %q", after)
	}
}

// packed returns a strict state string's fields part (decision 220): their
// number, an expiry (0: none known), then each as a little-endian double,
// the generation first.
func packed(fields ...float64) string { return packedExp(0, fields...) }

// packedExp is packed with the expiry exp.
func packedExp(exp float64, fields ...float64) string {
	b := []byte{byte(len(fields))}
	for _, f := range append([]float64{exp}, fields...) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return string(b)
}

// inflight returns one instance's part of a packed state string: its id's
// length and id, its count and its lease.
func inflight(id string, n, lease float64) string {
	b := append([]byte{byte(len(id))}, id...)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(n))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(lease))
	return string(b)
}
