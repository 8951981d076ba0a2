package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
	"golang.org/x/net/html"
)

func TestDashboardGroupEdit(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	post := func(form url.Values, hdr ...string) *http.Response {
		form.Set("csrf", csrf)
		return d.Do("POST", "/groups/general", form, append([]string{"Cookie", cookie}, hdr...)...)
	}
	for _, bad := range []struct{ key, value string }{
		{"leaky_limit", "abc"},
		{"leaky_limit", "-1"},
		{"concurrency_limit", "0"},
		{"mode", "loud"},
	} {
		resp := post(url.Values{bad.key: {bad.value}, "leaky_tick_reduction": {"7"}})
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("%s=%s: %d", bad.key, bad.value, resp.StatusCode)
		}
		doc := webtest.Parse(t, resp)
		msg := webtest.Find(doc, func(n *html.Node) bool { return webtest.HasAttr(n, "data-field") })
		if len(msg) != 1 || webtest.Attr(msg[0], "data-field") != bad.key || webtest.Text(msg[0]) == "" {
			t.Fatalf("%s=%s: message %v", bad.key, bad.value, msg)
		}
		// The field keeps what was typed.
		in := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "g-general-"+bad.key })
		if len(in) != 1 || (in[0].Data == "input" && webtest.Attr(in[0], "value") != bad.value) || webtest.Attr(in[0], "aria-invalid") != "true" {
			t.Fatalf("%s=%s: field %v", bad.key, bad.value, in)
		}
		webtest.CheckPage(t, "/groups (422)", doc, csrf)
		if v, _ := d.Live.Group("general"); v.Effective.LeakyLimit != 3 || v.Effective.LeakyTickReduction != 3 || len(v.Override) != 0 {
			t.Fatalf("%s=%s changed the group: %+v", bad.key, bad.value, v)
		}
	}
	// htmx gets only the form back.
	resp := post(url.Values{"leaky_limit": {"x"}}, "HX-Request", "true")
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("htmx 422: %d", resp.StatusCode)
	}
	doc := webtest.Parse(t, resp)
	if len(webtest.Find(doc, webtest.ByTag("h1"))) != 0 || len(webtest.Find(doc, webtest.ByTag("section"))) != 1 {
		t.Fatal("htmx got more than the form")
	}
	// A good value: applied, the file value shown beside the override.
	resp = post(url.Values{"leaky_limit": {"100"}, "concurrency_limit": {"150"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/groups/general?done=saved" {
		t.Fatalf("save: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	v, _ := d.Live.Group("general")
	if v.Effective.LeakyLimit != 100 || len(v.Override) != 1 {
		t.Fatalf("after save: %+v override %v", v.Effective, v.Override)
	}
	doc = d.Page("/groups/general?done=saved", cookie)
	webtest.CheckPage(t, "/groups/general", doc, csrf)
	field := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-key") == "leaky_limit" })[0]
	in := webtest.Find(field, func(n *html.Node) bool { return webtest.Attr(n, "name") == "leaky_limit" })[0]
	if webtest.Attr(in, "value") != "100" || !strings.Contains(webtest.Attr(field, "class"), "overridden") || !strings.Contains(webtest.Text(field), "config.toml: 3") {
		t.Fatalf("override display: %q", webtest.Text(field))
	}
	// The table of groups marks it, the file value beside it.
	doc = d.Page("/groups", cookie)
	cell := webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "td" && webtest.Attr(n, "data-col") == "leaky_limit" && webtest.Attr(n.Parent, "data-group") == "general"
	})
	if len(cell) != 1 || len(webtest.Find(cell[0], webtest.ByTag("mark"))) != 1 || webtest.Text(cell[0]) != "100 (3)" {
		t.Fatalf("table cell: %v", cell)
	}
	// Back to the file value.
	resp = d.Do("POST", "/groups/general/reset", url.Values{"csrf": {csrf}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if v, _ := d.Live.Group("general"); v.Effective.LeakyLimit != 3 || len(v.Override) != 0 {
		t.Fatalf("after reset: %+v", v)
	}
	if resp := d.Do("POST", "/groups/nope", url.Values{"csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group: %d", resp.StatusCode)
	}
}

func TestDashboardEscapesHostileStrings(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	path := "/x/" + hostile
	resp := d.Do("POST", "/exemptions", url.Values{"csrf": {csrf}, "kind": {"exempt_path"}, "value": {path}, "note": {hostile}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d", resp.StatusCode)
	}
	// A bad value re-renders the form with the typed (hostile) value.
	resp = d.Do("POST", "/exemptions", url.Values{"csrf": {csrf}, "kind": {"deny_peer"}, "value": {hostile}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad add: %d", resp.StatusCode)
	}
	bad := webtest.Parse(t, resp)
	resp = d.Do("GET", "/peer?key="+url.QueryEscape(hostile), nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("hostile peer: %d", resp.StatusCode)
	}
	badPeer := webtest.Parse(t, resp)
	resp = d.Do("GET", "/peers?q="+url.QueryEscape(hostile), nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("hostile search: %d", resp.StatusCode)
	}
	badSearch := webtest.Parse(t, resp)
	if in := webtest.Find(badSearch, func(n *html.Node) bool { return webtest.Attr(n, "id") == "peers-q" }); len(in) != 1 || webtest.Attr(in[0], "value") != hostile {
		t.Fatalf("search value not kept: %v", in)
	}
	for name, doc := range map[string]*html.Node{"exemptions": d.Page("/exemptions", cookie), "audit": d.Page("/audit", cookie), "422": bad, "peer": badPeer, "search": badSearch} {
		if n := webtest.Find(doc, webtest.ByTag("img")); len(n) != 0 {
			t.Errorf("%s: hostile <img> rendered as an element", name)
		}
		for _, s := range webtest.Find(doc, webtest.ByTag("script")) {
			if webtest.Attr(s, "src") == "" {
				t.Errorf("%s: hostile <script> rendered as an element", name)
			}
		}
		found := webtest.Find(doc, func(n *html.Node) bool {
			return (n.Data == "code" || n.Data == "td" || n.Data == "p") && strings.Contains(webtest.Text(n), hostile)
		})
		if (name == "exemptions" || name == "audit") && len(found) == 0 {
			t.Errorf("%s: the hostile string is not shown as text", name)
		}
		webtest.CheckPage(t, name, doc, csrf)
	}
	in := webtest.Find(bad, func(n *html.Node) bool { return webtest.Attr(n, "id") == "ex-value" })
	if len(in) != 1 || webtest.Attr(in[0], "value") != hostile {
		t.Fatalf("typed value not kept: %v", in)
	}
	// Remove it again.
	resp = d.Do("POST", "/exemptions/delete", url.Values{"csrf": {csrf}, "kind": {"exempt_path"}, "value": {path}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if live, _ := d.Live.Exemptions(); len(live) != 0 {
		t.Fatalf("left: %v", live)
	}
}

func TestDashboardPeers(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	g, _ := d.Lim.GroupID("general")
	// 25 peers; peer i sends 3+i requests (leaky_limit 3): i rejections.
	for i := 0; i < 25; i++ {
		a := webtest.MustAddr(t, "192.0.2."+strconv.Itoa(i))
		for j := 0; j < 3+i; j++ {
			dec := d.Lim.Decide(d.Clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
			dec.Release()
		}
	}
	rows := func(doc *html.Node) []string {
		var out []string
		for _, tr := range webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }) {
			out = append(out, webtest.Text(webtest.Find(tr, webtest.ByTag("code"))[0]))
		}
		return out
	}
	link := func(doc *html.Node, rel string) string {
		a := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "a" && webtest.Attr(n, "rel") == rel })
		if len(a) == 0 {
			return ""
		}
		return webtest.Attr(a[0], "href")
	}
	doc := d.Page("/peers?limit=10", cookie)
	if got := rows(doc); len(got) != 10 || got[0] != "192.0.2.24" || got[9] != "192.0.2.15" {
		t.Fatalf("page 1: %v", got)
	}
	if link(doc, "prev") != "" || link(doc, "next") == "" {
		t.Fatal("page 1 links")
	}
	doc = d.Page(link(doc, "next"), cookie)
	if got := rows(doc); len(got) != 10 || got[0] != "192.0.2.14" {
		t.Fatalf("page 2: %v", got)
	}
	doc = d.Page(link(doc, "next"), cookie)
	if got := rows(doc); len(got) != 5 || link(doc, "next") != "" || link(doc, "prev") == "" {
		t.Fatalf("page 3: %v", got)
	}
	// Search by CIDR.
	if got := rows(d.Page("/peers?q=192.0.2.4/30", cookie)); len(got) != 4 {
		t.Fatalf("CIDR search: %v", got)
	}
	// A bad search: 422, the message marked with its field.
	resp := d.Do("GET", "/peers?q=nope", nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad search: %d", resp.StatusCode)
	}
	if m := webtest.Find(webtest.Parse(t, resp), func(n *html.Node) bool { return webtest.Attr(n, "data-field") == "q" }); len(m) != 1 {
		t.Fatal("no message for q")
	}
	// A peer's page, a reduction and forgetting it, audited.
	tokens := func(doc *html.Node) string {
		line := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-col") == "tokens" })
		if len(line) != 1 {
			t.Fatalf("%d token lines", len(line))
		}
		return webtest.Text(webtest.Find(line[0], func(n *html.Node) bool { return webtest.Attr(n, "class") == "num" })[0])
	}
	doc = d.Page("/peer?key=192.0.2.24", cookie)
	if got := tokens(doc); got != "3 / 3" {
		t.Fatalf("tokens %q", got)
	}
	resp = d.Do("POST", "/peer/reduce", url.Values{"csrf": {csrf}, "key": {"192.0.2.24"}, "group": {"general"}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reduce: %d", resp.StatusCode)
	}
	doc = d.Page(resp.Header.Get("Location"), cookie)
	if got := tokens(doc); got != "2 / 3" {
		t.Fatalf("after reduce: %q", got)
	}
	resp = d.Do("POST", "/peer/forget", url.Values{"csrf": {csrf}, "key": {"192.0.2.24"}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("forget: %d", resp.StatusCode)
	}
	if got := d.Lim.Peer(d.Clock.Now(), peer.KeyFromAddr(webtest.MustAddr(t, "192.0.2.24"), 64)); len(got) != 0 {
		t.Fatalf("not forgotten: %v", got)
	}
	audit := webtest.Text(d.Page("/audit", cookie))
	if !strings.Contains(audit, "peer.reduce") || !strings.Contains(audit, "peer.forget") {
		t.Fatalf("audit: %s", audit)
	}
	if resp := d.Do("POST", "/peer/reduce", url.Values{"csrf": {csrf}, "key": {"192.0.2.1"}, "group": {"nope"}}, "Cookie", cookie); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad group: %d", resp.StatusCode)
	}
}

func TestDashboardOutbound(t *testing.T) {
	// Without a throttle the page says so.
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	doc := d.Page("/outbound", cookie)
	webtest.CheckPage(t, "/outbound", doc, csrf)
	if len(webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "outbound" })) != 0 {
		t.Fatal("a throttle table without a throttle")
	}

	c := limitertest.NewClock(limitertest.T0)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	live, err := live.New(context.Background(), lim, webtest.OpenStore(t), cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(c.Now(), webtest.ArweaveThrottle())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		th.Try(c.Now(), hostile, "/info")
	}
	th.AddWaiter(hostile, throttle.DefaultType, 1)
	s := webtest.MustNewServer(t, lim, live, web.Options{Token: webtest.Token, Now: c.Now, Throttle: th})
	d = &webtest.Dash{T: t, H: s.AdminHandler(), Lim: lim, Live: live, Clock: c}
	cookie, csrf = d.Login()
	doc = d.Page("/outbound", cookie)
	webtest.CheckPage(t, "/outbound", doc, csrf)
	poll := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "outbound" })
	if len(poll) != 1 || webtest.Attr(poll[0], "hx-get") != "/outbound/stats" {
		t.Fatal("no live outbound part")
	}
	cell := func(doc *html.Node, col string) string {
		return webtest.Text(webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-col") == col })[0])
	}
	if cell(doc, "admitted") != "3" || cell(doc, "waiters") != "1" {
		t.Fatalf("admitted %s waiters %s", cell(doc, "admitted"), cell(doc, "waiters"))
	}
	rows := webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "tr" && n.Parent.Data == "tbody" && webtest.Attr(n.Parent.Parent, "id") == "outbound-keys"
	})
	if len(rows) != 1 || webtest.Text(webtest.Find(rows[0], webtest.ByTag("code"))[0]) != hostile {
		t.Fatalf("keys: %d", len(rows))
	}
	if len(webtest.Find(doc, webtest.ByTag("img"))) != 0 {
		t.Fatal("a hostile peer name rendered as an element")
	}
	part := d.Page("/outbound/stats", cookie)
	if len(webtest.Find(part, webtest.ByTag("h1"))) != 0 || cell(part, "admitted") != "3" {
		t.Fatal("the stats partial")
	}

	// The adaptive part: the quotas learned from replies, a hostile
	// group id shown as text, a refused reply counted.
	th.Observe(c.Now(), hostile, "/info", map[string]string{
		"ratelimit-limit": `10, 10;policy="<b>g</b> usage", 5;policy="<b>g</b> concurrency" `, "ratelimit-remaining": "0",
		"ratelimit-reset": "7", "ratelimit-reset-amount": "3"})
	th.Observe(c.Now(), hostile, "/info", map[string]string{"ratelimit-limit": "x", "ratelimit-remaining": "0",
		"ratelimit-reset": "7", "ratelimit-reset-amount": "3"})
	doc = d.Page("/outbound", cookie)
	webtest.CheckPage(t, "/outbound", doc, csrf)
	if cell(doc, "mode") != "fixed" || cell(doc, "adaptive-quotas") != "1" || cell(doc, "adaptive-observed") != "2" || cell(doc, "adaptive-refused") != "1" {
		t.Fatalf("adaptive: mode %s quotas %s observed %s refused %s", cell(doc, "mode"), cell(doc, "adaptive-quotas"), cell(doc, "adaptive-observed"), cell(doc, "adaptive-refused"))
	}
	quotas := webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "tr" && n.Parent.Data == "tbody" && webtest.Attr(n.Parent.Parent, "id") == "outbound-quotas"
	})
	if len(quotas) != 1 || webtest.Text(webtest.Find(quotas[0], webtest.ByTag("code"))[1]) != "<b>g</b>" || !strings.Contains(webtest.Text(quotas[0]), "7s") {
		t.Fatalf("quotas: %d", len(quotas))
	}
	if len(webtest.Find(doc, webtest.ByTag("b"))) != 0 {
		t.Fatal("a hostile group id rendered as an element")
	}
}

