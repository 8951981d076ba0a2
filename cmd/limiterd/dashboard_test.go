package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// browser starts Debian's Chromium headless for one test. Without it the
// test is skipped, except in CI, where it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs %s (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("no %s: %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// shot saves a full-page screenshot to artifacts/dashboard/<name>.png.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "artifacts", "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitText polls the text of sel until ok accepts it.
func waitText(t *testing.T, ctx context.Context, what string, sel chromedp.CSS, ok func(string) bool) string {
	t.Helper()
	var last string
	var lastErr error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last, lastErr = chromedp.Run(qctx, chromedp.Text(sel))
		cancel()
		if lastErr == nil && ok(last) {
			return last
		}
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("waiting for %s: last text %q, err %v", what, last, lastErr)
	return ""
}

// checkLabels fails when an input or select of the current page has no
// <label for>, and when htmx did not load (a CSP or embedding problem).
func checkLabels(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
		.filter(e => !e.id || !document.querySelector('label[for="' + CSS.escape(e.id) + '"]'))
		.map(e => e.name || e.outerHTML)`))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(unlabelled) > 0 {
		t.Errorf("%s: inputs without a label: %v", page, unlabelled)
	}
	if page == "login" {
		return
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`typeof htmx === "object" ? htmx.version : "missing"`))
	if err != nil || v != "2.0.11" {
		t.Errorf("%s: htmx %q, %v", page, v, err)
	}
}

// cspViolations collects what the browser's console reports about the
// Content-Security-Policy from now on (Chromium logs every refused script,
// style or attribute there).
func cspViolations(ctx context.Context) func() []string {
	var mu sync.Mutex
	var got []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy") {
				mu.Lock()
				got = append(got, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// waitChart waits until uPlot drew the overview's charts (its <canvas>)
// with the proxied requests in them, the JSON fetched under the session.
func waitChart(t *testing.T, ctx context.Context) {
	t.Helper()
	var last string
	var lastErr error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last, lastErr = chromedp.Run(qctx, chromedp.Evaluate[string](`(() => {
			const box = document.getElementById("history-charts");
			const table = document.getElementById("history-table");
			if (!box || box.querySelectorAll("canvas").length < 2 || !table.hidden) return "";
			return box.dataset.requests || "";
		})()`))
		cancel()
		if n, err := strconv.Atoi(last); lastErr == nil && err == nil && n > 0 {
			t.Logf("the charts show %d requests over %s seconds", n, must(chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("history-charts").dataset.seconds`))))
			return
		}
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("waiting for the charts: requests %q, err %v", last, lastErr)
}

func must[T any](v T, _ error) T { return v }

