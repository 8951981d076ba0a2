package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/ui"
	"github.com/limiterd/limiterd/internal/webtest"
)

// whatIf is the answer element of a what-if partial or page.
func whatIf(t *testing.T, doc *html.Node, key string) *html.Node {
	t.Helper()
	n := webtest.Find(doc, func(n *html.Node) bool {
		return webtest.HasAttr(n, "data-whatif") && webtest.Attr(n, "data-whatif") == key
	})
	if len(n) != 1 {
		t.Fatalf("no what-if answer for %q", key)
	}
	return n[0]
}

// TestDashboardWhatIf: the what-if of a value replays the group's last
// hour of requests and says how many it would have rejected, beside the
// current rejections; it saves nothing.
func TestDashboardWhatIf(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	d.Send("203.0.113.7", 8) // general: leaky_limit 3, so 5 rejected
	d.Send("203.0.113.8", 2)
	s.DrainActivity()
	get := func(q string) *http.Response {
		return d.Do("GET", "/groups/general/whatif?"+q, nil, "Cookie", cookie, "HX-Request", "true")
	}
	// A lower limit: 8 of 10 rejected (the second peer twice), 5 now.
	resp := get("field=leaky_limit&leaky_limit=1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("what-if: %d", resp.StatusCode)
	}
	doc := webtest.Parse(t, resp)
	a := whatIf(t, doc, "leaky_limit")
	if webtest.Attr(a, "data-requests") != "10" || webtest.Attr(a, "data-now") != "5" || webtest.Attr(a, "data-then") != "8" || !strings.Contains(webtest.Text(a), "3 more than now (5)") {
		t.Fatalf("lower: %v %q", a.Attr, webtest.Text(a))
	}
	if len(webtest.Find(doc, webtest.ByTag("h1"))) != 0 {
		t.Fatal("the field's what-if is a partial")
	}
	// A higher one: none.
	if a := whatIf(t, webtest.Parse(t, get("field=leaky_limit&leaky_limit=10")), "leaky_limit"); webtest.Attr(a, "data-then") != "0" || !strings.Contains(webtest.Text(a), "5 fewer") {
		t.Fatalf("higher: %q", webtest.Text(a))
	}
	// Mode off lets everything through.
	if a := whatIf(t, webtest.Parse(t, get("field=mode&mode=off")), "mode"); webtest.Attr(a, "data-then") != "0" || !strings.HasPrefix(webtest.Text(a), "Off:") {
		t.Fatalf("off: %q", webtest.Text(a))
	}
	// Bad values and keys no replay can judge say so.
	for q, want := range map[string]string{
		"field=leaky_limit&leaky_limit=abc":           "must be an integer",
		"field=leaky_limit&leaky_limit=-2":            "leaky_limit must be an integer ≥ 0",
		"field=concurrency_limit&concurrency_limit=1": "No what-if for concurrency_limit",
	} {
		doc := webtest.Parse(t, get(q))
		e := webtest.Find(doc, func(n *html.Node) bool { return webtest.HasAttr(n, "data-whatif-error") })
		if len(e) != 1 || !strings.Contains(webtest.Text(e[0]), want) {
			t.Errorf("%s: %v", q, e)
		}
	}
	// The value in force: nothing to say.
	if resp := get("field=leaky_limit&leaky_limit=3"); resp.StatusCode != http.StatusOK || len(webtest.Find(webtest.Parse(t, resp), webtest.ByTag("span"))) != 0 {
		t.Fatal("a what-if for the current value")
	}

	// The form posted to the what-if (no JavaScript): every change, and
	// all together; nothing saved.
	form := url.Values{"csrf": {csrf}, "leaky_limit": {"2"}, "leaky_tick_reduction": {"3"}, "sliding_window_limit": {"1"}, "concurrency_limit": {"9"}}
	resp = d.Do("POST", "/groups/general/whatif", form, "Cookie", cookie)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	doc = webtest.Parse(t, resp)
	webtest.CheckPage(t, "/groups/general/whatif", doc, csrf)
	if a := whatIf(t, doc, "leaky_limit"); webtest.Attr(a, "data-then") != "6" {
		t.Fatalf("leaky_limit 2: %q", webtest.Text(a))
	}
	if a := whatIf(t, doc, "sliding_window_limit"); webtest.Attr(a, "data-then") != "4" {
		t.Fatalf("window 1: %q", webtest.Text(a)) // the window admits 1 a second, then 3 tokens: 4 of 8 and none of 2
	}
	comb := webtest.ByID(doc, "whatif-combined")
	if comb == nil || webtest.Attr(whatIf(t, comb, ""), "data-then") != "5" {
		t.Fatalf("together: %v", comb) // 1 + 2 tokens: 5 of 8, none of 2
	}
	if in := webtest.ByID(doc, "g-general-leaky_limit"); webtest.Attr(in, "value") != "2" {
		t.Fatal("the typed value is not kept")
	}
	if rec := webtest.ByID(doc, "whatif-record"); rec == nil || !strings.Contains(webtest.Text(rec), "the 10 requests of general") {
		t.Fatalf("record: %v", rec)
	}
	if v, _ := d.Live.Group("general"); len(v.Override) != 0 {
		t.Fatalf("the what-if saved: %v", v.Override)
	}
}

