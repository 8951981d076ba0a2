// Package limitertest is what limiterd's tests share to drive a limiter: a
// fake clock, a timeline origin, group settings and configurations built
// from named fields, peers from their address text, and a Limiter on the
// memory Backend. It is for tests only, as net/http/httptest is.
package limitertest

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// T0 is the fake timeline's origin: a limiter made at T0 has every group's
// tick 0 there.
var T0 = time.UnixMilli(1_700_000_000_000)

// At returns T0 plus ms milliseconds.
func At(ms int64) time.Time { return T0.Add(time.Duration(ms) * time.Millisecond) }

// Clock is a fake clock: it stands still until told to move (Add, Set,
// Sleep). The zero Clock reads T0. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time: T0 until it was set or moved.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = T0
	}
	return c.t
}

// Add moves the clock by d (back, for a negative d).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = T0
	}
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Sleep is a sleep on the fake timeline: it records d, moves the clock by
// d and returns at once, or returns ctx's error if ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	c.Add(d)
	return nil
}

// Sleeps returns the durations Sleep was called with, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Hybrid names the limits of a group on the Arweave hybrid (window, then
// leaky bucket); Settings turns it into limiter.GroupSettings. Durations
// are milliseconds, as in the Arweave node's config; the cleanup ticks
// are the Arweave defaults (every 120 000 ms, expiry 120 000 ms).
type Hybrid struct {
	Window      int64 // sliding_window_limit
	WindowMS    int64 // sliding_window_duration
	Leaky       int64 // leaky_limit
	TickMS      int64 // leaky_tick_interval
	Reduction   int64 // leaky_tick_reduction
	Concurrency int64 // concurrency_limit
}

// Settings returns h as a group's settings, mode enforce.
func (h Hybrid) Settings() limiter.GroupSettings {
	return limiter.GroupSettings{
		SlidingWindowLimit: h.Window, SlidingWindowDuration: h.WindowMS,
		CleanupInterval: 120_000, CleanupExpiry: 120_000,
		LeakyLimit: h.Leaky, LeakyTickInterval: h.TickMS, LeakyTickReduction: h.Reduction,
		ConcurrencyLimit: h.Concurrency,
	}
}

// Config returns the Arweave node's groups and routes (limiter.DefaultConfig)
// with the given groups added or replaced.
func Config(groups map[string]limiter.GroupSettings) limiter.Config {
	cfg := limiter.DefaultConfig()
	for name, g := range groups {
		cfg.Groups[name] = g
	}
	return cfg
}

// Peer returns the peer of an address ("192.0.2.1", "2001:db8::1"), keyed
// as a limiter with the default IPv6 prefix keys it. It panics on text
// that is not an address.
func Peer(addr string) peer.Peer {
	a := netip.MustParseAddr(addr)
	return peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, limiter.DefaultIPv6Prefix)}
}

// New returns a Limiter for cfg on a memory Backend, made at T0; it fails
// tb if cfg is refused.
func New(tb testing.TB, cfg limiter.Config, opts ...limiter.Option) *limiter.Limiter {
	tb.Helper()
	l, err := limiter.New(memory.New(), T0, cfg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// Adaptive names a group's adaptive concurrency (docs/limiting.md,
// "Adaptive concurrency"); Settings turns it on, the other keys at
// limiter.DefaultAdaptive. A zero field takes the default too.
type Adaptive struct {
	Min, Max     int64 // adaptive_min_limit, adaptive_max_limit
	WindowMS     int64 // adaptive_window
	ProbeSamples int64 // adaptive_probe_samples
	Smoothing    int64 // adaptive_smoothing
}

// Settings returns a as the adaptive settings of a group, on.
func (a Adaptive) Settings() limiter.Adaptive {
	s := limiter.DefaultAdaptive()
	s.AdaptiveConcurrency = true
	for _, f := range []struct{ v, to *int64 }{
		{&a.Min, &s.AdaptiveMinLimit}, {&a.Max, &s.AdaptiveMaxLimit}, {&a.WindowMS, &s.AdaptiveWindow},
		{&a.ProbeSamples, &s.AdaptiveProbeSamples}, {&a.Smoothing, &s.AdaptiveSmoothing},
	} {
		if *f.v != 0 {
			*f.to = *f.v
		}
	}
	return s
}

// Filled returns a Limiter made at T0 (returned with it) that tracks n IPv4
// peers in general, peer i having sent 1 + i%7 requests at T0, and three
// IPv6 peers (two of one /64): enough for a peer index or a dashboard to go
// through.
func Filled(tb testing.TB, n int) (*limiter.Limiter, time.Time) {
	tb.Helper()
	lim := New(tb, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	g, _ := lim.GroupID("general")
	for i := 0; i < n; i++ {
		a := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
		p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
		for j := 0; j <= i%7; j++ {
			d := lim.Decide(T0, p, g)
			d.Release()
		}
	}
	for _, s := range []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:2::1"} {
		d := lim.Decide(T0, Peer(s), g)
		d.Release()
	}
	return lim, T0
}
