// Command adaptivecost measures what adaptive_concurrency adds to the
// decision path (docs/benchmarks.md, "Adaptive concurrency: what Decide
// costs"): Decide plus Release in the general group (2.9.6 limits: leaky
// 450 per 30 s, concurrency 150), 10 000 existing peers, with
// adaptive_concurrency off and on (a limit of 1000, above what the run holds
// in flight: every admission takes the group's count and its peer's slot
// and gives them back; the group never holds half its limit, so it keeps
// no fair pace), in one process. The two are interleaved in short
// chunks, off then on then on then off…, so that a noisy machine's load
// falls on both alike; each pair of chunks gives one ratio, and it prints
// their median and quartiles, and the fastest chunk of each. Serial, then
// with -parallel goroutines deciding at once. A third side, the floor, is
// off plus the least an exact count of the group's requests in flight can
// cost: one shared word, one atomic addition at the decision and one at
// the release; it runs in the same rotation, so that its ratio to off
// says what the adaptive side's parallel ratio is made of.
//
//	go -C bench run ./cmd/adaptivecost
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// at returns the clock of decision i: 10 µs apart, so that each of 10 000
// peers decides 10 times a second, inside the general group's leaky rate
// (450 per 30 s): the decisions are admissions, as the adaptive path's
// cost is theirs.
func at(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Microsecond) }

func main() {
	pairs := flag.Int("pairs", 400, "pairs of chunks")
	chunk := flag.Int("chunk", 20_000, "decisions per chunk")
	npeers := flag.Int("peers", 10_000, "peers")
	par := flag.Int("parallel", 2, "goroutines of the parallel case")
	flag.Parse()

	ps := make([]peer.Peer, *npeers)
	for i := range ps {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		ps[i] = peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
	}
	type side struct {
		l       *limiter.Limiter
		g       limiter.GroupID
		i       int // the next decision's index: its clock and peer
		allowed atomic.Int64
		// floor, when set: a word counting the side's requests in flight
		floor *atomic.Int64
	}
	build := func(on bool) *side {
		groups := limiter.ArweaveGroups()
		g := groups[limiter.GroupGeneral]
		g.AdaptiveConcurrency = on
		g.AdaptiveMinLimit, g.AdaptiveMaxLimit = 1000, 1000
		groups[limiter.GroupGeneral] = g
		l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		id, _ := l.GroupID(limiter.GroupGeneral)
		for i, p := range ps {
			d := l.Decide(at(i), p, id)
			d.Release()
		}
		if on {
			bench.MeasureQuota(l, id, ps, t0)
		}
		return &side{l: l, g: id, i: len(ps)}
	}
	off, on, floor := build(false), build(true), build(false)
	padded := new(struct {
		_ [64]byte
		n atomic.Int64
		_ [64]byte
	})
	floor.floor = &padded.n
	if v, ok := on.l.Adaptive(on.g); !ok || v.Limit != 1000 {
		fmt.Fprintf(os.Stderr, "adaptive side not on: %+v\n", v)
		os.Exit(1)
	}
	n := len(ps)
	// run makes k decisions on s over w goroutines and returns the ns per
	// decision.
	run := func(s *side, k, w int) float64 {
		start := time.Now()
		var wg sync.WaitGroup
		for j := range w {
			from := s.i + j*k/w
			wg.Go(func() {
				for i := from; i < from+k/w; i++ {
					if s.floor != nil {
						s.floor.Add(1)
					}
					d := s.l.Decide(at(i), ps[(i*7919)%n], s.g)
					if d.Allowed {
						s.allowed.Add(1)
					}
					d.Release()
					if s.floor != nil {
						s.floor.Add(-1)
					}
				}
			})
		}
		wg.Wait()
		s.i += k
		return float64(time.Since(start).Nanoseconds()) / float64(k)
	}
	fmt.Printf("%d pairs of %d decisions, %d peers; load %s\n", *pairs, *chunk, n, loadavg())
	for _, w := range []int{1, *par} {
		var ratios, fratios, offs, ons, floors []float64
		for p := range *pairs {
			// off, on and the floor, in an order turning with p
			sides := [3]*side{off, on, floor}
			var ns [3]float64
			for j := range 3 {
				k := (j + p) % 3
				ns[k] = run(sides[k], *chunk, w)
			}
			offs, ons, floors = append(offs, ns[0]), append(ons, ns[1]), append(floors, ns[2])
			ratios, fratios = append(ratios, ns[1]/ns[0]), append(fratios, ns[2]/ns[0])
		}
		for _, x := range [][]float64{ratios, fratios, offs, ons, floors} {
			slices.Sort(x)
		}
		q := func(x []float64, f float64) float64 { return x[int(f*float64(len(x)-1))] }
		name := "serial"
		if w > 1 {
			name = fmt.Sprintf("parallel (%d goroutines)", w)
		}
		fmt.Printf("%s: admitted off %.1f %%, on %.1f %%\n", name, 100*float64(off.allowed.Swap(0))/float64(*pairs**chunk), 100*float64(on.allowed.Swap(0))/float64(*pairs**chunk))
		fmt.Printf("%s: on/off per pair median %.3f (quartiles %.3f–%.3f); ns per decision off min %.1f median %.1f, on min %.1f median %.1f; min/min %.3f, median/median %.3f\n",
			name, q(ratios, 0.5), q(ratios, 0.25), q(ratios, 0.75), offs[0], q(offs, 0.5), ons[0], q(ons, 0.5), ons[0]/offs[0], q(ons, 0.5)/q(offs, 0.5))
		fmt.Printf("%s: floor (off + one shared in-flight word)/off median %.3f (quartiles %.3f–%.3f); floor ns min %.1f median %.1f\n",
			name, q(fratios, 0.5), q(fratios, 0.25), q(fratios, 0.75), floors[0], q(floors, 0.5))
	}
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	var a, b1, c string
	fmt.Sscan(string(b), &a, &b1, &c)
	return a + " " + b1 + " " + c
}
