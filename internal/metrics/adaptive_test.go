package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/limiter"
)

// A group's adaptive concurrency (docs/metrics.md, "Adaptive concurrency"):
// its limit, the latencies it follows, its requests in flight, whether it
// is measuring, and its sheds as ar_limiter_rejected_total{reason=
// "adaptive"}; a group without it has none of these series.
func TestCollectorAdaptive(t *testing.T) {
	api := limitertest.Hybrid{Window: 100, WindowMS: 1000, TickMS: 30_000, Reduction: 1, Concurrency: 50}.Settings()
	api.Adaptive = limitertest.Adaptive{Min: 2, Max: 2, ProbeSamples: 1}.Settings()
	lim := limitertest.New(t, limitertest.Config(map[string]limiter.GroupSettings{"api": api}))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(lim, nil, nil))
	g, _ := lim.GroupID("api")
	checkSeries(t, series(t, reg), map[string]float64{
		`limiterd_adaptive_limit{limiter_id="api"}`:                     2,
		`limiterd_adaptive_probing{limiter_id="api"}`:                   1,
		`limiterd_adaptive_unloaded_latency_seconds{limiter_id="api"}`:  0,
		`ar_limiter_rejected_total{limiter_id="api",reason="adaptive"}`: 0,
	})
	p := limitertest.Peer("192.0.2.1")
	first := lim.Decide(limitertest.At(1), p, g)
	first.Sample(limitertest.At(2), 8448*time.Microsecond, false) // the measurement: done
	var held []limiter.Decision
	for range 5 {
		if d := lim.Decide(limitertest.At(3), p, g); d.Allowed {
			held = append(held, d)
		}
	}
	got := series(t, reg)
	checkSeries(t, got, map[string]float64{
		`limiterd_adaptive_limit{limiter_id="api"}`:                     2,
		`limiterd_adaptive_probing{limiter_id="api"}`:                   0,
		`limiterd_adaptive_inflight{limiter_id="api"}`:                  2,
		`limiterd_adaptive_unloaded_latency_seconds{limiter_id="api"}`:  0.008448,
		`limiterd_adaptive_latency_seconds{limiter_id="api"}`:           0,
		`ar_limiter_rejected_total{limiter_id="api",reason="adaptive"}`: 4,
		`ar_limiter_requests_total{limiter_id="api"}`:                   6,
	})
	for k := range got {
		if strings.Contains(k, `limiter_id="general"`) && (strings.Contains(k, "adaptive") || strings.Contains(k, `reason="adaptive"`)) {
			t.Errorf("general has no adaptive concurrency: %s", k)
		}
	}
	first.Release()
	for _, d := range held {
		d.Release()
	}
}
