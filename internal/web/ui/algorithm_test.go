package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The group's page in the algorithms' terms: the summary, the algorithm's
// choices, the keys it does not read; a switch through the form, and a
// refused one that names its key; the groups table and the peer's page
// after it.
func TestDashboardGroupAlgorithm(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	post := func(form url.Values) *http.Response {
		form.Set("csrf", csrf)
		return d.Do("POST", "/groups/general", form, "Cookie", cookie)
	}
	section := func(doc *html.Node) *html.Node {
		return webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "group-general" })[0]
	}
	sec := section(d.Page("/groups/general", cookie))
	if s := webtest.Find(sec, func(n *html.Node) bool { return webtest.HasAttr(n, "data-summary") }); len(s) != 1 || !strings.HasPrefix(webtest.Text(s[0]), "hybrid (Arweave)") {
		t.Fatalf("summary %v", s)
	}
	opts := webtest.Find(sec, func(n *html.Node) bool {
		return n.Data == "option" && n.Parent != nil && webtest.Attr(n.Parent, "name") == "algorithm"
	})
	if len(opts) != len(algo.Names()) || webtest.Attr(opts[0], "value") != "hybrid" || !webtest.HasAttr(opts[0], "selected") {
		t.Fatalf("algorithm choices %d", len(opts))
	}
	if n := len(webtest.Find(sec, func(n *html.Node) bool { return webtest.HasAttr(n, "data-unused") })); n != 3 {
		t.Fatalf("%d keys marked unused under the hybrid, want 3 (limit, period, burst)", n)
	}

	// A sliding log of a million: refused, the message at limit.
	resp := post(url.Values{"algorithm": {"sliding_log"}, "limit": {"1000000"}, "period": {"60000"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a sliding log of a million: %d", resp.StatusCode)
	}
	msg := webtest.Find(webtest.Parse(t, resp), func(n *html.Node) bool { return webtest.HasAttr(n, "data-field") })
	if len(msg) != 1 || webtest.Attr(msg[0], "data-field") != "limit" || !strings.Contains(webtest.Text(msg[0]), "at most 10000") {
		t.Fatalf("message %v", msg)
	}
	// Burst with a fixed window: refused at burst.
	resp = post(url.Values{"algorithm": {"fixed_window"}, "limit": {"10"}, "period": {"60000"}, "burst": {"5"}})
	msg = webtest.Find(webtest.Parse(t, resp), func(n *html.Node) bool { return webtest.HasAttr(n, "data-field") })
	if resp.StatusCode != http.StatusUnprocessableEntity || len(msg) != 1 || webtest.Attr(msg[0], "data-field") != "burst" {
		t.Fatalf("burst with a fixed window: %d %v", resp.StatusCode, msg)
	}
	// A GCRA: applied, described in its terms.
	if resp := post(url.Values{"algorithm": {"gcra"}, "limit": {"600"}, "period": {"60000"}, "burst": {"50"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", resp.StatusCode)
	}
	if v, _ := d.Live.Group("general"); v.Effective.Algorithm != algo.GCRA || v.Effective.Burst != 50 {
		t.Fatalf("after save %+v", v.Effective)
	}
	sec = section(d.Page("/groups/general", cookie))
	if s := webtest.Find(sec, func(n *html.Node) bool { return webtest.HasAttr(n, "data-summary") }); !strings.Contains(webtest.Text(s[0]), "gcra: 600 per 1m0s, bursts of up to 50 (one every 100ms after)") {
		t.Fatalf("summary %q", webtest.Text(s[0]))
	}
	if n := len(webtest.Find(sec, func(n *html.Node) bool { return webtest.HasAttr(n, "data-unused") })); n != 7 {
		t.Fatalf("%d keys marked unused under gcra, want the hybrid's 7", n)
	}
	// The groups table: the algorithm and its limits, the hybrid's
	// columns not used.
	row := webtest.Find(d.Page("/groups", cookie), func(n *html.Node) bool { return n.Data == "tr" && webtest.Attr(n, "data-group") == "general" })
	if len(row) != 1 {
		t.Fatal("no row of general in the groups table")
	}
	if a := webtest.Find(row[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == "algorithm" }); len(a) != 1 ||
		!strings.HasPrefix(webtest.Text(a[0]), "gcra") || !strings.Contains(webtest.Text(a[0]), "600 per 60000 ms, burst 50 •") {
		t.Fatalf("algorithm cell %q", webtest.Text(a[0]))
	}
	if c := webtest.Find(row[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == limiter.KeyLeakyLimit }); len(c) != 1 || webtest.Text(c[0]) != "—" {
		t.Fatalf("leaky_limit cell under gcra %v", c)
	}

	// The peer page and the API speak GCRA.
	g, _ := d.Lim.GroupID("general")
	a := peer.Peer{Key: peer.KeyFromAddr(webtest.MustAddr(t, "192.0.2.7"), 64), Addr: webtest.MustAddr(t, "192.0.2.7")}
	for range 3 {
		dec := d.Lim.Decide(d.Clock.Now(), a, g)
		dec.Release()
	}
	doc := d.Page("/peer?key=192.0.2.7", cookie)
	prow := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && webtest.Attr(n, "data-group") == "general" })
	if len(prow) != 1 || webtest.Attr(prow[0], "data-algorithm") != "gcra" {
		t.Fatalf("peer row %v", prow)
	}
	use := webtest.Find(prow[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") == "gcra" })
	if len(use) != 1 {
		t.Fatal("no gcra usage on the peer's page")
	}
	u := webtest.Find(use[0], func(n *html.Node) bool { return webtest.Attr(n, "class") == "usage" })
	if got := strings.Join(strings.Fields(webtest.Text(use[0])), " "); len(u) != 1 || !strings.Contains(got, "3 / 50 47 left, one back every 100 ms") ||
		!strings.Contains(webtest.Attr(u[0], "title"), "TAT now + 300 ms") {
		t.Fatalf("gcra usage %q (title %q)", got, webtest.Attr(u[0], "title"))
	}
	resp = d.Do("GET", "/api/v1/peers/192.0.2.7", nil, "Authorization", "Bearer "+webtest.Token)
	var body struct {
		Groups []struct {
			Algorithm string         `json:"algorithm"`
			State     map[string]any `json:"state"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Groups) != 1 {
		t.Fatalf("API: %v %+v", err, body)
	}
	if e := body.Groups[0]; e.Algorithm != "gcra" || e.State["tat_ms"] != 300.0 || e.State["remaining"] != 47.0 {
		t.Fatalf("API entry %+v", e)
	}
}

// TestDashboardWhatIfAlgorithm: the what-if replays the last hour under
// another algorithm (with its limits) and under a group's own algorithm
// with other limits; an algorithm without its limits says which is
// missing; nothing is saved.
func TestDashboardWhatIfAlgorithm(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	d.Send("203.0.113.7", 8) // general, hybrid: leaky_limit 3, so 5 rejected
	d.Send("203.0.113.8", 2)
	s.DrainActivity()
	get := func(q string) *html.Node {
		resp := d.Do("GET", "/groups/general/whatif?"+q, nil, "Cookie", cookie, "HX-Request", "true")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", q, resp.StatusCode)
		}
		return webtest.Parse(t, resp)
	}
	// The algorithm alone: gcra needs its limit.
	e := webtest.Find(get("field=algorithm&algorithm=gcra"), func(n *html.Node) bool { return webtest.HasAttr(n, "data-whatif-error") })
	if len(e) != 1 || !strings.Contains(webtest.Text(e[0]), "limit is required by algorithm gcra") {
		t.Fatalf("gcra alone: %v", e)
	}
	// With its limits, posted: a GCRA of 4 a minute rejects 4 of the
	// first peer's 8, none of the second's 2.
	form := url.Values{"csrf": {csrf}, "algorithm": {"gcra"}, "limit": {"4"}, "period": {"60000"}}
	resp := d.Do("POST", "/groups/general/whatif", form, "Cookie", cookie)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	comb := webtest.ByID(webtest.Parse(t, resp), "whatif-combined")
	if comb == nil || webtest.Attr(whatIf(t, comb, ""), "data-then") != "4" || webtest.Attr(whatIf(t, comb, ""), "data-now") != "5" {
		t.Fatalf("gcra 4 per minute: %q", webtest.Text(comb))
	}

	// A fixed window of 2, live: the hour replayed under it rejects 6 of
	// each 8 (12), under a limit of 6 two of each (4).
	if _, err := d.Live.PatchGroup(context.Background(), "test", "general", []byte(`{"algorithm": "fixed_window", "limit": 2, "period": 60000}`)); err != nil {
		t.Fatal(err)
	}
	d.Send("203.0.113.9", 8)
	s.DrainActivity()
	a := whatIf(t, get("field=limit&limit=6"), "limit")
	if webtest.Attr(a, "data-requests") != "18" || webtest.Attr(a, "data-now") != "12" || webtest.Attr(a, "data-then") != "4" {
		t.Fatalf("fixed window of 6: now %s then %s (%q)", webtest.Attr(a, "data-now"), webtest.Attr(a, "data-then"), webtest.Text(a))
	}
	if v, _ := d.Live.Group("general"); len(v.Override) != 3 {
		t.Fatalf("the what-if saved: %v", v.Override)
	}
}
