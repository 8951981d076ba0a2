package web

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
)

// Build is what the binary knows of its build (SPEC §2: from the Go build
// information, overridable with -ldflags -X).
type Build struct {
	// Version is the module version: a release tag, a pseudo-version, or
	// "(devel)" for a build in a checkout without a stamp.
	Version string `json:"version"`
	// Revision is the VCS revision ("" when the build did not record one).
	Revision string `json:"revision,omitempty"`
	// Modified is true when the checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// CommitTime is the revision's commit time (RFC 3339), if known.
	CommitTime string `json:"commit_time,omitempty"`
	// BuildTime is when the binary was built, if stamped.
	BuildTime string `json:"build_time,omitempty"`
	// GoVersion is the toolchain's, runtime.Version().
	GoVersion string `json:"go_version"`
}

// DaemonInfo is the daemon's state GET /api/v1/limiter reports besides
// the switch, and the reload metrics' source.
type DaemonInfo struct {
	// ConfigFile is the config file in use; "" for the embedded default.
	ConfigFile string
	// ConfigLoadedAt is when the config in force was loaded: at start or
	// by the last successful reload.
	ConfigLoadedAt time.Time
	// LastReloadAt is when a reload (SIGHUP) was last tried; zero when
	// none was.
	LastReloadAt time.Time
	// LastReloadError is why that reload was refused; "" when it
	// succeeded (or none was tried).
	LastReloadError string
	// StartedAt is when the daemon started serving.
	StartedAt time.Time
}

// limiterAnswer is GET /api/v1/limiter's body.
type limiterAnswer struct {
	Enabled bool         `json:"enabled"`
	Config  configAnswer `json:"config"`
	Version Build        `json:"version"`
	// StartedAt and UptimeSeconds say how long the daemon has served.
	StartedAt     *time.Time `json:"started_at,omitempty"`
	UptimeSeconds int64      `json:"uptime_seconds,omitempty"`
	// Token names the token of the request and its scope: what the caller
	// may do.
	Token tokenAnswer `json:"token"`
}

type configAnswer struct {
	File       string        `json:"file"`
	Embedded   bool          `json:"embedded"`
	LoadedAt   *time.Time    `json:"loaded_at,omitempty"`
	LastReload *reloadAnswer `json:"last_reload,omitempty"`
}

type reloadAnswer struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

type tokenAnswer struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// utcPtr returns &t in UTC, or nil for the zero time.
func utcPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// handleLimiter answers GET /api/v1/limiter: the global switch, the config
// file in use and its load time, the last reload, the version, and who is
// asking.
func (s *Server) handleLimiter(w http.ResponseWriter, r *http.Request) {
	var info DaemonInfo
	if s.opts.Daemon != nil {
		info = s.opts.Daemon()
	}
	tok, _, _ := s.bearer(r)
	name := tok.Name
	if name == "" {
		name = "admin"
	}
	a := limiterAnswer{
		Enabled: s.lim.Enabled(),
		Config: configAnswer{
			File: info.ConfigFile, Embedded: info.ConfigFile == "",
			LoadedAt: utcPtr(info.ConfigLoadedAt),
		},
		Version:   s.opts.Build,
		StartedAt: utcPtr(info.StartedAt),
		Token:     tokenAnswer{Name: name, Scope: tok.Scope.String()},
	}
	if !info.LastReloadAt.IsZero() {
		a.Config.LastReload = &reloadAnswer{At: info.LastReloadAt.UTC(), OK: info.LastReloadError == "", Error: info.LastReloadError}
	}
	if !info.StartedAt.IsZero() {
		a.UptimeSeconds = int64(s.now().Sub(info.StartedAt) / time.Second)
	}
	writeJSON(w, http.StatusOK, a)
}

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
	descAdminConns = prometheus.NewDesc("limiterd_admin_connections",
		"Connections open to the admin listener (at most admin.max_conns).", nil, nil)
	descAdminRefused = prometheus.NewDesc("limiterd_admin_connections_refused_total",
		"Connections to the admin listener answered 503 and closed: admin.max_conns were open and none idle.", nil, nil)
	descAdminIdleClosed = prometheus.NewDesc("limiterd_admin_idle_connections_closed_total",
		"Idle keep-alive connections to the admin listener closed to make room for a new one at admin.max_conns.", nil, nil)
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
	var info DaemonInfo
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
	for _, r := range []struct {
		name     string
		now, max int64
	}{
		{"request_log", s.dash.activity.Log().Bytes(), insight.RequestLogMaxBytes},
		{"peer_history", s.peerHist.Bytes(), insight.PeerHistoryMaxBytes},
	} {
		ch <- prometheus.MustNewConstMetric(descRecordBytes, prometheus.GaugeValue, float64(r.now), r.name)
		ch <- prometheus.MustNewConstMetric(descRecordMax, prometheus.GaugeValue, float64(r.max), r.name)
	}
}
