package bench_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// recordPerShard is the daemon's ring per shard.
const recordPerShard = insight.ArrivalsPerShard

// BenchmarkDecideRecording is the A/B of the dashboard's record of
// decisions (insight.Recorder, the limiter's observer): Decide+Release in the default general
// group without it ("off", the baseline), recording every decision
// ("all", what a daemon does below insight.NthTarget decisions a second),
// and with the sampling insight.Activity settles on at this benchmark's
// own rate ("sampled"), alternating within each -count, serial and
// parallel, at 10 000 and 1 000 000 peers. The ring is never drained
// here: writing it costs the same full or not. Run with a count:
//
//	go test -run XXX -bench DecideRecording -benchtime 2000000x -count 6 ./bench/
func BenchmarkDecideRecording(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		ps := peers(n)
		for _, mode := range []string{"serial", "parallel"} {
			for _, rec := range []string{"off", "all", "sampled"} {
				b.Run(fmt.Sprintf("peers=%d/%s/record=%s", n, mode, rec), func(b *testing.B) {
					var opts []limiter.Option
					recorder := insight.NewRecorder(recordPerShard)
					if rec != "off" {
						opts = append(opts, limiter.WithObserver(recorder))
					}
					l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}, opts...)
					if err != nil {
						b.Fatal(err)
					}
					g, _ := l.GroupID(limiter.GroupGeneral)
					if rec == "sampled" {
						peer, nth := insight.ArrivalShifts(rateOf(b, ps))
						recorder.SetSampling(peer, nth)
						// (After the loop: ResetTimer drops reported metrics.)
						defer b.ReportMetric(float64(peer), "peer-shift")
						defer b.ReportMetric(float64(nth), "nth-shift")
					}
					// The same heap for every variant: the garbage of the
					// setup (and of rateOf's limiter) collected now, not
					// during the loop.
					runtime.GC()
					b.ReportAllocs()
					b.ResetTimer()
					if mode == "serial" {
						for i := 0; i < b.N; i++ {
							d := l.Decide(clock(i), ps[i%n], g)
							d.Release()
						}
						return
					}
					decideParallel(b, l, ps, g)
				})
			}
		}
	}
}

// rateOf is this benchmark's own rate of decisions a second: 200 000
// decisions of a limiter of its own over ps, timed.
func rateOf(b *testing.B, ps []peer.Peer) float64 {
	l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		b.Fatal(err)
	}
	g, _ := l.GroupID(limiter.GroupGeneral)
	start := time.Now()
	for i := range 200_000 {
		d := l.Decide(clock(i), ps[i%len(ps)], g)
		d.Release()
	}
	return 200_000 / time.Since(start).Seconds()
}

// BenchmarkDrainArrivals is what the dashboard's drain costs per recorded
// decision (ns/op is per arrival): the rings filled by 64 × 8192 decisions,
// then drained into a reused buffer.
func BenchmarkDrainArrivals(b *testing.B) {
	recorder := insight.NewRecorder(recordPerShard)
	l, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}, limiter.WithObserver(recorder))
	if err != nil {
		b.Fatal(err)
	}
	g, _ := l.GroupID(limiter.GroupGeneral)
	ps := peers(10_000)
	var buf []insight.Arrival
	const batch = 64 * recordPerShard / 2
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		b.StopTimer()
		for i := range batch {
			d := l.Decide(clock(i), ps[i%len(ps)], g)
			d.Release()
		}
		b.StartTimer()
		buf, _ = recorder.Drain(buf[:0])
	}
}
