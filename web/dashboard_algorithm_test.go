package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// The groups page in the algorithms' terms: the summary, the algorithm's
// choices, the keys it does not read; a switch through the form, and a
// refused one that names its key.
func TestDashboardGroupAlgorithm(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login()
	post := func(form url.Values) *http.Response {
		form.Set("csrf", csrf)
		return d.do("POST", "/groups/general", form, "Cookie", cookie)
	}
	section := func(doc *html.Node) *html.Node {
		return find(doc, func(n *html.Node) bool { return attr(n, "id") == "group-general" })[0]
	}
	sec := section(d.page("/groups", cookie))
	if s := find(sec, func(n *html.Node) bool { return hasAttr(n, "data-summary") }); len(s) != 1 || !strings.HasPrefix(text(s[0]), "hybrid (Arweave)") {
		t.Fatalf("summary %v", s)
	}
	opts := find(sec, func(n *html.Node) bool {
		return n.Data == "option" && n.Parent != nil && attr(n.Parent, "name") == "algorithm"
	})
	if len(opts) != len(algo.Names()) || attr(opts[0], "value") != "hybrid" || !hasAttr(opts[0], "selected") {
		t.Fatalf("algorithm choices %d", len(opts))
	}
	if n := len(find(sec, func(n *html.Node) bool { return hasAttr(n, "data-unused") })); n != 3 {
		t.Fatalf("%d keys marked unused under the hybrid, want 3 (limit, period, burst)", n)
	}

	// A sliding log of a million: refused, the message at limit.
	resp := post(url.Values{"algorithm": {"sliding_log"}, "limit": {"1000000"}, "period": {"60000"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a sliding log of a million: %d", resp.StatusCode)
	}
	msg := find(parse(t, resp), func(n *html.Node) bool { return hasAttr(n, "data-field") })
	if len(msg) != 1 || attr(msg[0], "data-field") != "limit" || !strings.Contains(text(msg[0]), "at most 10000") {
		t.Fatalf("message %v", msg)
	}
	// Burst with a fixed window: refused at burst.
	resp = post(url.Values{"algorithm": {"fixed_window"}, "limit": {"10"}, "period": {"60000"}, "burst": {"5"}})
	msg = find(parse(t, resp), func(n *html.Node) bool { return hasAttr(n, "data-field") })
	if resp.StatusCode != http.StatusUnprocessableEntity || len(msg) != 1 || attr(msg[0], "data-field") != "burst" {
		t.Fatalf("burst with a fixed window: %d %v", resp.StatusCode, msg)
	}
	// A GCRA: applied, described in its terms.
	if resp := post(url.Values{"algorithm": {"gcra"}, "limit": {"600"}, "period": {"60000"}, "burst": {"50"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", resp.StatusCode)
	}
	if v, _ := d.live.Group("general"); v.Effective.Algorithm != algo.GCRA || v.Effective.Burst != 50 {
		t.Fatalf("after save %+v", v.Effective)
	}
	sec = section(d.page("/groups", cookie))
	if s := find(sec, func(n *html.Node) bool { return hasAttr(n, "data-summary") }); !strings.Contains(text(s[0]), "gcra: 600 per 1m0s, bursts of up to 50 (one every 100ms after)") {
		t.Fatalf("summary %q", text(s[0]))
	}

	// The peer page and the API speak GCRA.
	g, _ := d.lim.GroupID("general")
	a := limiter.Peer{Key: limiter.KeyFromAddr(mustAddr(t, "192.0.2.7"), 64), Addr: mustAddr(t, "192.0.2.7")}
	for range 3 {
		dec := d.lim.Decide(d.clock.Now(), a, g)
		dec.Release()
	}
	doc := d.page("/peer?key=192.0.2.7", cookie)
	cell := find(doc, func(n *html.Node) bool { return attr(n, "data-col") == "state" })
	if len(cell) != 1 || attr(cell[0], "data-algorithm") != "gcra" || text(cell[0]) != "gcra: TAT now + 300ms, 47 admissions left" {
		t.Fatalf("state cell %v %q", cell, text(cell[0]))
	}
	resp = d.do("GET", "/api/v1/peers/192.0.2.7", nil, "Authorization", "Bearer "+dashToken)
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
