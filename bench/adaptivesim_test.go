package bench_test

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/bench"
)

// TestAdaptiveSim runs the simulation's 3× overload (docs/benchmarks.md,
// "Adaptive concurrency: a crowd against a node") on its virtual clock, so
// its figures are the same on any machine: with adaptive concurrency on the
// node keeps ≥ 90 % of its capacity, the admitted requests' p99 within
// twice its unloaded latency and the polite peer ≥ 95 % of its requests;
// with it off the queue takes the answers past a second.
func TestAdaptiveSim(t *testing.T) {
	node := bench.SimNode{Servers: 16, Service: 40 * time.Millisecond}
	load := bench.SimLoad{Crowd: 12, Overload: 3, PeerConcurrency: 150, Polite: 2, ClientTimeout: 5 * time.Second}
	run := func(on bool) bench.SimResult {
		r, err := bench.RunSim(bench.SimConfig{Node: node, Load: load, Adaptive: on, Warmup: 10 * time.Second,
			Phases: []bench.SimPhase{{For: 60 * time.Second, Slowdown: 1}}, Rand: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	on := run(true)
	if on.Goodput < 0.9 || on.P99 > 2*node.Service || on.PoliteRate() < 0.95 || on.Shed == 0 {
		t.Errorf("adaptive on: %v", on)
	}
	off := run(false)
	if off.P50 < time.Second || off.Shed != 0 {
		t.Errorf("adaptive off: %v", off)
	}
	t.Logf("on: %v\noff: %v", on, off)
}
