package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// TestSharedEntry: two instances share one Redis in strict mode; a peer
// limited through instance A reads, through instance B, as limited with
// the tokens and window A's admissions consumed and A's requests in
// flight; an untouched peer is not tracked; a corrupt tokens value is
// answered as corrupt (never as a fresh state) and left as it is; a group
// of another algorithm reads in its own terms. On miniredis too, whose Lua has no
// struct library: the script's plain-Lua packing is read back by the Go
// one.
func TestSharedEntry(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) { testSharedEntry(t, redistest.Start(t).Addr()) })
	t.Run("miniredis", func(t *testing.T) { testSharedEntry(t, miniredis.RunT(t).Addr()) })
}

func testSharedEntry(t *testing.T, addr string) {
	cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		// 2 in the window, 3 tokens leaking one a second.
		"general": group(2, 60000, 3, 1000, 1, 100, 120000, 120000),
	}}
	tb := group(2, 60000, 3, 600000, 1, 100, 120000, 120000)
	tb.Algorithm, tb.Limit, tb.Period, tb.Burst = algo.TokenBucket, 5, 1000, 5
	cfg.Groups["other"] = tb
	lg := group(2, 60000, 3, 600000, 1, 100, 120000, 120000)
	lg.Algorithm, lg.Limit, lg.Period = algo.SlidingLog, 3, 60000
	cfg.Groups["log"] = lg
	var c clock
	c.Set(t0)
	openAt := func() (*cluster.Backend, *limiter.Limiter) {
		b, err := cluster.OpenWithClock(cluster.Options{Addrs: []string{addr}, Mode: cluster.Strict, OnFailure: cluster.FailClosed,
			Timeout: 2 * time.Second, Lease: time.Hour, Logger: slog.New(slog.DiscardHandler)}, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		lim, err := limiter.New(b, c.Now(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b, lim
	}
	_, limA := openAt()
	b, _ := openAt()
	gA, _ := limA.GroupID("general")
	var held []limiter.Decision
	for i := range 6 {
		d := limA.Decide(c.Now(), peerOf("192.0.2.1"), gA)
		if d.Allowed != (i < 5) {
			t.Fatalf("decision %d on A: %+v", i, d)
		}
		if d.Allowed {
			held = append(held, d)
		}
	}
	ctx := context.Background()
	s := cfg.Groups["general"]
	v, ok, err := b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "general", &s)
	if err != nil || !ok {
		t.Fatalf("B's view of the limited peer: %+v %v %v", v, ok, err)
	}
	if v.Tokens != 3 || v.Window != 2 || v.WindowActive != 2 || v.Inflight != 5 {
		t.Fatalf("B's view: tokens %d window %d/%d in flight %d, want 3, 2/2, 5", v.Tokens, v.Window, v.WindowActive, v.Inflight)
	}
	// Two leaky ticks later, two of A's requests done: the ticks due are
	// applied as a decision would, the releases counted.
	held[0].Release()
	held[1].Release()
	c.Add(2 * time.Second)
	v, ok, err = b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "general", &s)
	if err != nil || !ok || v.Tokens != 1 || v.WindowActive != 2 || v.Inflight != 3 {
		t.Fatalf("B's view 2 s later: %+v %v %v, want 1 token, 2 in the window, 3 in flight", v, ok, err)
	}
	if u, ok, err := b.SharedEntry(ctx, peerOf("192.0.2.2").Key, "general", &s); err != nil || ok {
		t.Fatalf("untouched peer: %+v %v %v", u, ok, err)
	}

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	bad := "ld:" + cluster.TagOf(peerOf("192.0.2.3").Key.String(), "general") + ":pt"
	for _, raw := range []string{packed(0, math.NaN(), 1), packed(0, -1, 5), packed(0, 3, 5) + inflight("inst", 2.5, 99999999999999),
		packed(0.5, 3, 5), packed(0, 3, 5)[:12], "0 3 5"} {
		if err := rdb.Set(ctx, bad, raw, 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, ok, err := b.SharedEntry(ctx, peerOf("192.0.2.3").Key, "general", &s)
		var ke *cluster.KeyError
		if ok || !errors.As(err, &ke) || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("%q: ok %v err %v", raw, ok, err)
		}
		if got, _ := rdb.Get(ctx, bad).Result(); got != raw {
			t.Fatalf("the view wrote %q over %q", got, raw)
		}
	}

	// The other algorithms, in their own terms: a token bucket of 5 with 3
	// taken (held) reads 2 remaining and 3 in flight; a sliding log of 3
	// full reads limited, and a corrupt timestamp as corrupt.
	o2 := cfg.Groups["other"]
	gO, _ := limA.GroupID("other")
	for range 3 {
		if d := limA.Decide(c.Now(), peerOf("192.0.2.1"), gO); !d.Allowed {
			t.Fatalf("token bucket on A: %+v", d)
		}
	}
	v, ok, err = b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "other", &o2)
	if err != nil || !ok || v.Algorithm != algo.TokenBucket || v.Algo.Remaining != 2 || v.Inflight != 3 {
		t.Fatalf("B's view of the token bucket: %+v %v %v, want 2 remaining, 3 in flight", v, ok, err)
	}
	// A live edit to a bucket of 10 reads the state rescaled, as the next
	// decision would.
	wider := o2
	wider.Limit, wider.Burst = 10, 10
	if v, ok, err = b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "other", &wider); err != nil || !ok || v.Algo.Remaining < 2 || v.Algo.Remaining > 10 {
		t.Fatalf("B's view of the bucket under wider limits: %+v %v %v", v, ok, err)
	}
	lg = cfg.Groups["log"]
	gL, _ := limA.GroupID("log")
	for i := range 4 {
		d := limA.Decide(c.Now(), peerOf("192.0.2.1"), gL)
		if d.Allowed != (i < 3) {
			t.Fatalf("sliding log decision %d on A: %+v", i, d)
		}
		d.Release()
	}
	v, ok, err = b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "log", &lg)
	if err != nil || !ok || v.Algo.Count != 3 || v.Algo.Remaining != 0 || v.Algo.Reset != 60000 {
		t.Fatalf("B's view of the full sliding log: %+v %v %v, want 3 counted, none remaining, next in 60 s", v, ok, err)
	}
	logKey := ""
	keys, _ := rdb.Keys(ctx, "ld:"+cluster.TagOf(peerOf("192.0.2.1").Key.String(), "log")+"*").Result()
	for _, k := range keys {
		if typ, _ := rdb.Type(ctx, k).Result(); typ == "zset" {
			logKey = k
		}
	}
	if logKey == "" {
		t.Fatalf("no log among %v", keys)
	}
	rdb.ZAdd(ctx, logKey, redis.Z{Score: float64(c.Now().UnixMilli()) + 0.5, Member: "bad"})
	var ke *cluster.KeyError
	if _, ok, err := b.SharedEntry(ctx, peerOf("192.0.2.1").Key, "log", &lg); ok || !errors.As(err, &ke) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a fractional log timestamp: ok %v err %v", ok, err)
	}
}
