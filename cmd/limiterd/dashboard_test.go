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
	ctx, cancelTimeout := context.WithTimeout(ctx, 150*time.Second)
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

// waitText polls the text of sel until ok accepts it, for up to 15 s.
func waitText(t *testing.T, ctx context.Context, what string, sel chromedp.CSS, ok func(string) bool) string {
	t.Helper()
	return waitTextWithin(t, ctx, 15*time.Second, what, sel, ok)
}

// waitTextWithin is waitText for up to limit.
func waitTextWithin(t *testing.T, ctx context.Context, limit time.Duration, what string, sel chromedp.CSS, ok func(string) bool) string {
	t.Helper()
	var last string
	var lastErr error
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
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
	t.Fatalf("waiting %s for %s: last text %q, err %v", limit, what, last, lastErr)
	return ""
}

// attrOf returns attribute name of the first element sel matches.
func attrOf(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); return e ? (e.getAttribute(`+strconv.Quote(name)+`) || "") : "missing"; })()`))
	if err != nil {
		t.Fatalf("%s[%s]: %v", sel, name, err)
	}
	return v
}

// clearField empties the input of id, as selecting its text and deleting
// it would.
func clearField(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.getElementById(`+strconv.Quote(id)+`); e.value = ""; return true; })()`)); err != nil {
		t.Fatalf("clear %s: %v", id, err)
	}
}

