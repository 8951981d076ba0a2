package metrics_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestCollectorEvictions: an exhausted peer, then 1.5 × max_tracked new
// peers: limiterd_evictions_total counts every entry made beyond the cap
// (the exhausted peer's not among them: it is still rejected), and
// limiterd_tracked_entries stays at the cap.
func TestCollectorEvictions(t *testing.T) {
	const capacity = 400
	lim, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64, MaxTracked: capacity})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(lim, &insight.Latencies{}, &insight.ProxyCounters{}))
	general := groupID(t, lim, "general")
	abuser := peerAt(t, lim, "192.0.2.66")
	for {
		d := lim.Decide(t0, abuser, general)
		d.Release()
		if !d.Allowed {
			break
		}
	}
	const flood = capacity * 3 / 2
	for i := range flood {
		a := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i>>8, i&255))
		d := lim.Decide(t0, peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, general)
		d.Release()
	}
	if d := lim.Decide(t0, abuser, general); d.Allowed {
		t.Fatal("the abuser was admitted after the flood: its entry was evicted")
	}
	checkSeries(t, series(t, reg), map[string]float64{
		`limiterd_evictions_total{}`: 1 + flood - capacity,
		`limiterd_tracked_entries{}`: capacity,
	})
}
