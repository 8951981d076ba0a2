// Command adaptivesim runs the adaptive concurrency simulation
// (docs/benchmarks.md, "Adaptive concurrency: a crowd against a node"): the
// limiter core in front of a stand-in node serving -servers requests at a
// time in -service each, on a virtual clock, against a crowd of -crowd
// peers offering -overload times the node's capacity and one polite peer.
// It prints, in one run, adaptive concurrency off and on under the
// overload, a crowd of many small peers, and the node slowing down
// -slowdown times for 20 s and recovering; then it stops. With -seeds N it
// runs only the step, for -rand, -rand+1, … N runs, and prints how long
// the limit took to settle each way in each.
//
//	go -C bench run ./cmd/adaptivesim
//	go -C bench run ./cmd/adaptivesim -seeds 10
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter"
)

func main() {
	servers := flag.Int("servers", 16, "requests the node serves at a time")
	service := flag.Duration("service", 40*time.Millisecond, "the service time of a request")
	jitter := flag.Float64("jitter", 0, "the service time varies uniformly by up to this share of it")
	crowd := flag.Int("crowd", 12, "peers of the crowd")
	many := flag.Int("many", 400, "peers of the crowd of many small peers")
	overload := flag.Float64("overload", 3, "the crowd's offered load, times the node's capacity")
	polite := flag.Float64("polite", 2, "the polite peer's requests per second")
	timeout := flag.Duration("timeout", 5*time.Second, "the clients' timeout")
	slowdown := flag.Float64("slowdown", 4, "how much slower the node gets in the step")
	rnd := flag.Uint64("rand", 1, "the key of the run's random stream (the same one, the same run)")
	window := flag.Int64("window", 0, "adaptive_window, ms (0: the default)")
	smoothing := flag.Int64("smoothing", 0, "adaptive_smoothing, % (0: the default)")
	buffer := flag.Int64("buffer", -1, "adaptive_buffer, % (-1: the default)")
	percentile := flag.Int64("percentile", 0, "adaptive_percentile (0: the default)")
	seeds := flag.Int("seeds", 0, "run only the step, for this many -rand values from -rand on")
	trace := flag.Bool("trace", false, "also print the 3× overload run with adaptive on every 100 ms: the limit, the node's in flight, the slowest answer")
	flag.Parse()

	a := limiter.DefaultAdaptive()
	if *window > 0 {
		a.AdaptiveWindow = *window
	}
	if *smoothing > 0 {
		a.AdaptiveSmoothing = *smoothing
	}
	if *percentile > 0 {
		a.AdaptivePercentile = *percentile
	}
	if *buffer >= 0 {
		a.AdaptiveBuffer = *buffer
	}
	node := bench.SimNode{Servers: *servers, Service: *service, Jitter: *jitter}
	load := bench.SimLoad{Crowd: *crowd, Overload: *overload, PeerConcurrency: 150, Polite: *polite, ClientTimeout: *timeout}
	seed := *rnd
	run := func(adaptive bool, l bench.SimLoad, phases []bench.SimPhase) bench.SimResult {
		r, err := bench.RunSim(bench.SimConfig{Node: node, Load: l, Adaptive: adaptive, Settings: a,
			Warmup: 10 * time.Second, Phases: phases, Rand: seed})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return r
	}
	steady := []bench.SimPhase{{For: 60 * time.Second, Slowdown: 1}}
	stepPhases := []bench.SimPhase{{For: 30 * time.Second, Slowdown: 1}, {For: 20 * time.Second, Slowdown: *slowdown}, {For: 40 * time.Second, Slowdown: 1}}
	if *seeds > 0 {
		fmt.Printf("step (30 s, %g× slower for 20 s, 40 s), adaptive on; node %d at a time, %v each (jitter %g); crowd %d peers at %.1f× capacity; adaptive %+v\n",
			*slowdown, *servers, *service, *jitter, *crowd, *overload, a)
		fmt.Println("-rand  settles after the slowdown (≤ 10 s)  after the recovery (≤ 30 s)")
		met := 0
		for i := range *seeds {
			seed = *rnd + uint64(i)
			r := run(true, load, stepPhases)
			p := r.Phases
			down, up := r.Settle(p[1], p[2], 0.25), r.Settle(p[2], len(r.Limit), 0.25)
			ok := down >= 0 && down <= 10*time.Second && up >= 0 && up <= 30*time.Second
			if ok {
				met++
			}
			fmt.Printf("%5d  %31v  %28v\n", seed, down, up)
		}
		fmt.Printf("both targets met in %d of %d runs\n", met, *seeds)
		return
	}
	fmt.Printf("node: %d at a time, %v each (capacity %.0f/s); crowd: %d peers offering %.1f× capacity, %d in flight each at most; polite: %.1f/s; client timeout %v; -rand %d\n",
		*servers, *service, node.Capacity(), *crowd, *overload, load.PeerConcurrency, *polite, *timeout, *rnd)
	fmt.Printf("adaptive: %+v\n\n", a)

	quiet := load
	quiet.Overload = 0.3
	u := run(false, quiet, steady)
	fmt.Printf("unloaded (0.3× capacity, adaptive off): %v\n", u)
	off := run(false, load, steady)
	fmt.Printf("3× overload, adaptive off:               %v\n", off)
	on := run(true, load, steady)
	fmt.Printf("3× overload, adaptive on:                %v\n", on)
	fmt.Printf("  p99 / unloaded p99 = %.2f, p99 / unloaded p50 = %.2f, p99 / service time = %.2f\n",
		on.P99.Seconds()/u.P99.Seconds(), on.P99.Seconds()/u.P50.Seconds(), on.P99.Seconds()/service.Seconds())
	if *trace {
		fmt.Println("  every 100 ms: time, limit (* measuring), the node's in flight, the slowest answer of the 100 ms before")
		for i := range on.Limit {
			mark := ""
			if on.Probing[i] {
				mark = "*"
			}
			fmt.Printf("  %6.1fs %5d%-1s %5d %10v\n", float64(i)/10, on.Limit[i], mark, on.Node[i], on.Slowest[i])
		}
	}
	manyLoad := load
	manyLoad.Crowd = *many
	m := run(true, manyLoad, steady)
	fmt.Printf("%d small peers, adaptive on:            %v\n", *many, m)

	step := run(true, load, stepPhases)
	fmt.Printf("\nstep (30 s, %g× slower for 20 s, 40 s), adaptive on: %v\n", *slowdown, step)
	p := step.Phases
	fmt.Printf("  limit settles after the slowdown in %v, after the recovery in %v (±25%%)\n",
		step.Settle(p[1], p[2], 0.25), step.Settle(p[2], len(step.Limit), 0.25))
	slowS := time.Duration(float64(*service) * *slowdown)
	fmt.Printf("  its unloaded latency measures the slower node (%v ±25%%) after %v, the recovered one (%v ±25%%) after %v\n",
		slowS, step.Follow(p[1], p[2], slowS, 0.25), *service, step.Follow(p[2], len(step.Limit), *service, 0.25))
	fmt.Print("  limit every second:")
	for i := p[0]; i < len(step.Limit); i += 10 {
		if (i-p[0])%100 == 0 {
			fmt.Printf("\n   %3ds:", (i-p[0])/10)
		}
		mark := ""
		if step.Probing[i] {
			mark = "*"
		}
		fmt.Printf(" %d%s", step.Limit[i], mark)
	}
	fmt.Println()
}
