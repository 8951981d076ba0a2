package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

var descExchange = prometheus.NewDesc("limiterd_proxy_request_duration_seconds",
	"Duration of the public listener's exchanges, from the request's arrival to the end of the response (proxied, rejected or failed), by group and status class; group=\"exempt_path\" for exempt paths.",
	[]string{"group", "code"}, nil)

// exchangeCollector is the prometheus.Collector of NewExchangeCollector.
type exchangeCollector struct {
	ex    *insight.Exchanges
	names func(limiter.GroupID) string
}

// NewExchangeCollector returns a prometheus.Collector of
// limiterd_proxy_request_duration_seconds{group,code}, read from ex at
// scrape time; names gives a group ID's name ("" for an ID no group has:
// its series are left out). A (group, code) series appears once it has an
// observation. It is safe for concurrent use.
func NewExchangeCollector(ex *insight.Exchanges, names func(limiter.GroupID) string) prometheus.Collector {
	return &exchangeCollector{ex: ex, names: names}
}

// Describe sends the histogram's descriptor.
func (c *exchangeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descExchange }

// Collect sends one histogram per (group, status class) observed.
func (c *exchangeCollector) Collect(ch chan<- prometheus.Metric) {
	bounds := insight.ExchangeBuckets()
	for g := range limiter.GroupID(limiter.MaxGroups + 1) {
		name := "exempt_path"
		if g != limiter.ExemptPathGroup {
			if name = c.names(g); name == "" {
				continue
			}
		}
		for i, code := range insight.StatusClasses {
			cum, count, sum := c.ex.Histogram(g, i).Snapshot()
			if count == 0 {
				continue
			}
			buckets := make(map[float64]uint64, len(cum))
			for j, n := range cum {
				buckets[bounds[j]] = n
			}
			ch <- prometheus.MustNewConstHistogram(descExchange, count, sum, buckets, name, code)
		}
	}
}
