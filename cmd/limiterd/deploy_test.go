package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/redistest"
)

// The files of deploy/, from this package's directory.
const (
	unitFile      = "../../deploy/limiterd.service"
	socketFile    = "../../deploy/limiterd.socket"
	verifyUnits   = "../../deploy/verify-units.sh"
	rulesFile     = "../../deploy/prometheus/limiterd-rules.yml"
	rulesTests    = "../../deploy/prometheus/limiterd-rules.test.yml"
	operationsDoc = "../../docs/operations.md"
	metricsDoc    = "../../docs/metrics.md"
	dashboardFile = "../../deploy/grafana/limiterd.json"
)

// tool returns the path of a program the test needs: missing, it fails
// the test under CI (CI=true: .ci/run installs it) and skips it elsewhere.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/bin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (Debian package %s): .ci/run installs it", name, pkg)
	}
	t.Skipf("%s is missing (Debian package %s)", name, pkg)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&0o111 != 0
}

// unitKeys returns the keys of a systemd unit file and their values, in
// order.
func unitKeys(t *testing.T, path string) map[string][]string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = append(keys[k], v)
		}
	}
	return keys
}

// TestSystemdUnit: deploy/limiterd.service and limiterd.socket have what
// docs/operations.md ("The service", "Restarts nobody notices") says they
// have, the socket's addresses are the shipped config's, both pass
// `systemd-analyze verify` without a warning through
// deploy/verify-units.sh (the command the docs give to check them before
// installing), and the unit's command line is one limiterd takes.
func TestSystemdUnit(t *testing.T) {
	keys := unitKeys(t, unitFile)
	want := map[string]string{
		"Type": "notify", "NotifyAccess": "main", "StateDirectory": "limiterd", "ProtectSystem": "strict",
		"NoNewPrivileges": "yes", "ExecReload": "/bin/kill -HUP $MAINPID", "User": "limiterd", "Also": "limiterd.socket",
	}
	for k, v := range want {
		if !slices.Contains(keys[k], v) {
			t.Errorf("the unit's %s is %v, want %q", k, keys[k], v)
		}
	}
	execStart := keys["ExecStart"]
	if len(execStart) != 1 || !strings.HasPrefix(execStart[0], "/usr/bin/limiterd serve ") {
		t.Fatalf("ExecStart = %v", execStart)
	}
	listen := map[string]string{}
	for _, k := range config.Keys() {
		if k.Name == "server.listen" || k.Name == "admin.listen" {
			listen[k.Name], _ = k.Default.(string)
		}
	}
	if got := unitKeys(t, socketFile)["ListenStream"]; !slices.Equal(got, []string{listen["server.listen"], listen["admin.listen"]}) {
		t.Errorf("limiterd.socket listens on %q; the shipped config on %q then %q", got, listen["server.listen"], listen["admin.listen"])
	}

	bin := binary(t)
	// The command line, with the paths systemd would give, is one
	// limiterd takes: check-config in its place exits 0.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	os.WriteFile(cfg, []byte("[server]\nupstream = \"http://127.0.0.1:1984\"\n"), 0o600)
	args := strings.Fields(execStart[0])[1:]
	for i, a := range args {
		switch a {
		case "serve":
			args[i] = "check-config"
		case "/etc/limiterd/config.toml":
			args[i] = cfg
		case "${STATE_DIRECTORY}":
			args[i] = dir
		}
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Errorf("limiterd %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	tool(t, "systemd-analyze", "systemd")
	if out, err := exec.Command(verifyUnits, bin).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("deploy/verify-units.sh: %v\n%s", err, out)
	}
}

// TestPrometheusRules: promtool accepts the alerting rules, and their unit
// tests (input series, the alerts expected) pass; every alert has a test
// in which it fires, and a runbook section in docs/operations.md under its
// name, which its runbook annotation names.
func TestPrometheusRules(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	for path, v := range map[string]any{rulesFile: &rules, rulesTests: &tests} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	ops, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			if !fires[r.Alert] {
				t.Errorf("%s: no test of limiterd-rules.test.yml makes it fire", r.Alert)
			}
			if !strings.Contains(string(ops), "\n#### "+r.Alert+"\n") {
				t.Errorf("%s: no runbook section \"#### %s\" in docs/operations.md", r.Alert, r.Alert)
			}
			if want := "docs/operations.md, " + r.Alert; r.Annotations["runbook"] != want {
				t.Errorf("%s: runbook annotation %q, want %q", r.Alert, r.Annotations["runbook"], want)
			}
		}
	}
	if alerts < 10 {
		t.Fatalf("%d alerts read from %s", alerts, rulesFile)
	}

	promtool := tool(t, "promtool", "prometheus")
	out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "test", "rules", rulesTests).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// TestMetricsLint: `promtool check metrics` on limiterd's /metrics finds
