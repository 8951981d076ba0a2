package ui

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/web/ui/static"
)

const chromiumPath = "/usr/bin/chromium"

// browser starts Chromium headless for one test; without it the test is
// skipped, but with CI=true, where it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs %s (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("no %s: %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// TestAppJSNumbers runs app.js's fmtNum in Chromium over the table
// number is tested with: the charts' axes and legends say what the
// tables say.
func TestAppJSNumbers(t *testing.T) {
	ctx := browser(t)
	r := chi.NewRouter()
	StaticRoutes(r)
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!DOCTYPE html><html><head><script src="/static/app.js?v=`+static.Version+`"></script></head><body></body></html>`)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	// JSON has no NaN or infinity: they travel as strings.
	ins := make([]any, len(numberCases))
	for i, c := range numberCases {
		ins[i] = c.in
		if math.IsNaN(c.in) || math.IsInf(c.in, 0) {
			ins[i] = "NaN"
		}
	}
	js, _ := json.Marshal(ins)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(`+string(js)+`).map(v => limiterd.fmtNum(v === "NaN" ? NaN : v))`))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range numberCases {
		if got[i] != c.want {
			t.Errorf("fmtNum(%v) = %q, want %q", c.in, got[i], c.want)
		}
	}
	// No value: uPlot passes null for a gap.
	if s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`limiterd.fmtNum(null) + "|" + limiterd.fmtNum(undefined)`)); err != nil || s != "–|–" {
		t.Errorf("fmtNum(null), (undefined) = %q, %v", s, err)
	}
}

// TestChartTimeAxes draws the overview's charts in Chromium from JSON of
// 1 to 60 minutes, at widths from 1400 to 420 px, and measures on the
// canvas (with the axis's own font) that no two time labels overlap, and
// that each label is a UTC time of its tick.
func TestChartTimeAxes(t *testing.T) {
	ctx := browser(t)
	minutes := 1
	r := chi.NewRouter()
	StaticRoutes(r)
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		v := static.Version
		io.WriteString(w, `<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/uPlot.min.css?v=`+v+`"><link rel="stylesheet" href="/static/app.css?v=`+v+`">
<script src="/static/uPlot.iife.min.js?v=`+v+`" defer></script><script src="/static/app.js?v=`+v+`" defer></script></head>
<body><main><div id="rejections-chart" class="charts" data-rejections-url="/r"></div><div id="history-charts" class="charts" data-history-url="/h"></div></main></body></html>`)
	})
	end := int64(1_800_000_000)
	r.Get("/h", func(w http.ResponseWriter, r *http.Request) {
		n := minutes * 60
		h := map[string][]int64{}
		for _, k := range []string{"t", "requests", "admitted", "rejected_concurrency", "rejected_rate_limit", "would_reject", "denied", "inflight"} {
			h[k] = make([]int64, n)
		}
		for i := range n {
			h["t"][i] = end - int64(n-1-i)
			h["requests"][i] = int64(3000 + i%7*100)
			h["rejected_rate_limit"][i] = int64(2900 + i%5*10)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h)
	})
	r.Get("/r", func(w http.ResponseWriter, r *http.Request) {
		n := minutes * 60
		step := min(max(n/60, 1), 10)
		var ts []int64
		var vals []float64
		for i := 0; i < n; i += step {
			ts = append(ts, end-int64(n-1-i))
			vals = append(vals, 2950)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"t": ts, "step": step, "groups": []any{map[string]any{"group": "general", "rejected": vals}}})
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	type axis struct {
		Values []string
		Gap    float64
	}
	for _, width := range []int64{1400, 1000, 420} {
		for _, m := range []int{1, 2, 3, 4, 5, 10, 30, 60} {
			minutes = m
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(srv.URL+"/")); err != nil {
				t.Fatal(err)
			}
			var got map[string]axis
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && got == nil; time.Sleep(200 * time.Millisecond) {
				got, _ = chromedp.Run(ctx, chromedp.Evaluate[map[string]axis](`(() => {
					const cs = limiterd.charts;
					if (!cs || !cs.rates || !cs.stack) return null;
					const out = {};
					for (const name of ["rates", "inflight", "stack"]) {
						const u = cs[name], ax = u.axes[0];
						if (!ax._values) return null;
						u.ctx.save();
						u.ctx.font = ax.font[0];
						let gap = 1e9;
						for (let i = 1; i < ax._splits.length; i++) {
							const a = u.valToPos(ax._splits[i-1], "x", true), b = u.valToPos(ax._splits[i], "x", true);
							gap = Math.min(gap, (b - a) - (u.ctx.measureText(ax._values[i-1]).width + u.ctx.measureText(ax._values[i]).width) / 2);
						}
						u.ctx.restore();
						out[name] = {Values: ax._values, Gap: gap / (window.devicePixelRatio || 1)};
					}
					return out;
				})()`))
			}
			if got == nil {
				t.Fatalf("%d px, %d min: the charts were not drawn", width, m)
			}
			for name, a := range got {
				if a.Gap < 4 {
					t.Errorf("%d px, %d min, %s: time labels %q overlap (%.1f px between two)", width, m, name, a.Values, a.Gap)
				}
				for _, v := range a.Values {
					if _, err := time.Parse("15:04:05", v); err != nil {
						if _, err := time.Parse("15:04", v); err != nil {
							t.Errorf("%d px, %d min, %s: label %q is not a time", width, m, name, v)
						}
					}
				}
			}
			t.Logf("%d px, %d min: %q (%.0f px apart at least)", width, m, got["rates"].Values, got["rates"].Gap)
		}
	}
}
