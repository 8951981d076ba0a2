package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/webtest"
)

// cellTexts returns the text of every cell (th and td) of each body row
// of the table of id.
func cellTexts(t *testing.T, doc *html.Node, id string) [][]string {
	t.Helper()
	tbl := webtest.ByID(doc, id)
	if tbl == nil {
		t.Fatalf("no table %s", id)
	}
	var out [][]string
	for _, tr := range webtest.Find(tbl, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }) {
		var row []string
		for _, c := range webtest.Find(tr, func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }) {
			row = append(row, strings.Join(strings.Fields(webtest.Text(c)), " "))
		}
		out = append(out, row)
	}
	return out
}

// TestExemptionExpiry: the add form takes an expiry (a duration from now
// or a time), the list shows it with how long is left, a bad one is
// refused in words beside the form with the values kept.
func TestExemptionExpiry(t *testing.T) {
	d, _ := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	post := func(form url.Values) *http.Response {
		form.Set("csrf", csrf)
		return d.Do("POST", "/exemptions", form, "Cookie", cookie)
	}
	if resp := post(url.Values{"kind": {"deny_peer"}, "value": {"198.51.100.0/24"}, "note": {"scraper"}, "expires": {"24h"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d", resp.StatusCode)
	}
	if resp := post(url.Values{"kind": {"exempt_peer"}, "value": {"192.0.2.0/24"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add without expiry: %d", resp.StatusCode)
	}
	doc := d.Page("/exemptions", cookie)
	webtest.CheckPage(t, "/exemptions", doc, csrf)
	want := d.Clock.Now().Add(24*time.Hour).UTC().Format("2006-01-02 15:04:05") + " UTC in 1 d"
	if rows := cellTexts(t, doc, "list-deny_peer"); len(rows) != 1 || rows[0][2] != "scraper" || rows[0][3] != want {
		t.Fatalf("deny list %q, want the expiry %q", rows, want)
	}
	if rows := cellTexts(t, doc, "list-exempt_peer"); len(rows) != 1 || rows[0][3] != "never" {
		t.Fatalf("exempt list %q", rows)
	}
	// A bad expiry: 422, the message, the values kept, nothing added.
	resp := post(url.Values{"kind": {"deny_peer"}, "value": {"203.0.113.9"}, "expires": {"tomorrow"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad expiry: %d", resp.StatusCode)
	}
	doc = webtest.Parse(t, resp)
	form := webtest.ByID(doc, "add-exemption")
	if msg := webtest.Text(form); !strings.Contains(msg, `"tomorrow"`) || !strings.Contains(msg, "duration from now") {
		t.Fatalf("message %q", msg)
	}
	if v := webtest.Attr(webtest.ByID(doc, "ex-expires"), "value"); v != "tomorrow" {
		t.Fatalf("expiry not kept: %q", v)
	}
	if _, e := d.Live.Exemptions(); len(e) != 0 {
		// (the file's entries: none in this test)
		t.Fatalf("file entries %v", e)
	}
	if live, _ := d.Live.Exemptions(); len(live) != 2 {
		t.Fatalf("%d live entries after the refusal", len(live))
	}
}

// TestAuditFilters: the audit page filters by action (or its family),
// actor and how far back, shows each entry's note and expiry, suggests
// the actions and actors it holds, and says in words what is wrong with
// a filter.
func TestAuditFilters(t *testing.T) {
	d, _ := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	post := func(path string, form url.Values) {
		t.Helper()
		form.Set("csrf", csrf)
		if resp := d.Do("POST", path, form, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	post("/groups/general", url.Values{"leaky_limit": {"9"}})
	d.Clock.Add(2 * time.Hour)
	post("/exemptions", url.Values{"kind": {"deny_peer"}, "value": {"198.51.100.0/24"}, "note": {"scraper"}, "expires": {"48h"}})
	if code, _ := d.API("POST", "/api/v1/exemptions", `{"kind":"exempt_peer","value":"192.0.2.1"}`); code != 201 {
		t.Fatalf("API add: %d", code)
	}
	actions := func(q string) []string {
		t.Helper()
		doc := d.Page("/audit"+q, cookie)
		webtest.CheckPage(t, "/audit"+q, doc, csrf)
		var out []string
		if webtest.ByID(doc, "audit") == nil {
			return nil
		}
		for _, r := range cellTexts(t, doc, "audit") {
			out = append(out, r[3]+" by "+strings.SplitN(r[2], ":", 2)[0])
		}
		return out
	}
	if got := strings.Join(actions(""), ", "); got != "exemption.add by api-token, exemption.add by session, group.patch by session" {
		t.Fatalf("all: %s", got)
	}
	if got := strings.Join(actions("?action=exemption"), ", "); got != "exemption.add by api-token, exemption.add by session" {
		t.Fatalf("the exemption family: %s", got)
	}
	if got := strings.Join(actions("?actor=api-token"), ", "); got != "exemption.add by api-token" {
		t.Fatalf("by the API token: %s", got)
	}
	if got := strings.Join(actions("?since=1h"), ", "); got != "exemption.add by api-token, exemption.add by session" {
		t.Fatalf("the last hour: %s", got)
	}
	if got := actions("?action=peer.forget"); got != nil {
		t.Fatalf("no match: %v", got)
	}
	doc := d.Page("/audit?action=exemption.add&actor=", cookie)
	rows := cellTexts(t, doc, "audit")
	want := d.Clock.Now().Add(48*time.Hour).UTC().Format("2006-01-02 15:04:05") + " UTC"
	if len(rows) != 2 || rows[1][7] != "scraper" || rows[1][8] != want || rows[0][8] != "" {
		t.Fatalf("note and expiry: %q, want %q", rows, want)
	}
	var opts []string
	for _, o := range webtest.Find(webtest.ByID(doc, "audit-actions"), webtest.ByTag("option")) {
		opts = append(opts, webtest.Attr(o, "value"))
	}
	if got := strings.Join(opts, " "); got != "exemption exemption.add group group.patch" {
		t.Fatalf("suggested actions: %s", got)
	}
	resp := d.Do("GET", "/audit?since=yesterday", nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad since: %d", resp.StatusCode)
	}
	if msg := webtest.Text(webtest.ByID(webtest.Parse(t, resp), "audit-filter")); !strings.Contains(msg, `"yesterday" is not a duration`) {
		t.Fatalf("message %q", msg)
	}
}

// TestWhatIfSpan: the what-if says the stretch it really replays — since
// the start when limiterd started less than an hour ago (its record is
// not kept across a restart), the last hour after that.
func TestWhatIfSpan(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, _ := d.Login()
	d.Clock.Add(6 * time.Second)
	d.Send("203.0.113.7", 8)
	s.DrainActivity()
	answer := func() string {
		t.Helper()
		resp := d.Do("GET", "/groups/general/whatif?field=leaky_limit&leaky_limit=1", nil, "Cookie", cookie, "HX-Request", "true")
		a := webtest.Find(webtest.Parse(t, resp), func(n *html.Node) bool { return webtest.Attr(n, "data-whatif") == "leaky_limit" })
		if len(a) != 1 {
			t.Fatal("no answer")
		}
		return webtest.Text(a[0])
	}
	if got := answer(); !strings.Contains(got, "of 8 requests of the last 6 s (since limiterd started: the record is not kept across a restart) would have been rejected") {
		t.Fatalf("6 s after the start: %q", got)
	}
	d.Clock.Add(2 * time.Hour)
	d.Send("203.0.113.7", 2)
	s.DrainActivity()
	if got := answer(); !strings.Contains(got, "of 2 requests of the last hour would have been rejected") {
		t.Fatalf("2 h after the start: %q", got)
	}
}