// only the lints docs/metrics.md explains ("promtool check metrics"): the
// Arweave node's names, kept as the node has them.
func TestMetricsLint(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	up, _ := countingUpstream(t, nil)
	// general with adaptive concurrency on, for its gauges.
	d := startDaemon(t, up.URL, "adaptive_concurrency = true\n")
	for range 25 {
		d.get("/info")
	}
	resp, err := http.Get(d.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = resp.Body
	out, _ := cmd.CombinedOutput() // exit 3 when it finds lints
	var lints []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lints = append(lints, line)
		}
	}
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## promtool check metrics\n")
	if !ok {
		t.Fatal(`docs/metrics.md has no section "promtool check metrics"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		if l, ok := strings.CutPrefix(line, "| `"); ok {
			if lint, _, ok := strings.Cut(l, "` |"); ok {
				documented = append(documented, lint)
			}
		}
	}
	slices.Sort(lints)
	slices.Sort(documented)
	if len(lints) == 0 || !slices.Equal(lints, documented) {
		t.Errorf("promtool check metrics says:\n  %s\ndocs/metrics.md explains:\n  %s", strings.Join(lints, "\n  "), strings.Join(documented, "\n  "))
	}
}

// prometheusMetrics are the series Prometheus itself makes for a target,
// which the rules query beside limiterd's.
var prometheusMetrics = map[string]bool{"up": true}

// pendingMetrics are metrics the rules and the dashboard may query before
// limiterd exports them, each with the reason. Once exported, a metric
// must leave this list (the test says so).
var pendingMetrics = map[string]string{}

// clusterMetrics are exported in cluster mode only: read from a daemon on
// a redis-server, when one is installed (CI installs it).
var clusterMetrics = []string{"limiterd_cluster_redis_up"}

// TestDashboardAndRulesQueryExportedMetrics: every metric the Grafana
// dashboard and the alerting rules query is one a running limiterd
// exports (read from its /metrics after some traffic).
func TestDashboardAndRulesQueryExportedMetrics(t *testing.T) {
	queried := map[string][]string{} // metric → where
	for _, e := range dashboardExprs(t) {
		for _, m := range metricNames(e) {
			queried[m] = append(queried[m], "dashboard: "+e)
		}
	}
	for _, e := range rulesExprs(t) {
		for _, m := range metricNames(e) {
			queried[m] = append(queried[m], "rules: "+e)
		}
	}
	if len(queried) < 15 {
		t.Fatalf("only %d metrics found in the dashboard and the rules: the extraction is broken", len(queried))
	}

	exported := exportedMetrics(t)
	pendingNow := maps.Clone(pendingMetrics)
	if redistest.Available(t) {
		srv := redistest.Start(t)
		up, _ := countingUpstream(t, nil)
		d := startDaemonWith(t, clusterConfig(up.URL, srv.Addr(), ""))
		for m := range scrapeNames(t, d.AdminURL()) {
			exported[m] = true
		}
	} else {
		for _, m := range clusterMetrics {
			pendingNow[m] = "cluster mode: no redis-server here to scrape it from"
		}
	}
	for m, where := range queried {
		_, pending := pendingNow[m]
		switch {
		case exported[m] && pending:
			t.Errorf("%s is exported now: take it out of pendingMetrics", m)
		case !exported[m] && !pending && !prometheusMetrics[m]:
			t.Errorf("%s is not a metric limiterd exports; queried by:\n  %s", m, strings.Join(where, "\n  "))
		}
	}
}

// exportedMetrics scrapes a test daemon after traffic of every kind
// (admitted, rejected, proxied) and returns the sample names its /metrics
// has: a histogram's _bucket, _sum and _count.
func exportedMetrics(t *testing.T) map[string]bool {
	up, _ := countingUpstream(t, nil)
	// general with adaptive concurrency on, for its gauges.
	d := startDaemon(t, up.URL, "adaptive_concurrency = true\n")
	for range 25 {
		d.get("/info")
	}
	names := scrapeNames(t, d.AdminURL())
	for _, must := range []string{"limiterd_build_info", "limiterd_limiter_enabled", "limiterd_config_last_reload_success",
		"limiterd_config_last_reload_success_timestamp_seconds", "limiterd_proxy_request_duration_seconds_bucket"} {
		if !names[must] {
			t.Errorf("%s (docs/metrics.md) is not exported", must)
		}
	}
	return names
}