// waitPeerChart waits until uPlot drew a peer page's history charts (two
// <canvas> in #peer-history-charts, the table hidden) with at least
// requests requests in their data.
func waitPeerChart(t *testing.T, ctx context.Context, requests int) {
	t.Helper()
	var last string
	var lastErr error
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last, lastErr = chromedp.Run(qctx, chromedp.Evaluate[string](`(() => {
			const box = document.getElementById("peer-history-charts");
			const table = document.getElementById("peer-history-table");
			if (!box || box.querySelectorAll("canvas").length < 2 || !table.hidden) return "";
			return box.dataset.requests || "";
		})()`))
		cancel()
		if n, err := strconv.Atoi(last); lastErr == nil && err == nil && n >= requests {
			t.Logf("the peer's chart shows %d requests over %s points", n, must(chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("peer-history-charts").dataset.points`))))
			return
		}
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("waiting for the peer's chart: requests %q, err %v", last, lastErr)
}

func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	csp := cspViolations(ctx)
	up, _ := countingUpstream(t, nil)
	// A file entry for the exemptions page, shown read-only.
	d := startDaemon(t, up.URL, "\n[routes]\nexempt_paths = [\"/limiterd-test-exempt\"]\n")
	admin := d.AdminURL()

	// Log in through the form.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/")); err != nil {
		t.Fatal(err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/login") {
		t.Fatalf("not sent to the login page: %q %v", loc, err)
	}
	checkLabels(t, ctx, "login")
	shot(t, ctx, "01-login")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), "test-token"),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		chromedp.WaitVisible(chromedp.ID("stats")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	checkLabels(t, ctx, "overview")

	// An abusive peer: 127.0.0.1 exhausts general (leaky_limit 20).
	var rejected int
	for range 30 {
		if d.get("/info").StatusCode == 429 {
			rejected++
		}
	}
	if rejected != 10 {
		t.Fatalf("%d of 30 rejected, want 10", rejected)
	}
	// The overview picks it up by itself (htmx polls every 3 s).
	waitText(t, ctx, "rejections on the overview", `tr[data-group="general"] td[data-col="rejected_rate_limit"]`,
		func(s string) bool { return s == "10" })
	waitText(t, ctx, "the peer in the top list", `#top-peers tbody tr td code`,
		func(s string) bool { return s == "127.0.0.1" })
	// The charts of the last hour (uPlot, refreshed every 5 s) show them.
	waitChart(t, ctx)
	shot(t, ctx, "02-overview")

	// The peers page lists it; its page shows its state in general.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peers"),
		chromedp.WaitVisible(chromedp.ID("peers")),
	); err != nil {
		t.Fatalf("peers: %v", err)
	}
	waitText(t, ctx, "the peer on the peers page", `#peers tbody tr td code`, func(s string) bool { return s == "127.0.0.1" })
	checkLabels(t, ctx, "peers")
	shot(t, ctx, "03-peers")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#peers tbody tr td a`)),
		chromedp.WaitVisible(chromedp.ID("peer-state")),
	); err != nil {
		t.Fatalf("peer page: %v", err)
	}
	waitText(t, ctx, "the peer's tokens", `#peer-state tr[data-group="general"] td[data-col="tokens"]`, func(s string) bool { return s == "20" })
	checkLabels(t, ctx, "peer")
	shot(t, ctx, "04-peer")
	if d.get("/info").StatusCode != 429 {
		t.Fatal("the peer is not limited before the edit")
	}

	// Raise general's leaky_limit in the groups form.
	field := chromedp.ID("g-general-leaky_limit")
	save := chromedp.CSS(`#group-general form.group-form button[type="submit"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/groups"),
		chromedp.Clear(field),
		chromedp.SendKeys(field, "100"),
		chromedp.Click(save),
		chromedp.WaitVisible(chromedp.CSS(`#group-general p.flash`)),
	); err != nil {
		t.Fatalf("edit: %v", err)
	}
	checkLabels(t, ctx, "groups")
	if resp := d.get("/info"); resp.StatusCode != 200 {
		t.Fatalf("after raising leaky_limit: %d", resp.StatusCode)
	}

	// A bad value shows the message next to the field and changes nothing.
	if err := chromedp.Do(ctx,
		chromedp.Clear(field),
		chromedp.SendKeys(field, "-5"),
		chromedp.Click(save),
	); err != nil {
		t.Fatalf("bad edit: %v", err)
	}
	msg := waitText(t, ctx, "the validation message", `#group-general [data-field="leaky_limit"]`,
		func(s string) bool { return s != "" })
	t.Logf("validation message: %q", msg)
	shot(t, ctx, "05-groups-invalid")
	if code, v := d.admin("GET", "/api/v1/groups/general", ""); code != 200 || v["effective"].(map[string]any)["leaky_limit"] != float64(100) {
		t.Fatalf("after the bad value: %d %v", code, v["effective"])
	}

	// Add an exemption.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/exemptions"),
		chromedp.SendKeys(chromedp.ID("ex-value"), "198.51.100.0/24"),
		chromedp.SendKeys(chromedp.ID("ex-note"), "<b>browser test</b>"),
		chromedp.Click(chromedp.CSS(`#add-exemption button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#list-exempt_peer tr[data-source="live"]`)),
	); err != nil {
		t.Fatalf("exemption: %v", err)
	}
	waitText(t, ctx, "the live exemption", `#list-exempt_peer tr[data-source="live"] td code`, func(s string) bool { return s == "198.51.100.0/24" })
	waitText(t, ctx, "the file's exempt path", `#list-exempt_path tr[data-source="file"] td code`, func(s string) bool { return s == "/limiterd-test-exempt" })
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-source="file"] form').length`)); err != nil || n != 0 {
		t.Fatalf("file entries with a remove form: %d %v", n, err)
	}
	checkLabels(t, ctx, "exemptions")
	shot(t, ctx, "06-exemptions")

	// Both edits, by this session, in the audit log.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/audit"), chromedp.WaitVisible(chromedp.ID("audit"))); err != nil {
		t.Fatal(err)
	}
	audit := waitText(t, ctx, "the audit log", "#audit tbody", func(s string) bool {
		return strings.Contains(s, "group.patch") && strings.Contains(s, "exemption.add")
	})
	if strings.Count(audit, "group.patch") != 1 || !strings.Contains(audit, "session:") {
		t.Fatalf("audit: %q", audit)
	}
	checkLabels(t, ctx, "audit")
	shot(t, ctx, "07-audit")

	// The outbound throttle's page shows a call made through the API.
	if code, _ := d.admin("POST", "/api/v1/throttle", `{"peer":"node-a:1984","path":"/info"}`); code != 200 {
		t.Fatalf("throttle: %d", code)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/outbound"), chromedp.WaitVisible(chromedp.ID("outbound-keys"))); err != nil {
		t.Fatalf("outbound: %v", err)
	}
	waitText(t, ctx, "the outbound peer", `#outbound-keys tbody tr td code`, func(s string) bool { return s == "node-a:1984" })
	checkLabels(t, ctx, "outbound")
	shot(t, ctx, "08-outbound")

	// The abusive peer's page again: a reduction made there is in its
	// audit list, and its history chart (uPlot's <canvas> in the chart
	// container) is drawn with the requests it sends while the page is
	// open (Run samples it every 10 s, app.js refetches every 5 s).
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peer?key=127.0.0.1"),
		chromedp.WaitVisible(chromedp.ID("peer-history")),
		chromedp.Click(chromedp.CSS(`#peer-reduce button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("peer-audit")),
	); err != nil {
		t.Fatalf("peer page: %v", err)
	}
	waitText(t, ctx, "the reduction in the peer's audit list", `#peer-audit tbody tr td[data-col="action"]`, func(s string) bool { return s == "peer.reduce" })
	for range 5 {
		d.get("/info")
	}
	waitPeerChart(t, ctx, 5)
	checkLabels(t, ctx, "peer history")
	shot(t, ctx, "09-peer-history")
	// A peer nobody recorded: the page says its history starts now, and
	// the (empty) chart is drawn all the same.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peer?key=192.0.2.77"),
		chromedp.WaitVisible(chromedp.ID("peer-history-new")),
	); err != nil {
		t.Fatalf("unrecorded peer: %v", err)
	}
	waitPeerChart(t, ctx, 0)

	if v := csp(); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}

	// Log out: the overview asks for the token again.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/"),
		chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("logout: %v", err)
	}
}
