package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/limiter"
)

func TestExchangeCollector(t *testing.T) {
	lim := newLimiter(t)
	var ex insight.Exchanges
	general, chunk := groupID(t, lim, "general"), groupID(t, lim, "chunk")
	ex.Observe(general, 200, 3*time.Millisecond)
	ex.Observe(general, 204, 40*time.Millisecond)
	ex.Observe(general, 429, 20*time.Microsecond)
	ex.Observe(chunk, 502, 2*time.Second)
	ex.Observe(limiter.ExemptPathGroup, 204, time.Millisecond)
	ex.Observe(general, 0, time.Hour) // no proper answer: 5xx, past every bucket
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewExchangeCollector(&ex, lim.GroupName))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != "limiterd_proxy_request_duration_seconds" {
		t.Fatalf("families: %v", fams)
	}
	type series struct {
		count uint64
		sum   float64
		le5ms uint64 // the cumulative bucket le="0.005"
	}
	got := map[string]series{}
	for _, m := range fams[0].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		h := m.GetHistogram()
		s := series{count: h.GetSampleCount(), sum: h.GetSampleSum()}
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 0.005 {
				s.le5ms = b.GetCumulativeCount()
			}
		}
		got[strings.Join(labels, ",")] = s
	}
	want := map[string]series{
		"code=2xx,group=general":     {2, 0.043, 1},
		"code=4xx,group=general":     {1, 0.00002, 1},
		"code=5xx,group=general":     {1, 3600, 0},
		"code=5xx,group=chunk":       {1, 2, 0},
		"code=2xx,group=exempt_path": {1, 0.001, 1},
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, w := range want {
		g := got[k]
		if g.count != w.count || g.le5ms != w.le5ms || g.sum < w.sum*0.999 || g.sum > w.sum*1.001 {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
	}
}
