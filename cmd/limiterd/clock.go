package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/clock"
)

var (
	descClockSteps = prometheus.NewDesc("limiterd_clock_steps_total",
		"Steps of the system's wall clock seen since the start (1 s or more at once); limiterd measures intervals on its own clock through them.", nil, nil)
	descClockOffset = prometheus.NewDesc("limiterd_clock_offset_seconds",
		"How far the system's wall clock is ahead of limiterd's own clock (negative: behind): the sum of the steps since the start.", nil, nil)
)

// clockMetrics returns the collector of c's steps and offset (an extra of
// metrics.NewCollector).
func clockMetrics(c *clock.Clock) func(ch chan<- prometheus.Metric) {
	return func(ch chan<- prometheus.Metric) {
		ch <- prometheus.MustNewConstMetric(descClockSteps, prometheus.CounterValue, float64(c.Steps()))
		ch <- prometheus.MustNewConstMetric(descClockOffset, prometheus.GaugeValue, c.Offset().Seconds())
	}
}
