package web_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/internal/webtest"
)

func TestDaemonMetrics(t *testing.T) {
	o := webtest.NewOps(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(o.Lim, nil, nil, o.S.DaemonMetrics))
	want := func(enabled string) string {
		return `# HELP limiterd_build_info Always 1; the labels say which limiterd runs.
# TYPE limiterd_build_info gauge
limiterd_build_info{goversion="go1.26.8",revision="0123456789abcdef0123456789abcdef01234567",version="v1.2.3"} 1
# HELP limiterd_config_last_reload_success 1 if the last configuration load (the start, or the last SIGHUP) succeeded, 0 if a reload was refused.
# TYPE limiterd_config_last_reload_success gauge
limiterd_config_last_reload_success 1
# HELP limiterd_config_last_reload_success_timestamp_seconds When the configuration in force was loaded (Unix time): at start or by the last successful reload.
# TYPE limiterd_config_last_reload_success_timestamp_seconds gauge
limiterd_config_last_reload_success_timestamp_seconds 1.6999964e+09
# HELP limiterd_limiter_enabled 1 while the global switch is on, 0 while the limiter is switched off (POST /api/v1/limiter/off).
# TYPE limiterd_limiter_enabled gauge
limiterd_limiter_enabled ` + enabled + "\n"
	}
	names := []string{"limiterd_build_info", "limiterd_config_last_reload_success", "limiterd_config_last_reload_success_timestamp_seconds", "limiterd_limiter_enabled"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("1")), names...); err != nil {
		t.Error(err)
	}
	// The dashboard's records are empty and bounded: nothing was decided yet.
	records := `# HELP limiterd_dashboard_record_bytes Memory held by the dashboard's bounded records (record: request_log, the what-if's last hour of requests; peer_history, the busiest and viewed peers' last hour). They fill over their first hour and stay at most limiterd_dashboard_record_max_bytes.
# TYPE limiterd_dashboard_record_bytes gauge
limiterd_dashboard_record_bytes{record="peer_history"} 0
limiterd_dashboard_record_bytes{record="request_log"} 0
# HELP limiterd_dashboard_record_max_bytes The most memory each of the dashboard's bounded records can hold (see limiterd_dashboard_record_bytes).
# TYPE limiterd_dashboard_record_max_bytes gauge
limiterd_dashboard_record_max_bytes{record="peer_history"} 5.872e+06
limiterd_dashboard_record_max_bytes{record="request_log"} 1.6777216e+07
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(records), "limiterd_dashboard_record_bytes", "limiterd_dashboard_record_max_bytes"); err != nil {
		t.Error(err)
	}
	o.Call(webtest.Token, "POST", "/api/v1/limiter/off", "")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("0")), names...); err != nil {
		t.Error(err)
	}
}