// TestDashboardBanners: the limiter off, a group in dry run or off and a
// reported condition show on every page.
func TestDashboardBanners(t *testing.T) {
	down := false
	d, _ := webtest.NewDashWith(t, nil, func(o *web.Options) {
		o.Conditions = func() []ui.Condition {
			if !down {
				return nil
			}
			return []ui.Condition{{Kind: "down", Title: "cluster: Redis down", Text: "— deciding locally."}}
		}
	})
	cookie, _ := d.Login()
	banners := func(path string) map[string]string {
		out := map[string]string{}
		for _, b := range webtest.Find(d.Page(path, cookie), func(n *html.Node) bool { return webtest.HasAttr(n, "data-banner") }) {
			out[webtest.Attr(b, "data-banner")] += webtest.Text(b)
		}
		return out
	}
	if b := banners("/"); len(b) != 0 {
		t.Fatalf("banners with nothing to say: %v", b)
	}
	if err := d.Live.SetEnabled(context.Background(), "test", false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Live.PatchGroup(context.Background(), "test", "chunk", []byte(`{"mode":"dry_run"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Live.PatchGroup(context.Background(), "test", "metrics", []byte(`{"mode":"off"}`)); err != nil {
		t.Fatal(err)
	}
	down = true
	for _, path := range []string{"/", "/groups", "/peers", "/audit", "/offenders"} {
		b := banners(path)
		if !strings.Contains(b["off"], "limiter OFF") || !strings.Contains(b["off"], "metrics") || !strings.Contains(b["dry"], "chunk") || !strings.Contains(b["down"], "Redis down") {
			t.Fatalf("%s: %v", path, b)
		}
	}
	// No banners on the login page (nobody logged in is told anything).
	if n := webtest.Find(webtest.Parse(t, d.Do("GET", "/login", nil)), func(n *html.Node) bool { return webtest.HasAttr(n, "data-banner") }); len(n) != 0 {
		t.Fatal("banners on the login page")
	}
}

// TestDashboardOffenders: a peer's rejections are saved to the record of
// offenders (once a minute; the pages add those not saved yet), listed on
// the offenders page and on its own page after the limiter forgot it.
func TestDashboardOffenders(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	d.Send("198.51.100.9", 7) // 4 rejected
	s.DrainActivity()
	// Before the save the page shows them already, then from the record.
	for _, save := range []bool{false, true} {
		if save {
			s.SaveOffenses(context.Background())
		}
		doc := d.Page("/offenders", cookie)
		rows := webtest.Find(doc, func(n *html.Node) bool {
			return n.Data == "tr" && n.Parent.Data == "tbody" && webtest.Attr(n.Parent.Parent, "id") == "offenders"
		})
		if len(rows) != 1 || !strings.Contains(webtest.Text(rows[0]), "198.51.100.9") || webtest.Text(webtest.Find(rows[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == "rejections" })[0]) != "4" {
			t.Fatalf("offenders (saved %v): %d rows", save, len(rows))
		}
	}
	d.Clock.Add(time.Minute)
	d.Send("198.51.100.9", 4) // the bucket has leaked: one more rejected
	s.DrainActivity()
	if resp := d.Do("POST", "/peer/forget", url.Values{"csrf": {csrf}, "key": {"198.51.100.9"}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("forget: %d", resp.StatusCode)
	}
	doc := d.Page("/peer?key=198.51.100.9", cookie)
	webtest.CheckPage(t, "/peer (forgotten)", doc, csrf)
	if webtest.ByID(doc, "peer-untracked") == nil {
		t.Fatal("not said untracked")
	}
	cell := webtest.Find(doc, func(n *html.Node) bool {
		return webtest.Attr(n, "data-col") == "rejections" && webtest.Attr(n.Parent, "data-group") == "general"
	})
	if len(cell) != 1 || webtest.Text(cell[0]) != "5" {
		t.Fatalf("its rejections: %v", cell)
	}
	times := webtest.Find(cell[0].Parent, webtest.ByTag("time"))
	if len(times) != 2 || webtest.Attr(times[0], "datetime") != "2023-11-14T22:13:20Z" || webtest.Attr(times[1], "datetime") != "2023-11-14T22:14:20Z" {
		t.Fatalf("first and last: %v", times)
	}
}

// TestDashboardPeersByRate: sorted by their rates over the last minutes,
// the top talkers; one the limiter forgot is marked as no longer tracked.
func TestDashboardPeersByRate(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	d.Send("203.0.113.1", 2)
	d.Send("203.0.113.2", 9)
	d.Send("203.0.113.3", 5)
	s.DrainActivity()
	d.Clock.Add(10 * time.Second)
	if resp := d.Do("POST", "/peer/forget", url.Values{"csrf": {csrf}, "key": {"203.0.113.3"}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("forget: %d", resp.StatusCode)
	}
	rows := func(path string) []*html.Node {
		doc := d.Page(path, cookie)
		webtest.CheckPage(t, path, doc, csrf)
		return webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
	}
	got := rows("/peers?sort=request_rate")
	if len(got) != 3 || !strings.Contains(webtest.Text(got[0]), "203.0.113.2") || !strings.Contains(webtest.Text(got[1]), "203.0.113.3") {
		t.Fatalf("by requests/s: %d rows", len(got))
	}
	if rate := webtest.Text(webtest.Find(got[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == "request_rate" })[0]); rate != "0.9/s" {
		t.Fatalf("rate %q", rate)
	}
	if !strings.Contains(webtest.Attr(got[1], "class"), "untracked") || !strings.Contains(webtest.Text(got[1]), "no longer tracked") {
		t.Fatalf("forgotten row: %q", webtest.Text(got[1]))
	}
	if got := rows("/peers?sort=rejection_rate"); len(got) != 2 || !strings.Contains(webtest.Text(got[0]), "203.0.113.2") {
		t.Fatalf("by rejections/s: %d rows", len(got))
	}
	if got := rows("/peers?sort=request_rate&q=203.0.113.0/31"); len(got) != 1 {
		t.Fatalf("a CIDR: %d rows", len(got))
	}
	// The column headings sort; the current one is marked.
	doc := d.Page("/peers?sort=request_rate&group=general", cookie)
	th := webtest.Find(doc, func(n *html.Node) bool {
		return n.Data == "a" && strings.Contains(webtest.Attr(n, "href"), "sort=tokens")
	})
	if len(th) != 1 || !strings.Contains(webtest.Attr(th[0], "href"), "group=general") {
		t.Fatalf("sort links: %v", th)
	}
	if n := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "aria-sort") == "descending" }); len(n) != 1 {
		t.Fatal("the current order is not marked")
	}
}

// TestDashboardWordsNotGo: bad input is answered in words, never with Go's
// error text.
func TestDashboardWordsNotGo(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	check := func(what string, resp *http.Response, want string) {
		t.Helper()
		body := webtest.Text(webtest.Parse(t, resp))
		if strings.Contains(body, "ParseAddr") || strings.Contains(body, "netip") || strings.Contains(body, "strconv") || !strings.Contains(body, want) {
			t.Errorf("%s: %q", what, body)
		}
	}
	check("search", d.Do("GET", "/peers?q=not-an-ip", nil, "Cookie", cookie), `"not-an-ip" is not an IP address or a CIDR`)
	check("peer", d.Do("GET", "/peer?key=%25%25%25", nil, "Cookie", cookie), `"%%%" is not a peer`)
	check("exemption", d.Do("POST", "/exemptions", url.Values{"csrf": {csrf}, "kind": {"deny_peer"}, "value": {"10.0.0.300"}}, "Cookie", cookie), "not an IP address or CIDR")
	check("group", d.Do("POST", "/groups/general", url.Values{"csrf": {csrf}, "leaky_limit": {"1e3"}}, "Cookie", cookie), "must be an integer")
}

// TestDashboardRejectionsJSON: the stacked chart's data, per group with
// rejections only.
func TestDashboardRejectionsJSON(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, _ := d.Login()
	s.History().Sample(d.Clock.Now(), d.Lim.Stats())
	d.Send("203.0.113.7", 7) // 4 rejected in general
	d.Clock.Add(time.Second)
	s.History().Sample(d.Clock.Now(), d.Lim.Stats())
	resp := d.Do("GET", "/stats/rejections?minutes=5", nil, "Cookie", cookie)
	var v struct {
		T      []int64 `json:"t"`
		Step   int     `json:"step"`
		Groups []struct {
			Group    string    `json:"group"`
			Rejected []float64 `json:"rejected"`
		} `json:"groups"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil {
		t.Fatalf("%d", resp.StatusCode)
	}
	if v.Step != 1 || len(v.T) != 2 || len(v.Groups) != 1 || v.Groups[0].Group != "general" || v.Groups[0].Rejected[1] != 4 {
		t.Fatalf("%+v", v)
	}
	if resp := d.Do("GET", "/stats/rejections?minutes=0", nil, "Cookie", cookie); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("minutes=0: %d", resp.StatusCode)
	}
}
