package bench_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

// BenchmarkRejectionLogged: what [log].rejections = "sampled" adds to a
// rejected request, the flood case: peers whose tokens are used up, every
// decision a 429. The baseline is the same Decide without the log
// ("decide"); "sampled" reports each rejection to a RejectLog (one line a
// minute per peer, to io.Discard); "off" to one switched off. One peer
// (every request on one shard lock) and 10 000.
func BenchmarkRejectionLogged(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		for _, mode := range []string{"decide", "sampled", "off"} {
			b.Run(fmt.Sprintf("peers=%d/%s", n, mode), func(b *testing.B) {
				l, g := arweave(b)
				ps := peers(n)
				// Use up every peer's 450 tokens.
				for _, p := range ps {
					for range 451 {
						d := l.Decide(t0, p, g)
						d.Release()
					}
				}
				var rl *insight.RejectLog
				if mode != "decide" {
					m := insight.RejectLogSampled
					if mode == "off" {
						m = insight.RejectLogOff
					}
					rl = insight.NewRejectLog(slog.New(slog.NewTextHandler(io.Discard, nil)), insight.RejectLogOptions{Mode: m, GroupName: l.GroupName})
				}
				now := t0.Add(1000) // before the first tick: still used up
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p := ps[i%n]
					d := l.Decide(now, p, g)
					if !d.Allowed && rl != nil {
						rl.Rejected(now, p.Key, d.Group, d.Reason)
					}
					d.Release()
				}
				if mode == "decide" {
					return
				}
				if d := l.Decide(t0.Add(1000), ps[0], g); d.Allowed || d.Reason != limiter.ReasonRateLimit {
					b.Fatalf("not a flood: %+v", d)
				}
			})
		}
	}
}
