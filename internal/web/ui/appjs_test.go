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