// noSideScroll fails when the page is wider than the window (measured by
// the browser: document.documentElement.scrollWidth ≤ innerWidth).
func noSideScroll(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if v[0] > v[1] {
		t.Errorf("%s scrolls sideways at %d px: the page is %d px wide", page, v[1], v[0])
	}
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

	// An abusive peer: 127.0.0.1 exhausts general (leaky_limit 20). The
	// overview answers "who is hammering me now" by itself (htmx polls
	// every 3 s): the peer at the top of the rejected within 10 s.
	var rejected int
	for range 30 {
		if d.get("/info").StatusCode == 429 {
			rejected++
		}
	}
	if rejected != 10 {
		t.Fatalf("%d of 30 rejected, want 10", rejected)
	}
	attackEnd := time.Now()
	waitTextWithin(t, ctx, 10*time.Second, "the abusive peer at the top of the overview", `#top-rejected tbody tr:first-child td code`,
		func(s string) bool { return s == "127.0.0.1" })
	t.Logf("the abusive peer topped the overview %s after its attack", time.Since(attackEnd).Round(100*time.Millisecond))
	waitText(t, ctx, "its share rejected", `#top-rejected tbody tr:first-child td[data-col="rejected_pct"]`, func(s string) bool { return s == "33 %" })
	waitText(t, ctx, "general's rejections in the last minute", `#groups-now tr[data-group="general"] td[data-col="rejected"]`,
		func(s string) bool { return s != "" && !strings.HasPrefix(s, "0/s") })
	// The charts of the last hour (uPlot, refreshed every 5 s) show them,
	// general's rejections in the stacked chart.
	waitChart(t, ctx)
	waitText(t, ctx, "the stacked rejections", `#rejections-chart .u-title`, func(s string) bool { return strings.Contains(s, "stacked") })
	if g := attrOf(t, ctx, "#rejections-chart", "data-groups"); g != "general" {
		t.Fatalf("stacked groups %q", g)
	}
	shot(t, ctx, "02-overview")
	// The log scale and the clipped one redraw the charts.
	for _, scale := range []string{"log", "clip"} {
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("history-scale"), scale)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("history-scale").dispatchEvent(new Event("change"))`)); err != nil {
			t.Fatal(err)
		}
		waitChart(t, ctx)
	}
	shot(t, ctx, "02b-overview-clipped")

	// The peers page lists it, its tokens as used / limit.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peers"),
		chromedp.WaitVisible(chromedp.ID("peers")),
	); err != nil {
		t.Fatalf("peers: %v", err)
	}
	waitText(t, ctx, "the peer on the peers page", `#peers tbody tr td code`, func(s string) bool { return s == "127.0.0.1" })
	waitText(t, ctx, "its tokens", `#peers tbody tr td[data-col="tokens"] .num`, func(s string) bool { return s == "20 / 20" })
	checkLabels(t, ctx, "peers")
	shot(t, ctx, "03-peers")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peers?sort=rejection_rate"),
		chromedp.WaitVisible(chromedp.ID("peers")),
	); err != nil {
		t.Fatalf("peers by rate: %v", err)
	}
	waitText(t, ctx, "the peer by its rejection rate", `#peers tbody tr td code`, func(s string) bool { return s == "127.0.0.1" })
	// A bad search says so in words.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/peers?q=not-an-ip")); err != nil {
		t.Fatal(err)
	}
	msg := waitText(t, ctx, "the search's message", `#peer-search .error`, func(s string) bool { return s != "" })
	if strings.Contains(msg, "ParseAddr") || !strings.Contains(msg, "not an IP address") {
		t.Fatalf("search message %q", msg)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peer?key=127.0.0.1"),
		chromedp.WaitVisible(chromedp.ID("peer-state")),
	); err != nil {
		t.Fatalf("peer page: %v", err)
	}
	waitText(t, ctx, "the peer's tokens", `#peer-state tr[data-group="general"] [data-col="tokens"] .num`, func(s string) bool { return s == "20 / 20" })
	waitText(t, ctx, "its rejections on record", `#peer-offenses-table tr[data-group="general"] td[data-col="rejections"]`, func(s string) bool { return s == "10" })
	checkLabels(t, ctx, "peer")
	shot(t, ctx, "04-peer")
	if d.get("/info").StatusCode != 429 {
		t.Fatal("the peer is not limited before the edit")
	}

	// The groups: one line each; general's page.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/groups"), chromedp.WaitVisible(chromedp.ID("groups"))); err != nil {
		t.Fatal(err)
	}
	checkLabels(t, ctx, "groups")
	shot(t, ctx, "05-groups")
	field := chromedp.ID("g-general-leaky_limit")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/groups/general"),
		chromedp.WaitVisible(field),
	); err != nil {
		t.Fatalf("general's page: %v", err)
	}
	checkLabels(t, ctx, "group")
	// What if leaky_limit were 5 (it is 20)? Of the 31 requests of the
	// last hour 26 would have been rejected (11 now), before saving.
	clearField(t, ctx, "g-general-leaky_limit")
	if err := chromedp.Do(ctx, chromedp.SendKeys(field, "5")); err != nil {
		t.Fatal(err)
	}
	answer := waitText(t, ctx, "the what-if of a lower limit", `#whatif-leaky_limit .answer`, func(s string) bool { return s != "" })
	if now, then := attrOf(t, ctx, "#whatif-leaky_limit .answer", "data-now"), attrOf(t, ctx, "#whatif-leaky_limit .answer", "data-then"); now != "11" || then != "26" {
		t.Fatalf("what-if: now %s, then %s: %q", now, then, answer)
	}
	t.Logf("what-if: %q", answer)
	// The "What if?" button: the whole form's answers, in place (htmx).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("whatif-button")), chromedp.WaitVisible(chromedp.ID("whatif-record"))); err != nil {
		t.Fatalf("what-if button: %v", err)
	}
	if then := attrOf(t, ctx, "#whatif-leaky_limit .answer", "data-then"); then != "26" {
		t.Fatalf("what-if of the form: %s", then)
	}
	if code, v := d.admin("GET", "/api/v1/groups/general", ""); code != 200 || v["effective"].(map[string]any)["leaky_limit"] != float64(20) {
		t.Fatalf("the what-if changed something: %d %v", code, v["effective"])
	}
	shot(t, ctx, "06-group-whatif")

	// Raise general's leaky_limit and save.
	save := chromedp.CSS(`#group-general form.group-form button[type="submit"]`)
	clearField(t, ctx, "g-general-leaky_limit")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(field, "100"),
		chromedp.Click(save),
		chromedp.WaitVisible(chromedp.CSS(`#group-general p.flash`)),
	); err != nil {
		t.Fatalf("edit: %v", err)
	}
	if resp := d.get("/info"); resp.StatusCode != 200 {
		t.Fatalf("after raising leaky_limit: %d", resp.StatusCode)
	}

	// A bad value shows the message next to the field and changes nothing.
	clearField(t, ctx, "g-general-leaky_limit")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(field, "-5"),
		chromedp.Click(save),
	); err != nil {
		t.Fatalf("bad edit: %v", err)
	}
	msg = waitText(t, ctx, "the validation message", `#group-general [data-field="leaky_limit"]`,
		func(s string) bool { return s != "" })
	t.Logf("validation message: %q", msg)
	shot(t, ctx, "07-group-invalid")
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
	shot(t, ctx, "08-exemptions")

	// Both edits, by this session, in the audit log.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/audit"), chromedp.WaitVisible(chromedp.ID("audit"))); err != nil {
		t.Fatal(err)
	}
	audit := waitText(t, ctx, "the audit log", "#audit tbody", func(s string) bool {
		return strings.Contains(s, "group.patch") && strings.Contains(s, "exemption.add")
	})
	if strings.Count(audit, "group.patch") != 1 || !strings.Contains(audit, "session:") || !strings.Contains(audit, " UTC") {
		t.Fatalf("audit: %q", audit)
	}
	if title := attrOf(t, ctx, "#audit time", "title"); !strings.HasPrefix(title, "your time: ") {
		t.Fatalf("no local time on hover: %q", title)
	}
	checkLabels(t, ctx, "audit")
	shot(t, ctx, "09-audit")

	// The outbound throttle's page shows a call made through the API.
	if code, _ := d.admin("POST", "/api/v1/throttle", `{"peer":"node-a:1984","path":"/info"}`); code != 200 {
		t.Fatalf("throttle: %d", code)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/outbound"), chromedp.WaitVisible(chromedp.ID("outbound-keys"))); err != nil {
		t.Fatalf("outbound: %v", err)
	}
	waitText(t, ctx, "the outbound peer", `#outbound-keys tbody tr td code`, func(s string) bool { return s == "node-a:1984" })
	checkLabels(t, ctx, "outbound")
	shot(t, ctx, "10-outbound")

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
	shot(t, ctx, "11-peer-history")
	// Forgotten by the limiter, the peer's attack is still on record: its
	// page says it is not tracked and shows its rejections.
	// (form.submit() skips the button's confirmation dialog.)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("peer-forget").submit(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("peer-untracked"))); err != nil {
		t.Fatalf("forget: %v", err)
	}
	// (11: the 10 of the attack and the one that checked the edit.)
	waitText(t, ctx, "its rejections after the forgetting", `#peer-offenses-table tr[data-group="general"] td[data-col="rejections"]`, func(s string) bool { return s == "11" })
	shot(t, ctx, "12-peer-untracked")
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/offenders"), chromedp.WaitVisible(chromedp.ID("offenders"))); err != nil {
		t.Fatalf("offenders: %v", err)
	}
	waitText(t, ctx, "the offender", `#offenders tbody tr td code`, func(s string) bool { return s == "127.0.0.1" })
	shot(t, ctx, "13-offenders")
	// A peer nobody recorded: the page says its history starts now, and
	// the (empty) chart is drawn all the same.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(admin+"/peer?key=192.0.2.77"),
		chromedp.WaitVisible(chromedp.ID("peer-history-new")),
	); err != nil {
		t.Fatalf("unrecorded peer: %v", err)
	}
	waitPeerChart(t, ctx, 0)

	// An unknown address: the HTML page in the layout, the API's JSON.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/no/such/page"), chromedp.WaitVisible(chromedp.ID("not-found"))); err != nil {
		t.Fatalf("404: %v", err)
	}
	shot(t, ctx, "14-not-found")
	if code, v := d.admin("GET", "/api/v1/nope", ""); code != 404 || v["error"] == nil {
		t.Fatalf("API 404: %d %v", code, v)
	}

	// At 420 px: the menu folds, tables scroll in their cards, and no page
	// scrolls sideways (the peer back, to fill the tables).
	for range 25 {
		d.get("/info")
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(420, 860)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ path, id, name string }{
		{"/", "stats", "15-narrow-overview"},
		{"/peers", "peers", "16-narrow-peers"},
		{"/peer?key=127.0.0.1", "peer-history", "17-narrow-peer"},
		{"/groups", "groups", "18-narrow-groups"},
		{"/groups/general", "group-general", "19-narrow-group"},
		{"/offenders", "offenders", "20-narrow-offenders"},
		{"/exemptions", "add-exemption", "21-narrow-exemptions"},
		{"/audit", "audit", "22-narrow-audit"},
		{"/outbound", "outbound", "23-narrow-outbound"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(admin+p.path), chromedp.WaitVisible(chromedp.ID(p.id))); err != nil {
			t.Fatalf("%s at 420 px: %v", p.path, err)
		}
		if p.path == "/" {
			waitChart(t, ctx)
		}
		if open := attrOf(t, ctx, "#menu", "open"); open != "missing" && open != "" {
			// getAttribute gives "" for a present boolean attribute.
			t.Fatalf("%s: the menu is not folded at 420 px", p.path)
		}
		noSideScroll(t, ctx, p.path)
		shot(t, ctx, p.name)
	}
	// The menu opens.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#menu summary")), chromedp.WaitVisible(chromedp.CSS(`#menu nav a[href="/peers"]`))); err != nil {
		t.Fatalf("menu: %v", err)
	}
	noSideScroll(t, ctx, "the open menu")
	shot(t, ctx, "24-narrow-menu")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

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
