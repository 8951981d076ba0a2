package ui_test

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/internal/webtest"
)

// TestHealthStrip: every page shows the node's and limiterd's health, red
// where something is wrong; the overview leads with what is wrong; the
// JSON API says the same, with the busiest peer of the now window.
func TestHealthStrip(t *testing.T) {
	var t0 time.Time
	d, s := webtest.NewDashWith(t, nil, func(o *web.Options) {
		t0 = o.Now()
		o.Build = api.Build{Version: "v9.9.9"}
		o.Daemon = func() api.DaemonInfo {
			return api.DaemonInfo{StartedAt: t0, LastReloadAt: t0.Add(time.Second), LastReloadError: "config: server.listen: not host:port"}
		}
		o.Store = func() web.StoreHealth {
			return web.StoreHealth{SnapshotOK: t0, SnapshotFailed: t0.Add(2 * time.Second), SnapshotError: "save the snapshot: disk full", SnapshotEvery: 5 * time.Second, DBBytes: 3 << 20}
		}
		o.UpstreamError = func() (insight.UpstreamFailure, bool) {
			return insight.UpstreamFailure{At: t0.Add(3 * time.Second), Err: "dial tcp 127.0.0.1:1984: connect: connection refused"}, true
		}
	})
	cookie, csrf := d.Login()
	d.Clock.Add(12 * time.Second)
	d.Send("203.0.113.7", 8) // general: leaky_limit 3, so 5 rejected
	s.DrainActivity()

	item := func(doc *html.Node, id string) (class, value, title string) {
		t.Helper()
		n := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-health") == id })
		if len(n) != 1 {
			t.Fatalf("no health item %s", id)
		}
		v := webtest.Find(n[0], func(n *html.Node) bool { return strings.Contains(webtest.Attr(n, "class"), "hv") })
		return webtest.Attr(n[0], "class"), webtest.Text(v[0]), webtest.Attr(n[0], "title")
	}
	for _, path := range []string{"/", "/groups", "/peers", "/audit", "/exemptions"} {
		doc := d.Page(path, cookie)
		webtest.CheckPage(t, path, doc, csrf)
		if c := webtest.Attr(webtest.ByID(doc, "health"), "class"); !strings.Contains(c, "bad") {
			t.Errorf("%s: the strip is not red: %q", path, c)
		}
		for id, want := range map[string]string{
			"version": "v9.9.9", "uptime": "12 s", "reload": "refused 11 s ago", "snapshot": "failing 10 s ago",
			"db": "3 MiB", "backend": "local", "node": "up", "last-error": "9 s ago",
		} {
			if _, v, _ := item(doc, id); v != want {
				t.Errorf("%s: %s shows %q, want %q", path, id, v, want)
			}
		}
		if c, _, title := item(doc, "snapshot"); !strings.Contains(c, "bad") || title != "save the snapshot: disk full" {
			t.Errorf("%s: snapshot %q %q", path, c, title)
		}
		if c, _, title := item(doc, "reload"); !strings.Contains(c, "bad") || !strings.Contains(title, "not host:port") {
			t.Errorf("%s: reload %q %q", path, c, title)
		}
	}
	// The overview leads with what is wrong.
	doc := d.Page("/", cookie)
	var titles []string
	for _, li := range webtest.Find(webtest.ByID(doc, "problems"), webtest.ByTag("li")) {
		titles = append(titles, webtest.Attr(li, "data-problem"))
	}
	if got := strings.Join(titles, ","); got != "reload refused,snapshot failing" {
		t.Fatalf("problems %s", got)
	}
	// The API: the same problems, the peer with its rate.
	code, v := d.API("GET", "/api/v1/overview", "")
	if code != 200 {
		t.Fatalf("overview: %d", code)
	}
	top := v["top_rejected"].([]any)
	if len(top) != 1 {
		t.Fatalf("top_rejected %v", top)
	}
	p := top[0].(map[string]any)
	if p["peer"] != "203.0.113.7" || p["group"] != "general" || p["rate"].(float64)*v["window_s"].(float64) < 4.99 || p["rate"].(float64)*v["window_s"].(float64) > 5.01 {
		t.Fatalf("top_rejected %v over %v s", p, v["window_s"])
	}
	if probs := v["problems"].([]any); len(probs) != 2 || probs[0].(map[string]any)["severity"] != "bad" {
		t.Fatalf("problems %v", probs)
	}
}
