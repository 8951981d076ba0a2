// Command chaos runs the long variants of the chaos drivers (package
// chaos) against a built limiterd binary, as chaos/*.sh call it:
//
//	chaos flood     -limiterd BIN [-ipv4 N] [-ipv6 N] [-max-tracked N]
//	chaos crashloop -limiterd BIN [-rounds N] [-cluster]
//	chaos soak      -limiterd BIN [-duration D] [-rate R] [-cluster] [-profiles DIR]
//	chaos restart   -limiterd BIN [-restarts N] [-rate R] [-conns N] [-up D] [-wrk PATH]
//	chaos aborts    -limiterd BIN [-duration D] [-peers N] [-limit N] [-per-wave N] [-every D] [-patience D] [-work D]
//	chaos slowreaders -limiterd BIN [-duration D] [-phase D] [-pool N] [-readers N] [-size BYTES] [-unbuffered]
//	chaos checkflood -limiterd BIN [-duration D] [-rate R] [-conns N] [-max-tracked N] [-lease D]
//	chaos crowd     -limiterd BIN [-duration D] [-servers N] [-service D] [-peers N] [-clients N] [-pace D] [-max-limit N]
//
// With -cluster, the soak runs two instances in cluster mode on a
// redis-server it starts (redis-server on the PATH), the load split
// between them, and judges Redis's keys and memory too.
//
// It prints the figures, and exits 1 when a driver found a violation.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/limiterd/limiterd/internal/chaos"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos flood|crashloop|soak|restart|aborts|slowreaders|checkflood|crowd -limiterd BIN [flags]")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	bin := fs.String("limiterd", "", "the limiterd `binary`")
	dir := fs.String("dir", "", "scratch `directory` (default: a new temporary one, removed at the end)")
	verbose := fs.Bool("v", false, "copy limiterd's log to standard error")
	var run func() (string, bool, error)
	switch os.Args[1] {
	case "flood":
		ipv4 := fs.Int("ipv4", 900000, "distinct IPv4 peers")
		ipv6 := fs.Int("ipv6", 100000, "distinct IPv6 peers (/64s)")
		maxTracked := fs.Int("max-tracked", 100000, "peers.max_tracked")
		conns := fs.Int("conns", 32, "keep-alive connections")
		interval := fs.Duration("interval", 5*time.Second, "snapshot.interval")
		polite := fs.Duration("polite", time.Second, "the polite peer's pace")
		rate := fs.Float64("rate", 0, "the flood's requests per second (0: as fast as answered)")
		run = func() (string, bool, error) {
			r, err := chaos.Flood(ctx, chaos.FloodOptions{Bin: *bin, Dir: *dir, IPv4: *ipv4, IPv6: *ipv6, MaxTracked: *maxTracked,
				Conns: *conns, Rate: *rate, Interval: *interval, PoliteEvery: *polite, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			ok := len(r.PoliteEvicted) == 0 && r.V6Requests == r.V6Sent
			return r.String(), ok, nil
		}
	case "crashloop":
		rounds := fs.Int("rounds", 20, "rounds of kill -9")
		interval := fs.Duration("interval", time.Second, "snapshot.interval")
		minUp := fs.Duration("min-up", time.Second, "shortest run before a kill")
		maxUp := fs.Duration("max-up", 4*time.Second, "longest run before a kill")
		rate := fs.Float64("rate", 2000, "the load's requests per second")
		seed := fs.Uint64("seed", 0, "randomness (0: from the clock)")
		clustered := fs.Bool("cluster", false, "two instances in cluster mode on a redis-server, Redis killed too")
		run = func() (string, bool, error) {
			if *clustered {
				r, err := chaos.ClusterCrashLoop(ctx, chaos.CrashOptions{Bin: *bin, Dir: *dir, Rounds: *rounds, Interval: *interval,
					MinUp: *minUp, MaxUp: *maxUp, Rate: *rate, Seed: *seed, Log: logTo(*verbose), Progress: os.Stdout})
				if err != nil {
					return "", false, err
				}
				return r.String(), r.OK(), nil
			}
			r, err := chaos.CrashLoop(ctx, chaos.CrashOptions{Bin: *bin, Dir: *dir, Rounds: *rounds, Interval: *interval,
				MinUp: *minUp, MaxUp: *maxUp, Rate: *rate, Seed: *seed, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "restart":
		restarts := fs.Int("restarts", 10, "restarts under load")
		rate := fs.Float64("rate", 1000, "the load's requests per second")
		conns := fs.Int("conns", 16, "the load's connections (half keep-alive, half one per request)")
		up := fs.Duration("up", time.Second, "how long each process serves before its restart")
		wrk := fs.String("wrk", "", "the load is wrk's (the `path` of wrk), not the driver's own")
		run = func() (string, bool, error) {
			r, err := chaos.Restarts(ctx, chaos.RestartOptions{Bin: *bin, Dir: *dir, Restarts: *restarts, Rate: *rate, Conns: *conns,
				Up: *up, Wrk: *wrk, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "soak":
		duration := fs.Duration("duration", 30*time.Minute, "how long the load runs")
		rate := fs.Float64("rate", 1000, "GET requests per second (POST /tx: a tenth)")
		interval := fs.Duration("interval", time.Second, "snapshot.interval")
		clustered := fs.Bool("cluster", false, "two instances in cluster mode on a redis-server, the load split between them")
		profiles := fs.String("profiles", "", "a `directory` for each instance's heap profile at the warm-up and at the end (admin.pprof)")
		run = func() (string, bool, error) {
			r, err := chaos.Soak(ctx, chaos.SoakOptions{Bin: *bin, Dir: *dir, Duration: *duration, Rate: *rate, Interval: *interval,
				Cluster: *clustered, Profiles: *profiles, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "aborts":
		duration := fs.Duration("duration", 3*time.Minute, "how long the waves come")
		peers := fs.Int("peers", 4, "aborting peers")
		limit := fs.Int("limit", 3, "general's concurrency_limit")
		perWave := fs.Int("per-wave", 6, "requests of each peer a wave")
		every := fs.Duration("every", 400*time.Millisecond, "a wave every")
		patience := fs.Duration("patience", 200*time.Millisecond, "each client hangs up after")
		work := fs.Duration("work", 1500*time.Millisecond, "the node works this long on each request")
		run = func() (string, bool, error) {
			r, err := chaos.Aborts(ctx, chaos.AbortOptions{Bin: *bin, Dir: *dir, Duration: *duration, Peers: *peers, Limit: *limit,
				PerWave: *perWave, Every: *every, Patience: *patience, Work: *work, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "slowreaders":
		duration := fs.Duration("duration", 3*time.Minute, "how long the phases alternate")
		phase := fs.Duration("phase", 6*time.Second, "one phase: the victim alone, or while the answers are held")
		pool := fs.Int("pool", 4, "server.upstream_max_conns")
		readers := fs.Int("readers", 0, "slow readers, each a peer (0: twice the pool)")
		size := fs.Int("size", 8<<20, "bytes of each reader's answer")
		unbuffered := fs.Bool("unbuffered", false, "answer_memory = answer_disk = 0: the attack as it was, a baseline")
		run = func() (string, bool, error) {
			r, err := chaos.SlowReaders(ctx, chaos.SlowReadersOptions{Bin: *bin, Dir: *dir, Duration: *duration, Phase: *phase,
				Pool: *pool, Readers: *readers, Size: *size, Unbuffered: *unbuffered, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "checkflood":
		duration := fs.Duration("duration", 3*time.Minute, "how long the flood runs")
		rate := fs.Float64("rate", 0, "checks a second (0: as fast as answered)")
		conns := fs.Int("conns", 8, "keep-alive connections")
		maxTracked := fs.Int("max-tracked", 10000, "peers.max_tracked")
		lease := fs.Duration("lease", 5*time.Second, "admin.check_lease")
		run = func() (string, bool, error) {
			r, err := chaos.CheckFlood(ctx, chaos.CheckFloodOptions{Bin: *bin, Dir: *dir, Duration: *duration, Rate: *rate, Conns: *conns,
				MaxTracked: *maxTracked, Lease: *lease, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	case "crowd":
		duration := fs.Duration("duration", 3*time.Minute, "how long the crowd sends")
		servers := fs.Int("servers", 8, "requests the node serves at a time")
		service := fs.Duration("service", 40*time.Millisecond, "the node's time for each")
		peers := fs.Int("peers", 16, "crowd peers")
		clients := fs.Int("clients", 3, "clients of each crowd peer (concurrency_limit: one more)")
		pace := fs.Duration("pace", 80*time.Millisecond, "each client sends one request every")
		maxLimit := fs.Int("max-limit", 16, "adaptive_max_limit")
		run = func() (string, bool, error) {
			r, err := chaos.Crowd(ctx, chaos.CrowdOptions{Bin: *bin, Dir: *dir, Duration: *duration, Servers: *servers, Service: *service,
				Peers: *peers, Clients: *clients, Pace: *pace, MaxLimit: *maxLimit, Log: logTo(*verbose), Progress: os.Stdout})
			if err != nil {
				return "", false, err
			}
			return r.String(), r.OK(), nil
		}
	default:
		fmt.Fprintf(os.Stderr, "chaos: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "chaos: -limiterd BIN is required")
		os.Exit(2)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	start := time.Now()
	report, ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	fmt.Print(report)
	fmt.Printf("(%s in %v)\n", os.Args[1], time.Since(start).Round(time.Second))
	if !ok {
		fmt.Println("FAILED")
		os.RemoveAll(*dir)
		os.Exit(1)
	}
}

func logTo(verbose bool) *os.File {
	if verbose {
		return os.Stderr
	}
	return nil
}
