package config_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestArweave297Decide builds the limiter from a config.toml that says
// only [arweave] version = "2.9.7" and decides with it
// (docs/arweave297.md): the general group's 2.9.7 window and fields, its
// concurrency per worker shard (150 in flight over the peers of one of 5
// shards), external reduction for general only, and the cleanup by the
// window's duration.
func TestArweave297Decide(t *testing.T) {
	c, err := loadFile(t, "[arweave]\nversion = \"2.9.7\"\n")
	if err != nil {
		t.Fatal(err)
	}
	lc, err := c.Limiter()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000) // the groups' tick 0
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l, err := limiter.New(memory.New(), t0, lc)
	if err != nil {
		t.Fatal(err)
	}
	peer := func(s string) peer.Peer {
		a := netip.MustParseAddr(s)
		return peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
	}
	general, _ := l.GroupID("general")
	chunk, _ := l.GroupID("chunk")
	if s, _ := l.Settings(general); s.ConcurrencyScope != limiter.ScopeShard || s.NumberOfWorkers != 5 || s.ConcurrencyLimit != 150 {
		t.Fatalf("general: %+v", s)
	}

	// One peer: {via, remaining, reset, amount}; the next tick at 30000.
	p := peer("203.0.113.9")
	for _, c := range []struct {
		at   int64
		via  limiter.Via
		want [3]int64
	}{
		{10000, limiter.ViaSliding, [3]int64{452, 0, 1}},
		{10500, limiter.ViaSliding, [3]int64{451, 1, 2}},
		{11000, limiter.ViaSliding, [3]int64{450, 1, 3}},
		{11200, limiter.ViaLeaky, [3]int64{449, 1, 450}},
		{12000, limiter.ViaSliding, [3]int64{449, 1, 3}}, // 10000 left the window
	} {
		d := l.Decide(at(c.at), p, general)
		f, _ := d.Arweave()
		if got := [3]int64{f.Remaining, f.Reset, f.ResetAmount}; d.Via != c.via || got != c.want || f.Expiring != 453 {
			t.Errorf("t=%d: %v %v (expiring %d), want %v %v (453)", c.at, d.Via, got, f.Expiring, c.via, c.want)
		}
		d.Release()
	}
	if r := l.Reduce(at(12001), p.Key, general); r != limiter.Reduced {
		t.Errorf("reduce general: %v", r)
	}
	if r := l.Reduce(at(12001), p.Key, chunk); r != limiter.ReduceDisabled {
		t.Errorf("reduce chunk: %v", r)
	}

	// Shard 1 of 5: peers whose last octet is 1 or 6 share 150 slots.
	var held []limiter.Decision
	for i := range 150 {
		d := l.Decide(at(13000), peer(fmt.Sprintf("10.0.%d.%d", i/2, 1+5*(i%2))), general)
		if !d.Allowed {
			t.Fatalf("request %d of shard 1: %+v", i, d)
		}
		held = append(held, d)
	}
	d := l.Decide(at(13000), peer("10.9.9.11"), general)
	f, _ := d.Arweave()
	if d.Allowed || d.Reason != limiter.ReasonConcurrency || d.RetryAfter != 1 || [4]int64{f.Expiring, f.Remaining, f.Reset, f.ResetAmount} != [4]int64{150, 0, 1, 150} {
		t.Errorf("the 151st of shard 1: %+v, fields %+v", d, f)
	}
	if d := l.Decide(at(13000), peer("10.9.9.12"), general); !d.Allowed {
		t.Errorf("shard 2: %+v", d)
	} else {
		d.Release()
	}
	for i := range held {
		held[i].Release()
	}

	// Cleanup at 120000 drops every timestamp past the window (2.9.6 would
	// keep them until older than 120000 ms); two leaky ticks have emptied
	// the bucket: nothing of the peer is left.
	l.Tick(at(120000))
	if v := l.Peer(at(120000), p.Key); len(v) != 0 {
		t.Errorf("after the cleanup tick: %+v", v)
	}
}
