package web

import (
	"github.com/limiterd/limiterd/throttle"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descThrottleWaiters = prometheus.NewDesc("limiterd_throttle_waiters", "Outbound calls waiting in POST /api/v1/throttle.", nil, nil)
	descThrottleKeys    = prometheus.NewDesc("limiterd_throttle_keys", "(peer, type) keys the outbound throttle tracks.", nil, nil)
	descThrottleCalls   = prometheus.NewDesc("limiterd_throttle_calls_total", "Outbound throttle calls by outcome.", []string{"outcome"}, nil)
)

// ThrottleMetrics returns an extra of NewCollector that sends the outbound throttle's metrics.
func ThrottleMetrics(th *throttle.Throttle) func(ch chan<- prometheus.Metric) {
	return func(ch chan<- prometheus.Metric) {
		st := th.Stats()
		ch <- prometheus.MustNewConstMetric(descThrottleWaiters, prometheus.GaugeValue, float64(st.Waiters))
		ch <- prometheus.MustNewConstMetric(descThrottleKeys, prometheus.GaugeValue, float64(st.Keys))
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Admitted), "admitted")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Delayed), "delayed")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Exempt), "exempt")
	}
}