func TestDashboardOverviewShowsRejections(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, _ := d.Login()
	s.History().Sample(d.Clock.Now(), d.Lim.Stats()) // the baseline
	g, _ := d.Lim.GroupID("general")
	for _, ip := range []string{"203.0.113.7", "203.0.113.8"} {
		a := webtest.MustAddr(t, ip)
		p := peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
		n := 5
		if ip == "203.0.113.8" {
			n = 10
		}
		for i := 0; i < n; i++ {
			dec := d.Lim.Decide(d.Clock.Now(), p, g)
			dec.Release()
		}
	}
	d.Clock.Add(time.Second)
	s.History().Sample(d.Clock.Now(), d.Lim.Stats())
	s.DrainActivity()
	d.Clock.Add(9 * time.Second)

	doc := d.Page("/stats", cookie)
	cells := func(table string) [][]string {
		var out [][]string
		for _, tr := range webtest.Find(doc, func(n *html.Node) bool {
			return n.Data == "tr" && n.Parent.Data == "tbody" && webtest.Attr(n.Parent.Parent, "id") == table
		}) {
			var row []string
			for _, td := range webtest.Find(tr, func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }) {
				row = append(row, webtest.Text(td))
			}
			out = append(out, row)
		}
		return out
	}
	// Who is hammering: the top rejected first, its rate over the 10 s
	// since the start, the share of its requests rejected.
	if got := cells("top-rejected"); len(got) != 2 || got[0][0] != "203.0.113.8" || got[0][1] != "general" || got[0][2] != "0.7/s" || got[0][3] != "70 %" || got[1][0] != "203.0.113.7" {
		t.Fatalf("top rejected: %v", got)
	}
	if got := cells("top-requests"); len(got) != 2 || got[0][0] != "203.0.113.8" || got[0][2] != "1/s" {
		t.Fatalf("top requests: %v", got)
	}
	// The group's rates over its seconds of history, with a sparkline.
	row := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && webtest.Attr(n, "data-group") == "general" })
	if len(row) != 1 {
		t.Fatal("no general row")
	}
	cell := func(col string) string {
		return webtest.Text(webtest.Find(row[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == col })[0])
	}
	if cell("request_rate") != "7.5/s" || cell("rejected") != "4.5/s 60 %" || cell("denied") != "0/s" {
		t.Fatalf("general: %q %q %q", cell("request_rate"), cell("rejected"), cell("denied"))
	}
	if svg := webtest.Find(row[0], webtest.ByTag("polyline")); len(svg) != 2 || webtest.Attr(svg[0], "points") == "" {
		t.Fatal("no sparkline")
	}
	// The counters since start, on the page.
	page := d.Page("/", cookie)
	tot := webtest.Find(page, func(n *html.Node) bool {
		return n.Data == "tr" && webtest.Attr(n, "data-group") == "general" && webtest.Attr(n.Parent.Parent, "id") == "groups-table"
	})
	total := func(col string) string {
		return webtest.Text(webtest.Find(tot[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == col })[0])
	}
	if len(tot) != 1 || total("requests") != "15" || total("rejected_rate_limit") != "9" || total("admitted") != "6" {
		t.Fatalf("totals: %d rows", len(tot))
	}
}
