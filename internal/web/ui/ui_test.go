package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

func TestDashboardPagesStructure(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	// Give the pages something to list.
	if _, err := d.Live.AddExemption(context.Background(), "test", live.Exemption{Kind: live.DenyPeer, Value: "198.51.100.0/24"}); err != nil {
		t.Fatal(err)
	}
	g, _ := d.Lim.GroupID("general")
	for _, ip := range []string{"203.0.113.9", "2001:db8::1"} {
		a := webtest.MustAddr(t, ip)
		dec := d.Lim.Decide(d.Clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		dec.Release()
	}
	for _, path := range []string{"/", "/groups", "/groups/general", "/exemptions", "/audit", "/peers", "/peers?q=bogus",
		"/peers?sort=request_rate", "/peers?sort=rejection_rate&group=general", "/peer?key=203.0.113.9", "/peer?key=2001:db8::/64",
		"/peer?key=198.51.100.200", "/outbound", "/offenders"} {
		resp := d.Do("GET", path, nil, "Cookie", cookie)
		if resp.StatusCode != 200 && !(path == "/peers?q=bogus" && resp.StatusCode == http.StatusUnprocessableEntity) {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		doc := webtest.Parse(t, resp)
		webtest.CheckPage(t, path, doc, csrf)
		if len(webtest.Find(doc, webtest.ByTag("h1"))) != 1 {
			t.Errorf("%s: want one h1", path)
		}
	}
	// The login page, without a session.
	resp := d.Do("GET", "/login", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("login page: %d", resp.StatusCode)
	}
	webtest.CheckPage(t, "/login", webtest.Parse(t, resp), "")
	// Groups: one row per group linking to its page, whose form has every
	// group key (limiter.GroupKeys), each with its help.
	doc := d.Page("/groups", cookie)
	rows := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && webtest.HasAttr(n, "data-group") })
	if len(rows) != len(d.Live.Groups()) {
		t.Fatalf("%d group rows for %d groups", len(rows), len(d.Live.Groups()))
	}
	for _, r := range rows {
		g := webtest.Attr(r, "data-group")
		if a := webtest.Find(r, webtest.ByTag("a")); len(a) == 0 || webtest.Attr(a[0], "href") != "/groups/"+g {
			t.Fatalf("row %s: no link to its page", g)
		}
		f := webtest.Find(d.Page("/groups/"+g, cookie), func(n *html.Node) bool { return n.Data == "form" && webtest.Attr(n, "action") == "/groups/"+g })
		if len(f) != 1 || webtest.Attr(f[0], "hx-post") != webtest.Attr(f[0], "action") {
			t.Fatalf("group %s: form %v", g, f)
		}
		for _, k := range limiter.GroupKeys {
			if len(webtest.Find(f[0], func(n *html.Node) bool { return webtest.Attr(n, "name") == k })) != 1 {
				t.Errorf("form %s: no field %s", g, k)
			}
		}
		help := webtest.Find(f[0], func(n *html.Node) bool { return webtest.Attr(n, "id") == "g-"+g+"-leaky_limit-help" })
		if len(help) != 1 || webtest.Text(help[0]) != "tokens a peer may hold consumed." {
			t.Errorf("group %s: leaky_limit's help %v", g, help)
		}
	}
	// The overview polls its stats partial.
	doc = d.Page("/", cookie)
	poll := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "stats" })
	if len(poll) != 1 || webtest.Attr(poll[0], "hx-get") != "/stats" || webtest.Attr(poll[0], "hx-trigger") != "every 3s" {
		t.Fatalf("stats poll: %v", poll)
	}
}

func TestDashboardSecurityHeaders(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, _ := d.Login()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
	}
	for _, path := range []string{"/", "/stats", "/groups", "/exemptions", "/audit", "/login", "/static/app.js"} {
		c := cookie
		if path == "/login" {
			c = "" // a session is sent on to the overview
		}
		resp := d.Do("GET", path, nil, "Cookie", c)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s = %q", path, k, got)
			}
		}
	}
	// Unauthenticated pages redirect to the login, and carry the headers too.
	resp := d.Do("GET", "/groups", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("no session: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestDashboardStatic(t *testing.T) {
	d := webtest.NewDash(t)
	for path, ctype := range map[string]string{
		"/static/htmx.min.js":       "text/javascript",
		"/static/uPlot.iife.min.js": "text/javascript",
		"/static/uPlot.min.css":     "text/css",
		"/static/app.css":           "text/css",
		"/static/htmx.LICENSE":      "",
	} {
		resp := d.Do("GET", path, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=31536000") {
			t.Errorf("%s: Cache-Control %q", path, cc)
		}
	}
	if resp := d.Do("GET", "/static/", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("directory listing: %d", resp.StatusCode)
	}
}

const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
