package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tourPages are every page of the dashboard ({peer} stands for a peer of
// the test).
var tourPages = []struct{ path, name string }{
	{"/", "overview"},
	{"/groups", "groups"},
	{"/groups/general", "group"},
	{"/peers", "peers"},
	{"/peer?key={peer}", "peer"},
	{"/offenders", "offenders"},
	{"/exemptions", "exemptions"},
	{"/outbound", "outbound"},
	{"/audit", "audit"},
	{"/no/such/page", "not-found"},
}

// shotDir is where tour screenshots go: $LIMITERD_SHOTS/<mode>, else
// artifacts/dashboard/<mode> (git-ignored).
func shotDir(t *testing.T, mode string) string {
	t.Helper()
	dir := os.Getenv("LIMITERD_SHOTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts", "dashboard")
	}
	dir = filepath.Join(dir, mode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// notOnAPage are words no page may show: references outside the
// product (a contract's sections, issue numbers), placeholders, and Go's
// or the templates' leftovers.
var notOnAPage = regexp.MustCompile(`SPEC|§|(?i:\bissue\b)|#\d{2,}|,;|\bTODO\b|\bFIXME\b|\bXXX\b|(?i:lorem|ipsum|\bseed\b)|%!|\{\{|<nil>|NaN|undefined`)

// tour visits every page at 1400 and at 420 px: each renders, scrolls
// sideways at neither width (and at 1400 px no table scrolls in its
// card: no column is clipped), shows none of notOnAPage, and has its
// full-page screenshot saved under shotDir(mode), named
// <page>-<width>.png. The browser must be logged in.
func tour(t *testing.T, ctx context.Context, admin, mode, peer string) {
	t.Helper()
	dir := shotDir(t, mode)
	for _, w := range []int64{1400, 420} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		for _, p := range tourPages {
			path := strings.ReplaceAll(p.path, "{peer}", peer)
			if err := chromedp.Do(ctx, chromedp.Navigate(admin+path), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
				t.Fatalf("%s at %d px: %v", path, w, err)
			}
			if p.name == "overview" || p.name == "group" || p.name == "peer" {
				// The charts are drawn.
				time.Sleep(700 * time.Millisecond)
			}
			where := mode + " " + path + " at " + itoa(w) + " px"
			noSideScroll(t, ctx, where)
			if w >= 1400 {
				// No table needs its card's sideways scroll: no column clipped.
				clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".scroll")]
					.filter(e => e.scrollWidth > e.clientWidth + 1)
					.map(e => { const t = e.querySelector("table"); return (t && t.id || "a table") + " (" + e.scrollWidth + " > " + e.clientWidth + " px)"; })`))
				if err != nil {
					t.Fatal(err)
				}
				if len(clipped) > 0 {
					t.Errorf("%s: clipped, scrolled sideways in its card: %v", where, clipped)
				}
			}
			text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			if err != nil {
				t.Fatal(err)
			}
			if m := notOnAPage.FindString(text); m != "" {
				i := strings.Index(text, m)
				t.Errorf("%s shows %q: …%s…", where, m, text[max(0, i-60):min(len(text), i+60)])
			}
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("screenshot %s: %v", where, err)
			}
			if err := os.WriteFile(filepath.Join(dir, p.name+"-"+itoa(w)+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: screenshots of %d pages at 1400 and 420 px in %s", mode, len(tourPages), dir)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// loginShot saves the login page's screenshots at 1400 and 420 px under
// shotDir(mode), and checks it says where the token is.
func loginShot(t *testing.T, ctx context.Context, admin, mode string) {
	t.Helper()
	dir := shotDir(t, mode)
	for _, w := range []int64{1400, 420} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(admin+"/login"), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
			t.Fatal(err)
		}
		hint := waitText(t, ctx, "where the token is", "#token-hint", func(s string) bool { return s != "" })
		if !strings.Contains(hint, "admin.token") {
			t.Errorf("login page hint %q", hint)
		}
		noSideScroll(t, ctx, mode+" login at "+itoa(w)+" px")
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "login-"+itoa(w)+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
}
