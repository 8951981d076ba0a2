package bench_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// peerLine stands for one peer's state in any exact limiter: one cache
// line with a lock word and two counters, updated under the lock.
type peerLine struct {
	lock atomic.Uint32
	a, b uint32
	_    [52]byte
}

func (p *peerLine) update() {
	for !p.lock.CompareAndSwap(0, 1) {
	}
	p.a++
	p.b += p.a
	p.lock.Store(0)
}

// lines returns n peer lines and a random order to visit them in, as a
// hashed table visits its entries.
func lines(n int) ([]peerLine, []uint32) {
	order := make([]uint32, n)
	for i := range order {
		order[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return make([]peerLine, n), order
}

// BenchmarkFloor measures what this machine allows any exact limiter,
// next to BenchmarkDecide and in the same run (see docs/benchmarks.md):
//
//   - update: the least a decision must do, updating one peer's line under
//     its own lock, for 1, 10 000 and 1 000 000 peers. Serially; in
//     parallel with every goroutine visiting every peer, as in
//     BenchmarkDecide's parallel cases (so a line is most often last
//     written by the other core and has to move); and in parallel on
//     private copies, one per goroutine, where nothing moves. The first
//     two bound the parallel speed-up of a decision: a decision of S ns
//     serially that moves one line costing B more per operation and core
//     can at best reach 2S/(S+B) on two cores.
//   - dependent-read: the latency of reading one random line of a
//     million when the address depends on the previous read (a pointer
//     chase): one DRAM and TLB miss, which a decision for a peer not in
//     cache cannot avoid.
func BenchmarkFloor(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("update/peers=%d/serial", n), func(b *testing.B) {
			ls, order := lines(n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ls[order[i%n]].update()
			}
		})
		b.Run(fmt.Sprintf("update/peers=%d/parallel", n), func(b *testing.B) {
			ls, order := lines(n)
			var seq atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1)) * 7919
				for pb.Next() {
					ls[order[i%n]].update()
					i++
				}
			})
		})
		b.Run(fmt.Sprintf("update/peers=%d/parallel-private", n), func(b *testing.B) {
			// One copy of the lines per goroutine (RunParallel starts
			// GOMAXPROCS of them), made before the timer starts.
			own := make([][]peerLine, runtime.GOMAXPROCS(0))
			var order []uint32
			for i := range own {
				own[i], order = lines(n)
			}
			var seq atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				j := int(seq.Add(1))
				ls := own[(j-1)%len(own)]
				i := j * 7919
				for pb.Next() {
					ls[order[i%n]].update()
					i++
				}
			})
		})
	}
	b.Run("dependent-read/peers=1000000", func(b *testing.B) {
		const n = 1_000_000
		ls, order := lines(n)
		// One cycle through every line in random order: line order[i]
		// points to order[i+1].
		for i := range order {
			ls[order[i]].a = order[(i+1)%n]
		}
		p := order[0]
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p = ls[p].a
		}
		sink = p
	})
}

var sink uint32
