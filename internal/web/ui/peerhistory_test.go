package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// historyRows are the peer history table's rows: data-from → column → text.
func historyRows(doc *html.Node) []map[string]string {
	var out []map[string]string
	tbl := webtest.ByID(doc, "peer-history-table")
	if tbl == nil {
		return nil
	}
	for _, tr := range webtest.Find(tbl, func(n *html.Node) bool { return n.Data == "tr" && webtest.HasAttr(n, "data-from") }) {
		row := map[string]string{"from": webtest.Attr(tr, "data-from")}
		for _, td := range webtest.Find(tr, webtest.ByTag("td")) {
			row[webtest.Attr(td, "data-col")] = webtest.Text(td)
		}
		out = append(out, row)
	}
	return out
}

func TestDashboardPeerHistory(t *testing.T) {
	d, s := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	// 5 requests (3 admitted, 2 rejected) before anyone looks.
	d.Send("203.0.113.7", 5)
	doc := d.Page("/peer?key=203.0.113.7", cookie)
	webtest.CheckPage(t, "/peer", doc, csrf)
	// Never kept: the page says so; the chart's div and the table are there.
	if n := webtest.ByID(doc, "peer-history-new"); n == nil || !strings.Contains(webtest.Text(n), "recorded from now on") {
		t.Fatal("no notice that the history starts now")
	}
	if webtest.ByID(doc, "peer-history-since") != nil {
		t.Fatal("a 'recorded since' line for a peer never recorded")
	}
	div := webtest.ByID(doc, "peer-history-charts")
	if div == nil || webtest.Attr(div, "data-peer-history-url") != "/peer/history?key=203.0.113.7" {
		t.Fatalf("chart div: %v", div)
	}
	if webtest.ByID(doc, "peer-history-empty") == nil || len(historyRows(doc)) != 0 {
		t.Fatal("points for a peer just chosen")
	}
	// Within the next 10 s: 3 more requests in general (rejected) and one
	// in chunk, held in flight across the sample.
	d.Clock.Add(4 * time.Second)
	d.Send("203.0.113.7", 3)
	g, _ := d.Lim.GroupID("chunk")
	a := webtest.MustAddr(t, "203.0.113.7")
	held := d.Lim.Decide(d.Clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
	d.Clock.Add(6 * time.Second)
	s.SamplePeerHistory()
	held.Release()

	doc = d.Page("/peer?key=203.0.113.7", cookie)
	webtest.CheckPage(t, "/peer (kept)", doc, csrf)
	if webtest.ByID(doc, "peer-history-new") != nil {
		t.Fatal("still 'new' on the second view")
	}
	if n := webtest.ByID(doc, "peer-history-since"); n == nil || !strings.Contains(webtest.Text(n), "2023-11-14 22:13:20 UTC") ||
		webtest.Attr(webtest.Find(n, webtest.ByTag("time"))[0], "datetime") != "2023-11-14T22:13:20Z" {
		t.Fatalf("since: %v", n)
	}
	rows := historyRows(doc)
	if len(rows) != 1 || rows[0]["from"] != "22:10" || rows[0]["requests"] != "4" || rows[0]["rejected_rate_limit"] != "3" ||
		rows[0]["rejected_concurrency"] != "0" || rows[0]["inflight"] != "1" {
		t.Fatalf("table: %v", rows)
	}

	// The JSON the chart draws: session or bearer, like every page.
	get := func(path string, hdr ...string) (int, map[string]any) {
		t.Helper()
		resp := d.Do("GET", path, nil, hdr...)
		defer resp.Body.Close()
		var v map[string]any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, v
	}
	code, v := get("/peer/history?key=203.0.113.7", "Cookie", cookie)
	if code != 200 || v["kept"] != true || v["step"] != float64(10) {
		t.Fatalf("json: %d %v", code, v)
	}
	for key, want := range map[string][]any{
		"t": {float64(1_700_000_010)}, "requests": {float64(4)}, "rejected_rate_limit": {float64(3)},
		"rejected_concurrency": {float64(0)}, "inflight": {float64(1)},
	} {
		if got, _ := v[key].([]any); !slices.Equal(got, want) {
			t.Errorf("json %s = %v, want %v", key, got, want)
		}
	}
	for path, field := range map[string]string{
		"/peer/history": "key",
		"/peer/history?key=" + url.QueryEscape(hostile): "key",
		"/peer/history?key=203.0.113.7&minutes=0":       "minutes",
		"/peer/history?key=203.0.113.7&minutes=61":      "minutes",
	} {
		if code, v := get(path, "Authorization", "Bearer "+webtest.Token); code != 422 || v["field"] != field {
			t.Errorf("%s: %d %v", path, code, v)
		}
	}
	if resp := d.Do("GET", "/peer/history?key=203.0.113.7", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous: %d", resp.StatusCode)
	}
	// Fetching a peer's history starts recording it, like a view.
	if s.PeerHistory().Kept(peer.KeyFromAddr(webtest.MustAddr(t, "203.0.113.99"), 64)) {
		t.Fatal("kept before any view")
	}
	if code, v := get("/peer/history?key=203.0.113.99", "Cookie", cookie); code != 200 || v["kept"] != true || len(v["t"].([]any)) != 0 {
		t.Fatalf("new peer: %d %v", code, v)
	}

	// A busy peer nobody viewed is recorded from the top lists: its first
	// sample is the baseline, the next one a point.
	d.Send("198.51.100.1", 2)
	s.SamplePeerHistory()
	d.Clock.Add(10 * time.Second)
	d.Send("198.51.100.1", 6)
	s.SamplePeerHistory()
	code, v = get("/peer/history?key=198.51.100.1", "Cookie", cookie)
	if code != 200 || v["kept"] != true || !slices.Equal(v["requests"].([]any), []any{float64(6)}) {
		t.Fatalf("top peer: %d %v", code, v)
	}
}

func TestDashboardPeerAudit(t *testing.T) {
	d, _ := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	d.Send("203.0.113.7", 5)
	post := func(path string, form url.Values) {
		t.Helper()
		form.Set("csrf", csrf)
		if resp := d.Do("POST", path, form, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s %v: %d", path, form, resp.StatusCode)
		}
	}
	// About 203.0.113.7: its reduction, an exemption of a /24 holding it,
	// the removal of that exemption. Not about it: another peer's
	// forgetting, a denial elsewhere, a group edit.
	post("/peer/reduce", url.Values{"key": {"203.0.113.7"}, "group": {"general"}})
	post("/exemptions", url.Values{"kind": {"exempt_peer"}, "value": {"203.0.113.0/24"}})
	post("/exemptions/delete", url.Values{"kind": {"exempt_peer"}, "value": {"203.0.113.0/24"}})
	post("/peer/forget", url.Values{"key": {"203.0.113.70"}})
	post("/exemptions", url.Values{"kind": {"deny_peer"}, "value": {"198.51.100.0/24"}})
	post("/peer/reduce", url.Values{"key": {"203.0.113.70"}, "group": {"general"}})
	post("/groups/general", url.Values{"leaky_limit": {"9"}})

	doc := d.Page("/peer?key=203.0.113.7", cookie)
	webtest.CheckPage(t, "/peer", doc, csrf)
	tbl := webtest.ByID(doc, "peer-audit")
	if tbl == nil {
		t.Fatal("no audit table")
	}
	var got []string
	for _, tr := range webtest.Find(tbl, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }) {
		cells := webtest.Find(tr, webtest.ByTag("td"))
		got = append(got, webtest.Text(cells[3])+" "+webtest.Text(cells[4]))
	}
	want := []string{"exemption.remove exempt_peer", "exemption.add exempt_peer", "peer.reduce 203.0.113.7 general"}
	if !slices.Equal(got, want) {
		t.Fatalf("audit rows %q, want %q", got, want)
	}
	// A peer with none says so.
	doc = d.Page("/peer?key=192.0.2.200", cookie)
	if webtest.ByID(doc, "peer-audit") != nil || webtest.ByID(doc, "peer-audit-none") == nil {
		t.Fatal("audit rows for a peer nobody touched")
	}
	// An IPv6 /64 peer is concerned by a denial of one address inside it.
	post("/exemptions", url.Values{"kind": {"deny_peer"}, "value": {"2001:db8::1"}})
	doc = d.Page("/peer?key="+url.QueryEscape("2001:db8::/64"), cookie)
	if tbl := webtest.ByID(doc, "peer-audit"); tbl == nil || !strings.Contains(webtest.Text(tbl), "2001:db8::1") {
		t.Fatal("the denial inside the /64 is not listed")
	}
}

