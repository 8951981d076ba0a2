package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type dash struct {
	t     *testing.T
	h     http.Handler
	lim   *limiter.Limiter
	live  *live.Live
	clock *clock
}

const dashToken = "s3cret-token"

func newDash(t *testing.T) *dash {
	t.Helper()
	d, _ := newDashServer(t, nil)
	return d
}

// newDashServer is newDash with edit applied to the file configuration,
// keeping the Server (whose peer history the tests sample by hand on the
// fake clock: Run is not running). The clock starts on a 10 s boundary.
func newDashServer(t *testing.T, edit func(*limiter.Config)) (*dash, *web.Server) {
	t.Helper()
	return newDashWith(t, edit, nil)
}

// newDashWith is newDashServer with opt applied to the Server's options.
func newDashWith(t *testing.T, edit func(*limiter.Config), opt func(*web.Options)) (*dash, *web.Server) {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	groups := limiter.ArweaveGroups()
	g := groups["general"]
	g.LeakyLimit, g.LeakyTickReduction = 3, 3
	groups["general"] = g
	cfg := limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	if edit != nil {
		edit(&cfg)
	}
	rec := insight.NewRecorder(insight.ArrivalsPerShard)
	lim, err := limiter.New(memory.New(), c.Now(), cfg, limiter.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	db := web.OpenTestStore(t)
	live, err := live.New(context.Background(), lim, db, cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	opts := web.Options{
		Token: dashToken, Now: c.Now, DataPlane: proxy.New(lim, proxy.Options{Now: c.Now}),
		Offenses: db, KeyHelp: map[string]string{"leaky_limit": "tokens a peer may hold consumed"}, Recorder: rec,
	}
	if opt != nil {
		opt(&opts)
	}
	s := web.MustNewServer(t, lim, live, opts)
	return &dash{t: t, h: s.AdminHandler(), lim: lim, live: live, clock: c}, s
}

// restart returns the dashboard of a new Server on the same limiter, live
// state and clock, with sessions kept in store: what a restart of the
// daemon gives (d itself must have been built by restart too).
func (d *dash) restart(store web.SessionStore) *dash {
	s := web.MustNewServer(d.t, d.lim, d.live, web.Options{Token: dashToken, Now: d.clock.Now, Sessions: store})
	return &dash{t: d.t, h: s.AdminHandler(), lim: d.lim, live: d.live, clock: d.clock}
}

// do sends one request; form is POSTed url-encoded when not nil.
func (d *dash) do(method, path string, form url.Values, hdr ...string) *http.Response {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	r.RemoteAddr = "192.0.2.1:4000"
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w.Result()
}

// login logs in through the form and returns the session cookie header
// and the session's CSRF token (read from the overview's forms).
func (d *dash) login() (cookie, csrf string) {
	d.t.Helper()
	resp := d.do("POST", "/login", url.Values{"token": {dashToken}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		d.t.Fatalf("login: %d %v", resp.StatusCode, resp.Header)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "limiterd_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		d.t.Fatal("no session cookie")
	}
	doc := d.page("/", cookie)
	in := find(doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == "csrf" })
	if len(in) == 0 {
		d.t.Fatal("no CSRF field on the overview")
	}
	return cookie, attr(in[0], "value")
}

// page GETs path with the cookie, wants 200 and returns the parsed page.
func (d *dash) page(path, cookie string) *html.Node {
	d.t.Helper()
	resp := d.do("GET", path, nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return parse(d.t, resp)
}

func parse(t *testing.T, resp *http.Response) *html.Node {
	t.Helper()
	defer resp.Body.Close()
	doc, err := html.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// find returns every element under n that match accepts, in document
// order.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func byTag(tag string) func(*html.Node) bool { return func(n *html.Node) bool { return n.Data == tag } }

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// checkPage asserts the structure every dashboard page must have: every
// visible input and every select has a <label for> naming its id, ids are
// unique, every POST form carries the CSRF token (but the login form),
// and nothing inline would trip the Content-Security-Policy.
func checkPage(t *testing.T, path string, doc *html.Node, csrf string) {
	t.Helper()
	ids := map[string]int{}
	for _, n := range find(doc, func(n *html.Node) bool { return hasAttr(n, "id") }) {
		ids[attr(n, "id")]++
	}
	for id, k := range ids {
		if k > 1 {
			t.Errorf("%s: id %q used %d times", path, id, k)
		}
	}
	labels := map[string]bool{}
	for _, l := range find(doc, byTag("label")) {
		labels[attr(l, "for")] = true
	}
	for _, n := range find(doc, func(n *html.Node) bool {
		return (n.Data == "input" && attr(n, "type") != "hidden") || n.Data == "select" || n.Data == "textarea"
	}) {
		id := attr(n, "id")
		if id == "" || !labels[id] {
			t.Errorf("%s: <%s name=%q id=%q> has no <label for>", path, n.Data, attr(n, "name"), id)
		}
	}
	for _, f := range find(doc, byTag("form")) {
		switch strings.ToLower(attr(f, "method")) {
		case "get":
			if attr(f, "action") != "/peers" {
				t.Errorf("%s: form %q is method=get", path, attr(f, "action"))
			}
			continue
		case "post":
		default:
			t.Errorf("%s: form %q has method %q", path, attr(f, "action"), attr(f, "method"))
		}
		if attr(f, "action") == "/login" {
			continue
		}
		tok := find(f, func(n *html.Node) bool {
			return n.Data == "input" && attr(n, "type") == "hidden" && attr(n, "name") == "csrf"
		})
		if len(tok) != 1 || attr(tok[0], "value") != csrf || csrf == "" {
			t.Errorf("%s: form %q lacks the session's CSRF field", path, attr(f, "action"))
		}
	}
	for _, s := range find(doc, byTag("script")) {
		if attr(s, "src") == "" || text(s) != "" {
			t.Errorf("%s: inline script", path)
		}
	}
	if n := find(doc, byTag("style")); len(n) > 0 {
		t.Errorf("%s: inline <style>", path)
	}
	for _, n := range find(doc, func(n *html.Node) bool { return hasAttr(n, "style") || strings.HasPrefix(firstOn(n), "on") }) {
		t.Errorf("%s: <%s> has an inline style or event handler", path, n.Data)
	}
}

func firstOn(n *html.Node) string {
	for _, a := range n.Attr {
		if strings.HasPrefix(a.Key, "on") || strings.HasPrefix(a.Key, "hx-on") {
			return "on"
		}
	}
	return ""
}

func TestDashboardPagesStructure(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login()
	// Give the pages something to list.
	if _, err := d.live.AddExemption(context.Background(), "test", live.Exemption{Kind: live.DenyPeer, Value: "198.51.100.0/24"}); err != nil {
		t.Fatal(err)
	}
	g, _ := d.lim.GroupID("general")
	for _, ip := range []string{"203.0.113.9", "2001:db8::1"} {
		a := mustAddr(t, ip)
		dec := d.lim.Decide(d.clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		dec.Release()
	}
	for _, path := range []string{"/", "/groups", "/groups/general", "/exemptions", "/audit", "/peers", "/peers?q=bogus",
		"/peers?sort=request_rate", "/peers?sort=rejection_rate&group=general", "/peer?key=203.0.113.9", "/peer?key=2001:db8::/64",
		"/peer?key=198.51.100.200", "/outbound", "/offenders"} {
		resp := d.do("GET", path, nil, "Cookie", cookie)
		if resp.StatusCode != 200 && !(path == "/peers?q=bogus" && resp.StatusCode == http.StatusUnprocessableEntity) {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		doc := parse(t, resp)
		checkPage(t, path, doc, csrf)
		if len(find(doc, byTag("h1"))) != 1 {
			t.Errorf("%s: want one h1", path)
		}
	}
	// The login page, without a session.
	resp := d.do("GET", "/login", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("login page: %d", resp.StatusCode)
	}
	checkPage(t, "/login", parse(t, resp), "")
	// Groups: one row per group linking to its page, whose form has every
	// key of SPEC §3, each with its help.
	doc := d.page("/groups", cookie)
	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasAttr(n, "data-group") })
	if len(rows) != len(d.live.Groups()) {
		t.Fatalf("%d group rows for %d groups", len(rows), len(d.live.Groups()))
	}
	for _, r := range rows {
		g := attr(r, "data-group")
		if a := find(r, byTag("a")); len(a) == 0 || attr(a[0], "href") != "/groups/"+g {
			t.Fatalf("row %s: no link to its page", g)
		}
		f := find(d.page("/groups/"+g, cookie), func(n *html.Node) bool { return n.Data == "form" && attr(n, "action") == "/groups/"+g })
		if len(f) != 1 || attr(f[0], "hx-post") != attr(f[0], "action") {
			t.Fatalf("group %s: form %v", g, f)
		}
		for _, k := range limiter.GroupKeys {
			if len(find(f[0], func(n *html.Node) bool { return attr(n, "name") == k })) != 1 {
				t.Errorf("form %s: no field %s", g, k)
			}
		}
		help := find(f[0], func(n *html.Node) bool { return attr(n, "id") == "g-"+g+"-leaky_limit-help" })
		if len(help) != 1 || text(help[0]) != "tokens a peer may hold consumed" {
			t.Errorf("group %s: leaky_limit's help %v", g, help)
		}
	}
	// The overview polls its stats partial.
	doc = d.page("/", cookie)
	poll := find(doc, func(n *html.Node) bool { return attr(n, "id") == "stats" })
	if len(poll) != 1 || attr(poll[0], "hx-get") != "/stats" || attr(poll[0], "hx-trigger") != "every 3s" {
		t.Fatalf("stats poll: %v", poll)
	}
}

func TestDashboardSecurityHeaders(t *testing.T) {
	d := newDash(t)
	cookie, _ := d.login()
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
		resp := d.do("GET", path, nil, "Cookie", c)
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
	resp := d.do("GET", "/groups", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("no session: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestDashboardStatic(t *testing.T) {
	d := newDash(t)
	for path, ctype := range map[string]string{
		"/static/htmx.min.js":       "text/javascript",
		"/static/uPlot.iife.min.js": "text/javascript",
		"/static/uPlot.min.css":     "text/css",
		"/static/app.css":           "text/css",
		"/static/htmx.LICENSE":      "",
	} {
		resp := d.do("GET", path, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=31536000") {
			t.Errorf("%s: Cache-Control %q", path, cc)
		}
	}
	if resp := d.do("GET", "/static/", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("directory listing: %d", resp.StatusCode)
	}
}

func TestDashboardLogin(t *testing.T) {
	d := newDash(t)
	resp := d.do("POST", "/login", url.Values{"token": {dashToken}})
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == "limiterd_session" {
			c = x
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || len(c.Value) != 64 || c.Secure {
		t.Fatalf("cookie %+v", c)
	}
	// Behind an HTTPS reverse proxy the cookie is Secure.
	secure := false
	for _, x := range d.do("POST", "/login", url.Values{"token": {dashToken}}, "X-Forwarded-Proto", "https").Cookies() {
		secure = secure || (x.Name == "limiterd_session" && x.Secure)
	}
	if !secure {
		t.Fatal("a login through an HTTPS proxy did not get a Secure cookie")
	}
	cookie := c.Name + "=" + c.Value
	d.page("/", cookie)
	// Five failures from one address, then 429 even for the right token.
	for i := 0; i < 5; i++ {
		resp := d.do("POST", "/login", url.Values{"token": {"wrong"}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
		errs := find(parse(t, resp), func(n *html.Node) bool { return attr(n, "id") == "login-error" })
		if len(errs) != 1 {
			t.Fatalf("failure %d: no message", i)
		}
	}
	resp = d.do("POST", "/login", url.Values{"token": {dashToken}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sixth login: %d", resp.StatusCode)
	}
	if len(resp.Cookies()) != 0 {
		t.Fatal("a blocked login set a cookie")
	}
	// The block is the login form's: the right bearer token from the same
	// address (nginx's auth subrequest, the node's throttle client) still
	// works.
	for _, p := range []string{"/", "/api/v1/groups", "/api/v1/check/auth"} {
		if resp := d.do("GET", p, nil, "Authorization", "Bearer "+dashToken); resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound {
			t.Fatalf("bearer on %s from an address blocked at the login form: %d", p, resp.StatusCode)
		}
	}
	// Another address may still log in; a minute later this one may too.
	r := httptest.NewRequest("POST", "/login", strings.NewReader("token="+dashToken))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "192.0.2.2:5000"
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("other address: %d", w.Code)
	}
	d.clock.Add(time.Minute)
	if resp := d.do("POST", "/login", url.Values{"token": {dashToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a minute: %d", resp.StatusCode)
	}
	// Logout ends the session.
	doc := d.page("/", cookie)
	csrf := attr(find(doc, func(n *html.Node) bool { return attr(n, "name") == "csrf" })[0], "value")
	if resp := d.do("POST", "/logout", url.Values{"csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp := d.do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
	// Sessions expire after 12 h.
	cookie, _ = d.login()
	d.clock.Add(12*time.Hour + time.Second)
	if resp := d.do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
}

func TestDashboardCSRFAndAudit(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login()
	for _, form := range []url.Values{{"on": {"false"}}, {"on": {"false"}, "csrf": {"forged"}}} {
		resp := d.do("POST", "/switch", form, "Cookie", cookie)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("switch %v: %d", form, resp.StatusCode)
		}
	}
	if !d.lim.Enabled() {
		t.Fatal("a POST without the CSRF token turned the limiter off")
	}
	resp := d.do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrf}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther || d.lim.Enabled() {
		t.Fatalf("switch: %d, enabled %v", resp.StatusCode, d.lim.Enabled())
	}
	// A script with the bearer token needs no CSRF token.
	resp = d.do("POST", "/switch", url.Values{"on": {"true"}}, "Authorization", "Bearer "+dashToken)
	if resp.StatusCode != http.StatusSeeOther || !d.lim.Enabled() {
		t.Fatalf("bearer switch: %d", resp.StatusCode)
	}
	if resp := d.do("GET", "/", nil, "Authorization", "Bearer nope"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong bearer: %d", resp.StatusCode)
	}
	doc := d.page("/audit", cookie)
	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
	if len(rows) != 2 {
		t.Fatalf("%d audit rows", len(rows))
	}
	cells := find(rows[1], byTag("td"))
	actor := text(cells[2])
	if !strings.HasPrefix(actor, "session:") || len(actor) != len("session:")+8 || strings.Contains(cookie, actor[8:]) {
		t.Fatalf("session actor %q", actor)
	}
	if got := text(find(rows[0], byTag("td"))[2]); got != "api-token" {
		t.Fatalf("bearer actor %q", got)
	}
}

const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>`

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// countingReader is an endless body of 'a's that counts what was read.
type countingReader struct{ n, max int }

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		return 0, io.EOF
	}
	k := min(len(p), c.max-c.n)
	for i := range p[:k] {
		p[i] = 'a'
	}
	c.n += k
	return k, nil
}

// TestDashboardFormBodyBounded: a form's body is read at most a few KB,
// before the login check or the session's: 60 concurrent 12 MB posts to
// /login took the process from 42 to 452 MB when it read 10 MB of each.
func TestDashboardFormBodyBounded(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login()
	for _, c := range []struct {
		path, cookie string
		prefix       string
	}{
		{"/login", "", "token="},
		{"/exemptions", cookie, "csrf=" + csrf + "&kind=deny_peer&value=192.0.2.1&note="},
		{"/groups/general", cookie, "csrf=" + csrf + "&leaky_limit="},
	} {
		body := &countingReader{max: 12 << 20}
		r := httptest.NewRequest("POST", c.path, io.MultiReader(strings.NewReader(c.prefix), body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.cookie != "" {
			r.Header.Set("Cookie", c.cookie)
		}
		w := httptest.NewRecorder()
		d.h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with a 12 MB body: %d, want 413", c.path, w.Code)
		}
		if body.n > 64<<10 {
			t.Errorf("%s read %d bytes of the body, want at most a few KB", c.path, body.n)
		}
	}
	// An ordinary form still works.
	if resp := d.do("POST", "/login", url.Values{"token": {dashToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login after the big posts: %d", resp.StatusCode)
	}
}
