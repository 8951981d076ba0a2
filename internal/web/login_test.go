package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/webtest"
	"golang.org/x/net/html"
)

func TestDashboardLogin(t *testing.T) {
	d := webtest.NewDash(t)
	resp := d.Do("POST", "/login", url.Values{"token": {webtest.Token}})
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
	for _, x := range d.Do("POST", "/login", url.Values{"token": {webtest.Token}}, "X-Forwarded-Proto", "https").Cookies() {
		secure = secure || (x.Name == "limiterd_session" && x.Secure)
	}
	if !secure {
		t.Fatal("a login through an HTTPS proxy did not get a Secure cookie")
	}
	cookie := c.Name + "=" + c.Value
	d.Page("/", cookie)
	// Six failures from one address: each a 401 with its message (the
	// sixth after a delay); the right token, from the same address, still
	// logs in at once: nobody who shares an address is locked out.
	for i := 0; i < 6; i++ {
		resp := d.Do("POST", "/login", url.Values{"token": {"wrong"}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
		errs := webtest.Find(webtest.Parse(t, resp), func(n *html.Node) bool { return webtest.Attr(n, "id") == "login-error" })
		if len(errs) != 1 {
			t.Fatalf("failure %d: no message", i)
		}
	}
	if resp := d.Do("POST", "/login", url.Values{"token": {webtest.Token}}); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("the right token after six failures from its address: %d", resp.StatusCode)
	}
	// Bearer tokens from the same address (nginx's auth subrequest, the
	// node's throttle client) work too.
	for _, p := range []string{"/", "/api/v1/groups", "/api/v1/check/auth"} {
		if resp := d.Do("GET", p, nil, "Authorization", "Bearer "+webtest.Token); resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound {
			t.Fatalf("bearer on %s from an address with failed logins: %d", p, resp.StatusCode)
		}
	}
	// Logout ends the session.
	doc := d.Page("/", cookie)
	csrf := webtest.Attr(webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "name") == "csrf" })[0], "value")
	if resp := d.Do("POST", "/logout", url.Values{"csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp := d.Do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
	// Sessions expire after 12 h.
	cookie, _ = d.Login()
	d.Clock.Add(12*time.Hour + time.Second)
	if resp := d.Do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
}

func TestDashboardCSRFAndAudit(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	for _, form := range []url.Values{{"on": {"false"}}, {"on": {"false"}, "csrf": {"forged"}}} {
		resp := d.Do("POST", "/switch", form, "Cookie", cookie)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("switch %v: %d", form, resp.StatusCode)
		}
	}
	if !d.Lim.Enabled() {
		t.Fatal("a POST without the CSRF token turned the limiter off")
	}
	resp := d.Do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrf}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther || d.Lim.Enabled() {
		t.Fatalf("switch: %d, enabled %v", resp.StatusCode, d.Lim.Enabled())
	}
	// A script with the bearer token needs no CSRF token.
	resp = d.Do("POST", "/switch", url.Values{"on": {"true"}}, "Authorization", "Bearer "+webtest.Token)
	if resp.StatusCode != http.StatusSeeOther || !d.Lim.Enabled() {
		t.Fatalf("bearer switch: %d", resp.StatusCode)
	}
	if resp := d.Do("GET", "/", nil, "Authorization", "Bearer nope"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong bearer: %d", resp.StatusCode)
	}
	doc := d.Page("/audit", cookie)
	rows := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
	if len(rows) != 2 {
		t.Fatalf("%d audit rows", len(rows))
	}
	cells := webtest.Find(rows[1], webtest.ByTag("td"))
	actor := webtest.Text(cells[2])
	if !strings.HasPrefix(actor, "session:") || len(actor) != len("session:")+8 || strings.Contains(cookie, actor[8:]) {
		t.Fatalf("session actor %q", actor)
	}
	if got := webtest.Text(webtest.Find(rows[0], webtest.ByTag("td"))[2]); got != "api-token" {
		t.Fatalf("bearer actor %q", got)
	}
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
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
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
		d.H.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with a 12 MB body: %d, want 413", c.path, w.Code)
		}
		if body.n > 64<<10 {
			t.Errorf("%s read %d bytes of the body, want at most a few KB", c.path, body.n)
		}
	}
	// An ordinary form still works.
	if resp := d.Do("POST", "/login", url.Values{"token": {webtest.Token}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login after the big posts: %d", resp.StatusCode)
	}
}