func TestDashboardExemptionLists(t *testing.T) {
	d, _ := webtest.NewDashServer(t, func(c *limiter.Config) {
		c.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		c.ExemptPaths = []string{"/health"}
		c.Deny = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	cookie, csrf := d.Login()
	for _, e := range []live.Exemption{
		{Kind: live.ExemptPeer, Value: "203.0.113.5", Note: "monitoring"},
		{Kind: live.ExemptPath, Value: "/metrics"},
		{Kind: live.DenyPeer, Value: "198.51.100.0/24", Note: "abuse"},
	} {
		if _, err := d.Live.AddExemption(context.Background(), "test", e); err != nil {
			t.Fatal(err)
		}
	}
	doc := d.Page("/exemptions", cookie)
	webtest.CheckPage(t, "/exemptions", doc, csrf)
	if webtest.ByID(doc, "file-note") == nil {
		t.Fatal("no note on the file's entries")
	}
	for id, want := range map[string][][2]string{
		"list-exempt_peer": {{"file", "10.0.0.0/8"}, {"live", "203.0.113.5"}},
		"list-exempt_path": {{"file", "/health"}, {"live", "/metrics"}},
		"list-deny_peer":   {{"file", "192.0.2.0/24"}, {"live", "198.51.100.0/24"}},
	} {
		tbl := webtest.ByID(doc, id)
		if tbl == nil {
			t.Fatalf("no table %s", id)
		}
		var got [][2]string
		for _, tr := range webtest.Find(tbl, func(n *html.Node) bool { return n.Data == "tr" && webtest.HasAttr(n, "data-source") }) {
			src := webtest.Attr(tr, "data-source")
			got = append(got, [2]string{src, webtest.Text(webtest.Find(tr, webtest.ByTag("code"))[0])})
			forms := webtest.Find(tr, webtest.ByTag("form"))
			// File entries are read-only; live ones have their remove form.
			switch {
			case src == "file" && len(forms) != 0:
				t.Errorf("%s: a file entry can be removed", id)
			case src == "live" && (len(forms) != 1 || webtest.Attr(forms[0], "action") != "/exemptions/delete"):
				t.Errorf("%s: a live entry without its remove form", id)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", id, got, want)
		}
	}
	// Removing a live deny entry works; a file entry is not live.
	resp := d.Do("POST", "/exemptions/delete", url.Values{"csrf": {csrf}, "kind": {"deny_peer"}, "value": {"198.51.100.0/24"}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	resp = d.Do("POST", "/exemptions/delete", url.Values{"csrf": {csrf}, "kind": {"deny_peer"}, "value": {"192.0.2.0/24"}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("remove a file entry: %d", resp.StatusCode)
	}
	doc = d.Page("/exemptions", cookie)
	if rows := webtest.Find(webtest.ByID(doc, "list-deny_peer"), func(n *html.Node) bool { return n.Data == "tr" && webtest.HasAttr(n, "data-source") }); len(rows) != 1 || webtest.Attr(rows[0], "data-source") != "file" {
		t.Fatalf("deny list after removal: %d rows", len(rows))
	}
	// With nothing anywhere, every list says so.
	d, _ = webtest.NewDashServer(t, nil)
	cookie, csrf = d.Login()
	doc = d.Page("/exemptions", cookie)
	webtest.CheckPage(t, "/exemptions (empty)", doc, csrf)
	if n := webtest.Find(doc, func(n *html.Node) bool { return webtest.HasAttr(n, "data-empty") }); len(n) != 3 {
		t.Fatalf("%d empty lists", len(n))
	}
}

// TestDashboardExemptionsPaged: a list longer than a page shows a page of
// it, says which entries and how many in all, and links the pages before
// and after; the other lists keep their own page.
func TestDashboardExemptionsPaged(t *testing.T) {
	d, _ := webtest.NewDashServer(t, nil)
	cookie, csrf := d.Login()
	for i := range 450 {
		e := live.Exemption{Kind: live.ExemptPeer, Value: netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)}).String()}
		if _, err := d.Live.AddExemption(context.Background(), "test", e); err != nil {
			t.Fatal(err)
		}
	}
	rowsOf := func(doc *html.Node) []*html.Node {
		return webtest.Find(webtest.ByID(doc, "list-exempt_peer"), func(n *html.Node) bool { return n.Data == "tr" && webtest.HasAttr(n, "data-source") })
	}
	pager := func(doc *html.Node) *html.Node {
		p := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-pager") == "exempt_peer" })
		if len(p) != 1 {
			t.Fatalf("%d pagers of the exempt peers", len(p))
		}
		return p[0]
	}
	links := func(p *html.Node) map[string]string {
		m := map[string]string{}
		for _, a := range webtest.Find(p, webtest.ByTag("a")) {
			m[webtest.Attr(a, "rel")] = webtest.Attr(a, "href")
		}
		return m
	}
	doc := d.Page("/exemptions", cookie)
	webtest.CheckPage(t, "/exemptions (paged)", doc, csrf)
	if n := len(rowsOf(doc)); n != 200 {
		t.Fatalf("first page: %d rows, want 200", n)
	}
	p := pager(doc)
	if txt := webtest.Text(p); !strings.Contains(txt, "1–200 of 450") {
		t.Fatalf("first page's pager says %q", txt)
	}
	l := links(p)
	if _, ok := l["prev"]; ok || !strings.Contains(l["next"], "exempt_peer=200") {
		t.Fatalf("first page's links: %v", l)
	}
	doc = d.Page("/exemptions?exempt_peer=400", cookie)
	rows := rowsOf(doc)
	if len(rows) != 50 || webtest.Text(webtest.Find(rows[0], webtest.ByTag("code"))[0]) != "203.0.1.144" {
		t.Fatalf("last page: %d rows", len(rows))
	}
	l = links(pager(doc))
	if _, ok := l["next"]; ok || !strings.Contains(l["prev"], "exempt_peer=200") {
		t.Fatalf("last page's links: %v", l)
	}
	if txt := webtest.Text(pager(doc)); !strings.Contains(txt, "401–450 of 450") {
		t.Fatalf("last page's pager says %q", txt)
	}
}
