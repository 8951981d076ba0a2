package metrics

import (
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descThrottleWaiters = prometheus.NewDesc("limiterd_throttle_waiters", "Outbound calls waiting in POST /api/v1/throttle.", nil, nil)
	descThrottleKeys    = prometheus.NewDesc("limiterd_throttle_keys", "(peer, type) keys the outbound throttle tracks.", nil, nil)
	descThrottleCalls   = prometheus.NewDesc("limiterd_throttle_calls_total", "Outbound throttle calls by outcome.", []string{"outcome"}, nil)

	descAdaptivePeers   = prometheus.NewDesc("limiterd_throttle_adaptive_peers", "Peers the adaptive outbound throttle tracks.", nil, nil)
	descAdaptiveQuotas  = prometheus.NewDesc("limiterd_throttle_adaptive_quotas", "(peer, group) quotas the adaptive outbound throttle learned.", nil, nil)
	descAdaptiveWaiting = prometheus.NewDesc("limiterd_throttle_adaptive_waiting", "Outbound calls waiting for a learned quota.", nil, nil)
	descObserve         = prometheus.NewDesc("limiterd_throttle_observe_total",
		"Replies reported to POST /api/v1/throttle/observe, by result: learned, skipped, or the reason they were refused (the 2.9.7 client's names, and limiterd's caps).", []string{"result"}, nil)
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
		ad := th.AdaptiveStats()
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(ad.Admitted), "adaptive_quota")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(ad.Queued), "adaptive_queued")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(ad.QueueFull), "adaptive_queue_full")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(ad.Passed), "adaptive_unthrottled")
		ch <- prometheus.MustNewConstMetric(descAdaptivePeers, prometheus.GaugeValue, float64(ad.Peers))
		ch <- prometheus.MustNewConstMetric(descAdaptiveQuotas, prometheus.GaugeValue, float64(ad.Quotas))
		ch <- prometheus.MustNewConstMetric(descAdaptiveWaiting, prometheus.GaugeValue, float64(ad.Waiting))
		ch <- prometheus.MustNewConstMetric(descObserve, prometheus.CounterValue, float64(ad.Learned), "learned")
		ch <- prometheus.MustNewConstMetric(descObserve, prometheus.CounterValue, float64(ad.Skipped), "skipped")
		for reason, n := range ad.Refused {
			ch <- prometheus.MustNewConstMetric(descObserve, prometheus.CounterValue, float64(n), reason)
		}
	}
}
