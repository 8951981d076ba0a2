// Command clusterbench measures cluster mode (docs/cluster.md) on one
// redis-server against go-redis/redis_rate, the baseline: decisions per
// second at c concurrent callers, Redis commands and round trips per
// decision, the Redis time per script call, and — with -stall — what the
// callers see while Redis is SIGSTOPped. bench/cluster.sh starts the
// redis-server and runs it; docs/benchmarks.md has the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// gcraSrc is GCRA in one script with Redis TIME, integer ms (the research
// notes' A.2, the shape of redis_rate's): every call reads and writes.
const gcraSrc = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local T = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tau then
  return {0, tat - tau - now}
end
local ntat = tat + T
redis.call('SET', KEYS[1], ntat, 'PX', ntat - now + 1000)
return {1, 0}
`

var (
	addr    = flag.String("addr", "127.0.0.1:6390", "redis-server address")
	shards  = flag.String("cluster", "", "comma-separated masters of a Redis Cluster: limiterd's contenders run on it (and the Redis time is summed over them)")
	pid     = flag.Int("pid", 0, "redis-server pid (for -stall)")
	conc    = flag.Int("c", 64, "concurrent callers")
	dur     = flag.Duration("d", 5*time.Second, "length of one measurement")
	npeers  = flag.Int("peers", 1000, "distinct peers")
	rounds  = flag.Int("rounds", 2, "rounds, the contenders' order reversed every other round")
	only    = flag.String("only", "", "comma-separated contenders (default: all)")
	stall   = flag.Bool("stall", false, "measure a SIGSTOP of redis-server instead of throughput")
	bound   = flag.Bool("bound", false, "measure local_first's over-admission instead of throughput")
	cpuprof = flag.String("cpuprofile", "", "write a CPU profile of the throughput runs here")
	timeout = flag.Duration("timeout", 50*time.Millisecond, "cluster.timeout, and the per-call deadline of the other clients")
)

// contender is one way of deciding.
type contender struct {
	name   string
	decide func(ctx context.Context, i int) error
	// trips and cmds return the round trips made and the commands sent so
	// far (-1: not known).
	trips, cmds func() int64
	// entries returns the operations the batch script calls carried so
	// far (nil: not batched).
	entries func() int64
	// ownDeadline: the contender bounds its own waits (cluster.timeout);
	// the others get a context with the deadline on every call, as their
	// callers would give them.
	ownDeadline bool
	close       func()
}

var peers []peer.Peer

func main() {
	flag.Parse()
	for i := range *npeers {
		a := netip.AddrFrom4([4]byte{11, 0, byte(i >> 8), byte(i)})
		peers = append(peers, peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)})
	}
	admin := redis.NewClient(&redis.Options{Addr: *addr})
	defer admin.Close()
	if *stall {
		runStall(admin)
		return
	}
	if *bound {
		runBound(admin)
		return
	}
	names := []string{"redis_rate", "rueidis_gcra", "batch_floor", "strict_gcra", "strict_tb", "strict", "local_first"}
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("%d callers, %d peers, %s per run, GOMAXPROCS %d\n", *conc, *npeers, *dur, runtime.GOMAXPROCS(0))
	fmt.Printf("%-13s %5s %12s %9s %9s %9s %10s %10s %12s %12s\n", "contender", "round", "decisions/s", "p50", "p99", "max", "cmds/dec", "trips/dec", "redis µs/dec", "ceiling/s")
	for r := range *rounds {
		order := slices.Clone(names)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			throughput(admin, n, r+1)
		}
	}
}

func newContender(name string) contender {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch name {
	case "redis_rate":
		rdb := redis.NewClient(&redis.Options{Addr: *addr})
		rl := redis_rate.NewLimiter(rdb)
		lim := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Second}
		var n atomic.Int64
		return contender{name: name, close: func() { rdb.Close() }, trips: n.Load, cmds: n.Load,
			decide: func(ctx context.Context, i int) error {
				n.Add(1)
				_, err := rl.Allow(ctx, peers[i%len(peers)].Key.String(), lim)
				return err
			}}
	case "batch_floor":
		return newFloor()
	case "rueidis_gcra":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
		if err != nil {
			panic(err)
		}
		sc := rueidis.NewLuaScript(gcraSrc)
		var n atomic.Int64
		return contender{name: name, close: c.Close, trips: func() int64 { return -1 }, cmds: n.Load,
			decide: func(ctx context.Context, i int) error {
				n.Add(1)
				return sc.Exec(ctx, c, []string{"g:" + peers[i%len(peers)].Key.String()}, []string{"1", "600000000"}).Error()
			}}
	case "strict", "local_first", "strict_gcra", "strict_tb":
		mode := cluster.Strict
		if name == "local_first" {
			mode = cluster.LocalFirst
		}
		gs := limiter.GroupSettings{
			SlidingWindowLimit: 0, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
			LeakyLimit: 1 << 30, LeakyTickInterval: 30000, LeakyTickReduction: 1 << 30, ConcurrencyLimit: 1 << 30,
		}
		switch name {
		case "strict_gcra":
			// Every call admits and writes, as redis_rate's above.
			gs.Algorithm, gs.Limit, gs.Period, gs.Burst = algo.GCRA, 1_000_000, 1000, 1_000_000
		case "strict_tb":
			gs.Algorithm, gs.Limit, gs.Period, gs.Burst = algo.TokenBucket, 1_000_000, 1000, 1_000_000
		}
		cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": gs}}
		addrs := []string{*addr}
		if *shards != "" {
			addrs = strings.Split(*shards, ",")
		}
		b, err := cluster.Open(cluster.Options{Addrs: addrs, Mode: mode, OnFailure: cluster.FailClosed,
			Timeout: *timeout, Lease: 10 * time.Second, SyncInterval: 100 * time.Millisecond, Logger: log})
		if err != nil {
			panic(err)
		}
		if !b.Status().Up {
			panic(fmt.Sprint(b.Status()))
		}
		l, err := limiter.New(b, time.Now(), cfg)
		if err != nil {
			panic(err)
		}
		g, _ := l.GroupID("general")
		return contender{name: name, close: func() { b.Close() }, ownDeadline: true,
			trips: func() int64 { return int64(b.Stats().RoundTrips) }, cmds: func() int64 { return int64(b.Stats().Commands) },
			entries: func() int64 { return int64(b.Stats().Entries) },
			decide: func(_ context.Context, i int) error {
				d := l.Decide(time.Now(), peers[i%len(peers)], g)
				d.Release()
				if d.Reason == limiter.ReasonUnavailable {
					return errors.New("unavailable")
				}
				return nil
			}}
	}
	panic("unknown contender " + name)
}

// load runs decide on *conc goroutines for d and returns the decisions,
// errors and the latencies.
func load(c contender, d time.Duration, perCall time.Duration) (n, errs int64, lats []time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]time.Duration, 0, 1<<16)
			var e int64
			for i := w; time.Now().Before(stop); i += *conc {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if !c.ownDeadline {
					ctx, cancel = context.WithTimeout(ctx, perCall)
				}
				t0 := time.Now()
				err := c.decide(ctx, i)
				took := time.Since(t0)
				own = append(own, took)
				cancel()
				if err != nil {
					e++
					if took < time.Millisecond {
						// An answer without Redis: pace the caller as a
						// client waiting for its 503 would be.
						time.Sleep(time.Millisecond)
					}
				}
			}
			mu.Lock()
			lats = append(lats, own...)
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	return int64(len(lats)), errs, lats
}

func pct(lats []time.Duration, p float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	slices.Sort(lats)
	return lats[int(float64(len(lats)-1)*p)]
}

// nodes returns the servers whose Redis time is counted: the Redis Cluster's
// masters with -cluster, else the one redis-server.
func nodes(admin *redis.Client) []*redis.Client {
	if *shards == "" {
		return []*redis.Client{admin}
	}
	var out []*redis.Client
	for _, a := range strings.Split(*shards, ",") {
		out = append(out, redis.NewClient(&redis.Options{Addr: a}))
	}
	return out
}

func throughput(admin *redis.Client, name string, round int) {
	ctx := context.Background()
	ns := nodes(admin)
	for _, n := range ns {
		n.FlushAll(ctx)
	}
	c := newContender(name)
	defer c.close()
	// Warm: scripts loaded, connections open.
	load(c, 300*time.Millisecond, time.Second)
	var cpu0 float64
	for _, n := range ns {
		n.ConfigResetStat(ctx)
		cpu0 += bench.RedisCPU(n)
	}
	t0, c0 := c.trips(), c.cmds()
	var e0 int64
	if c.entries != nil {
		e0 = c.entries()
	}
	start := time.Now()
	n, errs, lats := load(c, *dur, time.Second)
	el := time.Since(start)
	trips, cmds := c.trips()-t0, c.cmds()-c0
	var usec, cpu float64
	var perShard []string
	for _, nd := range ns {
		cpu += bench.RedisCPU(nd)
		u := bench.CommandMicros(nd, "evalsha", "zrem") // the scripts, with their commands, and releases
		usec += u
		perShard = append(perShard, fmt.Sprintf("%.2f", u/float64(n)))
	}
	perDec := func(v int64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.5f", float64(v)/float64(n))
	}
	fmt.Printf("%-13s %5d %12.0f %9s %9s %9s %10s %10s %12.2f %12.0f", name, round, float64(n)/el.Seconds(),
		pct(lats, 0.5).Round(time.Microsecond), pct(lats, 0.99).Round(time.Microsecond), pct(lats, 1).Round(time.Millisecond),
		perDec(cmds), perDec(trips), usec/float64(n), 1e6/(usec/float64(n)))
	if len(ns) > 1 {
		fmt.Printf("  (per shard µs/dec: %s)", strings.Join(perShard, " "))
	}
	fmt.Printf("  (redis cpu %.2f µs/dec)", (cpu-cpu0)*1e6/float64(n))
	if c.entries != nil {
		fmt.Printf("  (%.3f entries/dec)", float64(c.entries()-e0)/float64(n))
	}
	if errs > 0 {
		fmt.Printf("  (%d errors)", errs)
	}
	fmt.Println()
}

// runStall loads each contender, SIGSTOPs redis-server 2 s in for 5 s, and
// reports the decisions started while it was stopped and the goroutines.
func runStall(admin *redis.Client) {
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "-stall needs -pid")
		os.Exit(2)
	}
	names := []string{"strict", "local_first", "redis_rate", "rueidis_gcra"}
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	fmt.Printf("%d callers; redis-server SIGSTOPped from 2 s to 7 s of a 10 s run; per-call deadline / cluster.timeout %s\n", *conc, *timeout)
	fmt.Printf("%-13s %9s %9s %9s %9s %10s %10s %9s\n", "contender", "during", "p50", "p99", "max", "goroutines", "peak", "errors")
	for _, name := range names {
		admin.FlushAll(context.Background())
		c := newContender(name)
		load(c, 300*time.Millisecond, time.Second)
		var peak atomic.Int64
		base := runtime.NumGoroutine()
		var stopped, resumed atomic.Int64
		done := make(chan struct{})
		go func() {
			time.Sleep(2 * time.Second)
			stopped.Store(time.Now().UnixNano())
			_ = syscall.Kill(*pid, syscall.SIGSTOP)
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); <-t.C {
				peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
			}
			_ = syscall.Kill(*pid, syscall.SIGCONT)
			resumed.Store(time.Now().UnixNano())
			close(done)
		}()
		var mu sync.Mutex
		var during []time.Duration
		var errs atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(10 * time.Second)
		for w := range *conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; time.Now().Before(end); i += *conc {
					ctx, cancel := context.WithTimeout(context.Background(), *timeout)
					t0 := time.Now()
					err := c.decide(ctx, i)
					took := time.Since(t0)
					cancel()
					if err != nil {
						errs.Add(1)
						if took < time.Millisecond {
							// An answer without Redis: pace the caller as a
							// client waiting for its 503 would be.
							time.Sleep(time.Millisecond)
						}
					}
					if s := stopped.Load(); s != 0 && t0.UnixNano() >= s && (resumed.Load() == 0 || t0.UnixNano() < resumed.Load()) {
						mu.Lock()
						during = append(during, took)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		<-done
		fmt.Printf("%-13s %9d %9s %9s %9s %10d %10d %9d\n", name, len(during), pct(during, 0.5).Round(time.Microsecond),
			pct(during, 0.99).Round(time.Microsecond), pct(during, 1).Round(time.Millisecond), base, peak.Load(), errs.Load())
		c.close()
		time.Sleep(time.Second) // let the server drain the dead connections
	}
}

// runBound measures local_first's over-admission (docs/cluster.md): n
// instances, one peer, each deciding at a known rate a, against a bucket
// of L that does not leak during the run; admitted − L against the bounds.
func runBound(admin *redis.Client) {
	const L = 1000
	interval := 100 * time.Millisecond
	fmt.Printf("local_first: one peer, limit %d, sync_interval %s; rate per instance a; R measured (PING)\n", L, interval)
	fmt.Printf("%9s %8s %12s %8s %9s %6s %8s %22s %18s %14s\n", "instances", "a (/s)", "max_unsynced", "R", "admitted", "over", "rounds", "worst Σ_{j≠i} aⱼ(2F+R)", "typical Σ aᵢ(F+R)", "N·b")
	for _, tc := range []struct{ n, rate, b int }{{2, 1000, 0}, {2, 5000, 0}, {3, 1000, 0}, {2, 5000, 50}, {3, 5000, 50}} {
		for round := range *rounds {
			admin.FlushAll(context.Background())
			var rtt time.Duration
			for range 20 {
				t0 := time.Now()
				admin.Ping(context.Background())
				rtt = max(rtt, time.Since(t0))
			}
			cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": {
				SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
				LeakyLimit: L, LeakyTickInterval: 3_600_000, LeakyTickReduction: L, ConcurrencyLimit: 1 << 30,
			}}}
			var lims []*limiter.Limiter
			var backs []*cluster.Backend
			for range tc.n {
				b, err := cluster.Open(cluster.Options{Addrs: []string{*addr}, Mode: cluster.LocalFirst, OnFailure: cluster.FailClosed,
					Timeout: *timeout, Lease: 10 * time.Second, SyncInterval: interval, MaxUnsynced: tc.b})
				if err != nil {
					panic(err)
				}
				l, err := limiter.New(b, time.Now(), cfg)
				if err != nil {
					panic(err)
				}
				lims, backs = append(lims, l), append(backs, b)
			}
			peer := peers[round%len(peers)]
			var admitted atomic.Int64
			var wg sync.WaitGroup
			// Long enough to spend L at the total rate, then as long again.
			run := time.Duration(2 * float64(L) / float64(tc.n*tc.rate) * float64(time.Second))
			run = max(run, 2*time.Second)
			start := time.Now()
			for _, l := range lims {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g, _ := l.GroupID("general")
					sent := 0
					for el := time.Since(start); el < run; el = time.Since(start) {
						for due := int(el.Seconds() * float64(tc.rate)); sent < due; sent++ {
							d := l.Decide(time.Now(), peer, g)
							if d.Allowed {
								admitted.Add(1)
							}
							d.Release()
						}
						time.Sleep(200 * time.Microsecond)
					}
				}()
			}
			wg.Wait()
			for _, b := range backs {
				b.Close()
			}
			a := float64(tc.rate)
			F, R := interval.Seconds(), rtt.Seconds()
			worst := float64(tc.n-1) * a * (2*F + R)
			typical := float64(tc.n) * a * (F + R)
			nb := "-"
			if tc.b > 0 {
				nb = fmt.Sprint(tc.n * tc.b)
			}
			fmt.Printf("%9d %8d %12d %8s %9d %6d %8d %22.0f %18.0f %14s\n", tc.n, tc.rate, tc.b, rtt.Round(10*time.Microsecond),
				admitted.Load(), admitted.Load()-L, round+1, worst, typical, nb)
		}
	}
}