// scrapeNames returns the sample names of the /metrics at admin.
func scrapeNames(t *testing.T, admin string) map[string]bool {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		default:
			names[f[2]] = true
		}
	}
	return names
}

// dashboardExprs returns every PromQL expression of the dashboard: the
// panels' targets and the template variables' queries.
func dashboardExprs(t *testing.T) []string {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && (k == "expr" || k == "definition") {
					out = append(out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// rulesExprs returns the expr of every rule: a one-line value or a
// block scalar ("expr: |" and the lines indented below it).
func rulesExprs(t *testing.T) []string {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		trim := strings.TrimSpace(lines[i])
		v, ok := strings.CutPrefix(trim, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v != "|" && v != ">" && v != "|-" && v != ">-" {
			out = append(out, strings.Trim(v, `'"`))
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		var block []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			block = append(block, next)
			i++
		}
		out = append(out, strings.Join(block, "\n"))
	}
	return out
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promLabelVal = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)[^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values query) selects: its identifiers that are neither functions
// nor aggregations (followed by "("), keywords, labels (in braces or
// grouping clauses), durations nor Grafana variables.
func metricNames(expr string) []string {
	e := promLabelVal.ReplaceAllString(expr, "$1")
	e = promString.ReplaceAllString(e, `""`)
	for promBraces.MatchString(e) {
		e = promBraces.ReplaceAllString(e, " ")
	}
	e = promRange.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = regexp.MustCompile(`\$\{?\w+\}?`).ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the "e" of 1e3 and the like
		}
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promKeywords[strings.ToLower(name)] {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (instance, limiter_id) (rate(ar_limiter_rejected_total[5m])) / sum by (instance, limiter_id) (rate(ar_limiter_requests_total{a="b",c=~"$x"}[5m])) > 0.25`: "ar_limiter_rejected_total ar_limiter_requests_total",
		`histogram_quantile(0.99, sum by (le) (rate(limiterd_proxy_request_duration_seconds_bucket{group=~"$group"}[$__rate_interval])))`:                                 "limiterd_proxy_request_duration_seconds_bucket",
		`limiterd_limiter_enabled == 0 and on (instance) limiterd_build_info{version="v1 or x"}`:                                                                          "limiterd_limiter_enabled limiterd_build_info",
		`label_values(ar_limiter_requests_total{instance=~"$instance"}, limiter_id)`:                                                                                      "ar_limiter_requests_total",
		`increase(x_total[15m]) > 2e3 unless ignoring(kind) group_left(a) y`:                                                                                              "x_total y",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// TestMetricsDocumented: every metric a daemon exports after traffic of
// every kind (the Go runtime's go_* and process_* aside) has its row in
// docs/metrics.md, and every row names a metric limiterd exports (cluster
// mode's from a daemon on a redis-server, when one is installed).
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_:]+)(?:\\{[^`]*\\})?`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	exported := exportedMetrics(t)
	for _, m := range clusterMetrics {
		exported[m] = true
	}
	if redistest.Available(t) {
		srv := redistest.Start(t)
		up, _ := countingUpstream(t, nil)
		d := startDaemonWith(t, clusterConfig(up.URL, srv.Addr(), ""))
		for m := range scrapeNames(t, d.AdminURL()) {
			exported[m] = true
		}
	} else {
		for m := range documented {
			if strings.HasPrefix(m, "limiterd_cluster_") {
				exported[m] = true // not checked: no redis-server here
			}
		}
	}
	for m := range exported {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if !exported[family+"_bucket"] {
			family = m
		}
		if strings.HasPrefix(family, "go_") || strings.HasPrefix(family, "process_") {
			continue
		}
		if !documented[family] {
			t.Errorf("%s is exported but has no row in docs/metrics.md", family)
		}
	}
	for m := range documented {
		if !exported[m] && !exported[m+"_bucket"] {
			t.Errorf("docs/metrics.md documents %s, which limiterd does not export", m)
		}
	}
}
