package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

var (
	descPeersSeen = prometheus.NewDesc("limiterd_peers_seen",
		"Distinct peers the group decided about over the last five minutes (an estimate, about 3 % off).",
		[]string{"limiter_id"}, nil)
	descPeersRejected = prometheus.NewDesc("limiterd_peers_rejected",
		"Distinct peers the group rejected (429) at least once over the last five minutes (an estimate, about 3 % off).",
		[]string{"limiter_id"}, nil)
)

// peerShareCollector is the prometheus.Collector of NewPeerShareCollector.
type peerShareCollector struct {
	s     *insight.PeerShare
	names func(limiter.GroupID) string
	now   func() time.Time
}

// NewPeerShareCollector returns a prometheus.Collector of
// limiterd_peers_seen{limiter_id} and limiterd_peers_rejected{limiter_id},
// read from s at scrape time at now; names gives a group ID's name (a
// group without one, or without a decision yet, has no series). It is
// safe for concurrent use.
func NewPeerShareCollector(s *insight.PeerShare, names func(limiter.GroupID) string, now func() time.Time) prometheus.Collector {
	return &peerShareCollector{s: s, names: names, now: now}
}

// Describe sends the gauges' descriptors.
func (c *peerShareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPeersSeen
	ch <- descPeersRejected
}

// Collect sends both gauges of every group decided about.
func (c *peerShareCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now().UnixMilli()
	for g := range limiter.GroupID(limiter.MaxGroups) {
		name := c.names(g)
		if name == "" {
			continue
		}
		seen, rejected, ok := c.s.Counts(g, now)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descPeersSeen, prometheus.GaugeValue, seen, name)
		ch <- prometheus.MustNewConstMetric(descPeersRejected, prometheus.GaugeValue, rejected, name)
	}
}
