package ui_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter/peer"
	"golang.org/x/net/html"
)

func TestDashboardHistory(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	sample := func() { s.History().Sample(d.Clock.Now(), d.Lim.Stats()) }
	sample()
	// Five requests from one peer in general (leaky_limit 3): 3 admitted,
	// 2 rejected by the rate limit, in the second after the baseline.
	d.Clock.Add(time.Second)
	g, _ := d.Lim.GroupID("general")
	a := webtest.MustAddr(t, "203.0.113.7")
	p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
	for range 5 {
		dec := d.Lim.Decide(d.Clock.Now(), p, g)
		dec.Release()
	}
	sample()
	d.Clock.Add(time.Second)
	sample()

	get := func(path string, hdr ...string) (int, map[string]any) {
		t.Helper()
		resp := d.Do("GET", path, nil, hdr...)
		defer resp.Body.Close()
		var v map[string]any
		if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, v
	}
	bearer := []string{"Authorization", "Bearer " + webtest.Token}
	for _, path := range []string{"/stats/history", "/stats/history?group=general&minutes=60", "/stats/history?minutes=1"} {
		code, v := get(path, bearer...)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, v)
		}
		ts := v["t"].([]any)
		if len(ts) != 3 || ts[0].(float64) != float64(d.Clock.Now().Unix()-2) {
			t.Fatalf("%s: t = %v", path, ts)
		}
		for key, want := range map[string][]float64{
			"requests": {0, 5, 0}, "admitted": {0, 3, 0}, "rejected_rate_limit": {0, 2, 0},
			"rejected_concurrency": {0, 0, 0}, "would_reject": {0, 0, 0}, "inflight": {0, 0, 0},
		} {
			got := v[key].([]any)
			for i := range want {
				if got[i].(float64) != want[i] {
					t.Fatalf("%s: %s = %v, want %v", path, key, got, want)
				}
			}
		}
	}
	// Another group saw nothing.
	if code, v := get("/stats/history?group=chunk", bearer...); code != 200 || v["requests"].([]any)[1].(float64) != 0 {
		t.Fatalf("chunk: %d %v", code, v)
	}
	// Unknown group, bad minutes: 422 with the field.
	for path, field := range map[string]string{
		"/stats/history?group=nope":      "group",
		"/stats/history?minutes=0":       "minutes",
		"/stats/history?minutes=61":      "minutes",
		"/stats/history?minutes=an+hour": "minutes",
	} {
		if code, v := get(path, bearer...); code != 422 || v["field"] != field {
			t.Fatalf("%s: %d %v", path, code, v)
		}
	}
	// No session, no token: sent to log in; a wrong token: 401.
	if resp := d.Do("GET", "/stats/history", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous: %d", resp.StatusCode)
	}
	if resp := d.Do("GET", "/stats/history", nil, "Authorization", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	// A session works too, with the dashboard's headers.
	cookie, csrf := d.Login()
	resp := d.Do("GET", "/stats/history?group=general", nil, "Cookie", cookie)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("session: %d %v", resp.StatusCode, resp.Header)
	}

	// The overview: the chart's div and, for no JavaScript, the table of
	// the last 10 minutes' totals.
	doc := d.Page("/", cookie)
	webtest.CheckPage(t, "/", doc, csrf)
	div := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "history-charts" })
	if len(div) != 1 || webtest.Attr(div[0], "data-history-url") != "/stats/history?minutes=60" {
		t.Fatalf("chart div: %v", div)
	}
	row := func(group string) map[string]string {
		rows := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && webtest.Attr(n, "data-history-group") == group })
		if len(rows) != 1 {
			t.Fatalf("%d history rows for %q", len(rows), group)
		}
		out := map[string]string{}
		for _, td := range webtest.Find(rows[0], webtest.ByTag("td")) {
			out[webtest.Attr(td, "data-col")] = webtest.Text(td)
		}
		return out
	}
	for _, group := range []string{"general", "All groups"} {
		if r := row(group); r["requests"] != "5" || r["admitted"] != "3" || r["rejected_rate_limit"] != "2" || r["rejected_concurrency"] != "0" {
			t.Fatalf("%s: %v", group, r)
		}
	}
	if r := row("chunk"); r["requests"] != "0" {
		t.Fatalf("chunk: %v", r)
	}
	opts := webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "option" && n.Parent != nil && webtest.Attr(n.Parent, "id") == "history-group"
	})
	if len(opts) != len(d.Lim.Stats())+1 {
		t.Fatalf("%d group options", len(opts))
	}
	// Ten minutes later the table has forgotten them; the hour has not.
	d.Clock.Add(11 * time.Minute)
	sample()
	if r := row2(t, d, cookie, "general"); r != "0" {
		t.Fatalf("after 11 minutes: %q", r)
	}
	if code, v := get("/stats/history?group=general", bearer...); code != 200 || len(v["t"].([]any)) != 3+660 {
		t.Fatalf("after 11 minutes: %d, %d seconds", code, len(v["t"].([]any)))
	}
}

// row2 is the requests cell of group's line in the overview's history table.
func row2(t *testing.T, d *webtest.Dash, cookie, group string) string {
	t.Helper()
	doc := d.Page("/", cookie)
	for _, td := range webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "td" && webtest.Attr(n, "data-col") == "requests" && n.Parent != nil && webtest.Attr(n.Parent, "data-history-group") == group
	}) {
		return webtest.Text(td)
	}
	t.Fatalf("no history row for %s", group)
	return ""
}
