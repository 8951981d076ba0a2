package web

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/web/api"
)

var (
	descBuildInfo = prometheus.NewDesc("limiterd_build_info",
		"Always 1; the labels say which limiterd runs.", []string{"version", "revision", "goversion"}, nil)
	descEnabled = prometheus.NewDesc("limiterd_limiter_enabled",
		"1 while the global switch is on, 0 while the limiter is switched off (POST /api/v1/limiter/off).", nil, nil)
	descReloadOK = prometheus.NewDesc("limiterd_config_last_reload_success",
		"1 if the last configuration load (the start, or the last SIGHUP) succeeded, 0 if a reload was refused.", nil, nil)
	descReloadTime = prometheus.NewDesc("limiterd_config_last_reload_success_timestamp_seconds",
		"When the configuration in force was loaded (Unix time): at start or by the last successful reload.", nil, nil)
	descRecordBytes = prometheus.NewDesc("limiterd_dashboard_record_bytes",
		"Memory held by the dashboard's bounded records (record: request_log, the what-if's last hour of requests; peer_history, the busiest and viewed peers' last hour). They fill over their first hour and stay at most limiterd_dashboard_record_max_bytes.", []string{"record"}, nil)
	descRecordMax = prometheus.NewDesc("limiterd_dashboard_record_max_bytes",
		"The most memory each of the dashboard's bounded records can hold (see limiterd_dashboard_record_bytes).", []string{"record"}, nil)
	descFleetSkipped = prometheus.NewDesc("limiterd_fleet_summaries_skipped_total",
		"Other instances' summaries read from Redis and not shown (cluster mode), by reason: size, schema (another version's, or not a summary), shape (a value of the wrong type or beyond its bound), time (dated over an hour ahead), name. Counted at each read of the fleet (at most one every 2 s).", []string{"reason"}, nil)
	descFleetWrites = prometheus.NewDesc("limiterd_fleet_publishes_total",
		"This instance's summaries written to Redis for the fleet (cluster mode; one every 2 s).", nil, nil)
	descFleetWriteErrors = prometheus.NewDesc("limiterd_fleet_publish_errors_total",
		"This instance's summaries that could not be written to Redis (cluster mode).", nil, nil)
	descFleetBytes = prometheus.NewDesc("limiterd_fleet_published_bytes",
		"The size of this instance's last summary written to Redis (cluster mode; at most 16384).", nil, nil)
	descAdminConns = prometheus.NewDesc("limiterd_admin_connections",
		"Connections open to the admin listener (at most admin.max_conns).", nil, nil)
	descAdminRefused = prometheus.NewDesc("limiterd_admin_connections_refused_total",
		"Connections to the admin listener answered 503 and closed: admin.max_conns were open and none idle.", nil, nil)
	descAdminIdleClosed = prometheus.NewDesc("limiterd_admin_idle_connections_closed_total",
		"Idle keep-alive connections to the admin listener closed to make room for a new one at admin.max_conns.", nil, nil)
	descAuthFailures = prometheus.NewDesc("limiterd_admin_auth_failures_total",
		"Wrong tokens presented to the admin listener (kind: login, the dashboard's form; bearer, an Authorization header).", []string{"kind"}, nil)
	descAdminExpensive = prometheus.NewDesc("limiterd_admin_expensive_calls_total",
		"Expensive admin calls (audit queries, peer searches, the what-if, the pages that grow with the tables), by outcome: run, or refused (503) because as many as run at once were under way for the whole wait.", []string{"outcome"}, nil)
	descAdminExpensiveRunning = prometheus.NewDesc("limiterd_admin_expensive_calls_running",
		"Expensive admin calls running now.", nil, nil)
	descAuthDelayed = prometheus.NewDesc("limiterd_admin_auth_delayed_total",
		"Wrong tokens answered after a delay: more than 5 a minute from one address.", nil, nil)
)

// DaemonMetrics sends the daemon's own gauges (an extra of metrics.NewCollector):
// limiterd_build_info, limiterd_limiter_enabled and the reload gauges.
func (s *Server) DaemonMetrics(ch chan<- prometheus.Metric) {
	b := s.opts.Build
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, b.Version, b.Revision, b.GoVersion)
	on := 0.0
	if s.lim.Enabled() {
		on = 1
	}
	ch <- prometheus.MustNewConstMetric(descEnabled, prometheus.GaugeValue, on)
	var info api.DaemonInfo
	if s.opts.Daemon != nil {
		info = s.opts.Daemon()
	}
	ok := 1.0
	if info.LastReloadError != "" {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(descReloadOK, prometheus.GaugeValue, ok)
	loaded := 0.0
	if !info.ConfigLoadedAt.IsZero() {
		loaded = float64(info.ConfigLoadedAt.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descReloadTime, prometheus.GaugeValue, loaded)
	ch <- prometheus.MustNewConstMetric(descAdminConns, prometheus.GaugeValue, float64(s.conns.Open()))
	ch <- prometheus.MustNewConstMetric(descAdminRefused, prometheus.CounterValue, float64(s.conns.Refused()))
	ch <- prometheus.MustNewConstMetric(descAdminIdleClosed, prometheus.CounterValue, float64(s.conns.IdleClosed()))
	ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(s.fails.login.Load()), "login")
	ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(s.fails.bearer.Load()), "bearer")
	ch <- prometheus.MustNewConstMetric(descAuthDelayed, prometheus.CounterValue, float64(s.fails.delayed.Load()))
	ch <- prometheus.MustNewConstMetric(descAdminExpensive, prometheus.CounterValue, float64(s.heavy.ran.Load()), "run")
	ch <- prometheus.MustNewConstMetric(descAdminExpensive, prometheus.CounterValue, float64(s.heavy.refused.Load()), "refused")
	ch <- prometheus.MustNewConstMetric(descAdminExpensiveRunning, prometheus.GaugeValue, float64(len(s.heavy.places)))
	skipped := s.fleetReader.SkippedCounts()
	for _, reason := range fleet.SkipReasons {
		ch <- prometheus.MustNewConstMetric(descFleetSkipped, prometheus.CounterValue, float64(skipped[reason]), reason)
	}
	var ps fleet.PublisherStats
	if s.publisher != nil {
		ps = s.publisher.Stats()
	}
	ch <- prometheus.MustNewConstMetric(descFleetWrites, prometheus.CounterValue, float64(ps.Writes))
	ch <- prometheus.MustNewConstMetric(descFleetWriteErrors, prometheus.CounterValue, float64(ps.Failures))
	ch <- prometheus.MustNewConstMetric(descFleetBytes, prometheus.GaugeValue, float64(ps.Bytes))
	for _, r := range []struct {
		name     string
		now, max int64
	}{
		{"request_log", s.activity.Log().Bytes(), insight.RequestLogMaxBytes},
		{"peer_history", s.peerHist.Bytes(), insight.PeerHistoryMaxBytes},
	} {
		ch <- prometheus.MustNewConstMetric(descRecordBytes, prometheus.GaugeValue, float64(r.now), r.name)
		ch <- prometheus.MustNewConstMetric(descRecordMax, prometheus.GaugeValue, float64(r.max), r.name)
	}
}
