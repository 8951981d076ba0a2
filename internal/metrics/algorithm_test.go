package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
)

// The metrics of groups on the other algorithms (docs/limiting.md): the Arweave
// counters as for the hybrid, limiterd's gauges of the algorithms' state.
func TestCollectorAlgorithms(t *testing.T) {
	groups := limiter.ArweaveGroups()
	for name, k := range map[string]algo.Kind{"api": algo.TokenBucket, "log": algo.SlidingLog} {
		g := groups[limiter.GroupGeneral]
		g.Algorithm, g.Limit, g.Period = k, 2, 60_000
		groups[name] = g
	}
	cfg := limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(lim, nil, nil))
	for _, name := range []string{"api", "log"} {
		g := groupID(t, lim, name)
		for _, p := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.1", "192.0.2.2"} {
			d := lim.Decide(t0, peerAt(t, lim, p), g)
			d.Release()
		}
	}
	checkSeries(t, series(t, reg), map[string]float64{
		`limiterd_algorithm_info{algorithm="token_bucket",limiter_id="api"}`: 1,
		`limiterd_algorithm_info{algorithm="sliding_log",limiter_id="log"}`:  1,
		`limiterd_algorithm_info{algorithm="hybrid",limiter_id="general"}`:   1,
		`ar_limiter_requests_total{limiter_id="api"}`:                        4,
		`ar_limiter_rejected_total{limiter_id="api",reason="rate_limit"}`:    1,
		`limiterd_admitted_total{limiter_id="api",via="algorithm"}`:          3,
		`limiterd_group_entries{limiter_id="api"}`:                           2,
		`limiterd_group_entries{limiter_id="log"}`:                           2,
		`limiterd_sliding_log_timestamps{limiter_id="log"}`:                  3,
		`limiterd_sliding_log_timestamps{limiter_id="api"}`:                  0,
		`limiterd_algorithm_state_dropped_total{limiter_id="log"}`:           0,
	})
	// Switching the sliding log to a fixed window drops its two entries.
	g := groups["log"]
	g.Algorithm = algo.FixedWindow
	cfg.Groups["log"] = g
	if _, err := lim.Apply(t0.Add(time.Second), cfg); err != nil {
		t.Fatal(err)
	}
	checkSeries(t, series(t, reg), map[string]float64{
		`limiterd_algorithm_info{algorithm="fixed_window",limiter_id="log"}`: 1,
		`limiterd_algorithm_state_dropped_total{limiter_id="log"}`:           2,
		`limiterd_group_entries{limiter_id="log"}`:                           0,
		`limiterd_sliding_log_timestamps{limiter_id="log"}`:                  0,
	})
}
