package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestAdaptiveDashboardInBrowser: a group with adaptive concurrency on,
// before a node slow enough to fill its limit, shows its limit, the
// latency it follows and what it shed on the group's page and on the
// overview, at 1400 px and at 420 px, where no page scrolls sideways.
func TestAdaptiveDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("from the node"))
	})
	d := startDaemonWith(t, func(dir string) string {
		c := testConfig(up.URL, dir, `adaptive_concurrency = true
adaptive_min_limit = 2
adaptive_max_limit = 8
adaptive_probe_samples = 5
`)
		c = strings.Replace(c, "leaky_limit = 20\nleaky_tick_reduction = 20\nconcurrency_limit = 5\n",
			"leaky_limit = 100000\nleaky_tick_reduction = 100000\nconcurrency_limit = 50\n", 1)
		if !strings.Contains(c, "leaky_limit = 100000") {
			t.Fatal("the test config changed: general's limits not raised")
		}
		return c
	})
	// 12 requests at a time: over the limit, so some is shed.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	stop := time.Now().Add(3 * time.Second)
	for range 12 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				r := d.get("/info")
				mu.Lock()
				codes[r.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[200] == 0 || codes[503] == 0 {
		t.Fatalf("answers %v: want some 200 and some shed 503", codes)
	}
	// The shed 503s are limiterd's own: the node answered every request
	// it was asked, and the health strip says no 5xx of it.
	time.Sleep(1100 * time.Millisecond) // the node's minute is sampled each second
	if o := d.overview(); len(o.Instances) != 1 || o.Instances[0].Node.Errors5xx != 0 || len(o.Problems) != 0 {
		t.Errorf("after %d sheds, the overview says %+v", codes[503], o)
	}
	admin := d.AdminURL()
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(admin+"/login"),
		chromedp.SendKeys(chromedp.ID("token"), "test-token"),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		chromedp.WaitVisible(chromedp.ID("stats")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	for _, w := range []struct {
		width, height int64
		name          string
	}{{1400, 900, "wide"}, {420, 860, "narrow"}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w.width, w.height)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ path, name string }{{"/groups/general", "group"}, {"/", "overview"}} {
			if err := chromedp.Do(ctx, chromedp.Navigate(admin+p.path), chromedp.WaitVisible(chromedp.ID("adaptive"))); err != nil {
				t.Fatalf("%s at %d px: %v", p.path, w.width, err)
			}
			const row = `#adaptive-table tr[data-group="general"] `
			waitText(t, ctx, "the limit", row+`td[data-col="limit"]`, func(s string) bool { return s != "" && s != "0" })
			waitText(t, ctx, "the latency", row+`td[data-col="unloaded"]`, func(s string) bool { return strings.HasSuffix(s, "ms") })
			waitText(t, ctx, "the shed", row+`td[data-col="shed"]`, func(s string) bool { return strings.Contains(s, "%") && !strings.HasPrefix(s, "0 ") })
			noSideScroll(t, ctx, p.path)
			shot(t, ctx, "adaptive-"+p.name+"-"+w.name)
		}
	}
}
