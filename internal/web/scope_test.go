package web_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// scopeOf is docs/api.md's scope table, written out on its own (not read from
// the code it checks): the data calls, the GETs a read token may make,
// everything else admin.
func scopeOf(method, path string) string {
	switch method + " " + path {
	case "POST /api/v1/check", "POST /api/v1/release", "GET /api/v1/check/auth",
		"POST /api/v1/throttle", "GET /api/v1/throttle", "POST /api/v1/throttle/observe":
		return "data"
	case "GET /api/v1/backup":
		return "admin"
	}
	if strings.HasPrefix(path, "/debug/pprof/") { // limiterd's addition: the runtime's profiles (admin.pprof)
		return "admin"
	}
	if method == "GET" {
		return "read"
	}
	return "admin"
}

// concrete turns a chi pattern into a path that reaches its handler.
func concrete(pattern string) string {
	p := strings.ReplaceAll(pattern, "{group}", "general")
	return strings.ReplaceAll(p, "*", "192.0.2.9")
}

// TestScopesOnEveryRoute walks every route of the admin API and calls it
// with a token of each scope: no valid token is ever 401; a token outside
// its scope gets 403, inside it anything but 403.
func TestScopesOnEveryRoute(t *testing.T) {
	o := webtest.NewOps(t)
	routes, ok := o.H.(chi.Routes)
	if !ok {
		t.Fatalf("AdminHandler is a %T, not a chi router", o.H)
	}
	n := 0
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/api/v1/") {
			return nil
		}
		n++
		need := scopeOf(method, route)
		for _, tok := range []struct{ secret, scope string }{{webtest.Token, "admin"}, {webtest.OpsToken, "admin"}, {webtest.ReadToken, "read"}, {webtest.DataToken, "data"}} {
			body := "{}"
			if route == "/api/v1/throttle" && method == "POST" {
				body = `{"peer": "p", "path": "/info", "timeout": "1ms"}`
			}
			status, answer := o.Call(tok.secret, method, concrete(route), body)
			allowed := tok.scope == "admin" || tok.scope == need
			switch {
			case status == http.StatusUnauthorized:
				t.Errorf("%s %s with a %s token: 401 %s", method, route, tok.scope, answer)
			case allowed && status == http.StatusForbidden && !strings.Contains(answer, `"denied"`):
				t.Errorf("%s %s with a %s token: 403 %s, want it allowed (needs %s)", method, route, tok.scope, answer, need)
			case !allowed && status != http.StatusForbidden:
				t.Errorf("%s %s with a %s token: %d %s, want 403 (needs %s)", method, route, tok.scope, status, answer, need)
			case !allowed && !strings.Contains(answer, "has scope "+tok.scope):
				t.Errorf("%s %s with a %s token: the 403 does not say why: %s", method, route, tok.scope, answer)
			}
		}
		// No token, a wrong one: 401.
		for _, bad := range []string{"", "not-a-token-of-this-daemon"} {
			if status, _ := o.Call(bad, method, concrete(route), "{}"); status != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d, want 401", method, route, bad, status)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("walked %d API routes: the router was not walked", n)
	}
}

// TestAuditNamesTheToken: an edit made with a named token is audited as
// "token:<name>", with the main admin token as "api-token".
func TestAuditNamesTheToken(t *testing.T) {
	o := webtest.NewOps(t)
	if s, b := o.Call(webtest.OpsToken, "POST", "/api/v1/limiter/off", ""); s != 200 {
		t.Fatalf("switch off: %d %s", s, b)
	}
	if s, b := o.Call(webtest.Token, "POST", "/api/v1/limiter/on", ""); s != 200 {
		t.Fatalf("switch on: %d %s", s, b)
	}
	_, v := o.API("GET", "/api/v1/audit", "")
	entries := v["entries"].([]any)
	if len(entries) != 2 || entries[0].(map[string]any)["actor"] != "api-token" || entries[1].(map[string]any)["actor"] != "token:ops" {
		t.Errorf("audit: %v", entries)
	}
}

// TestDashboardScopes: a read token sees every page, read-only, and is
// refused every change; a data token opens nothing; a read login's
// session is read-only too.
func TestDashboardScopes(t *testing.T) {
	o := webtest.NewOps(t)
	for _, page := range []string{"/", "/groups", "/peers", "/exemptions", "/outbound", "/audit"} {
		resp := o.Do("GET", page, nil, "Authorization", "Bearer "+webtest.ReadToken)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `id="read-only"`) {
			t.Errorf("GET %s with a read token: %d, read-only banner %v", page, resp.StatusCode, strings.Contains(string(body), `id="read-only"`))
		}
		if resp := o.Do("GET", page, nil, "Authorization", "Bearer "+webtest.DataToken); resp.StatusCode != 403 {
			t.Errorf("GET %s with a data token: %d, want 403", page, resp.StatusCode)
		}
		resp = o.Do("GET", page, nil, "Authorization", "Bearer "+webtest.OpsToken)
		body, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || strings.Contains(string(body), `id="read-only"`) {
			t.Errorf("GET %s with an admin token: %d, read-only banner %v", page, resp.StatusCode, strings.Contains(string(body), `id="read-only"`))
		}
	}
	for _, post := range []string{"/switch", "/groups/general", "/groups/general/reset", "/exemptions", "/exemptions/delete", "/peer/reduce", "/peer/forget"} {
		if resp := o.Do("POST", post, url.Values{"on": {"false"}}, "Authorization", "Bearer "+webtest.ReadToken); resp.StatusCode != 403 {
			t.Errorf("POST %s with a read token: %d, want 403", post, resp.StatusCode)
		}
	}
	if !o.Lim.Enabled() {
		t.Fatal("a read token switched the limiter off")
	}

	// Logging in: a data token is refused, a read token gets a read-only
	// session that may log out.
	if resp := o.Do("POST", "/login", url.Values{"token": {webtest.DataToken}}); resp.StatusCode != 403 {
		t.Errorf("login with a data token: %d, want 403", resp.StatusCode)
	}
	resp := o.Do("POST", "/login", url.Values{"token": {webtest.ReadToken}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with a read token: %d", resp.StatusCode)
	}
	var cookie string
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	page := o.Do("GET", "/", nil, "Cookie", cookie)
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !strings.Contains(string(body), `id="read-only"`) {
		t.Fatalf("a read session's overview: %d", page.StatusCode)
	}
	csrf := webtest.CSRFOf(t, string(body))
	if resp := o.Do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != 403 {
		t.Errorf("a read session switching off: %d, want 403", resp.StatusCode)
	}
	if resp := o.Do("POST", "/logout", url.Values{"csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a read session logging out: %d", resp.StatusCode)
	}
}

func TestSetTokens(t *testing.T) {
	o := webtest.NewOps(t)
	for _, bad := range [][]web.Token{
		{{Name: "a", Scope: web.ScopeRead, Secret: "x"}, {Name: "a", Scope: web.ScopeData, Secret: "y"}},
		{{Name: "a", Scope: web.ScopeRead, Secret: webtest.Token}},
		{{Name: "a", Scope: web.ScopeRead}},
		{{Name: "", Scope: web.ScopeRead, Secret: "z"}},
		{{Name: "a", Secret: "z"}},
	} {
		if err := o.S.SetTokens(webtest.Token, bad); err == nil {
			t.Errorf("SetTokens(%+v) accepted", bad)
		}
	}
	// Refused: the tokens in force stay.
	if s, _ := o.Call(webtest.ReadToken, "GET", "/api/v1/groups", ""); s != 200 {
		t.Fatalf("after refused SetTokens, the read token: %d", s)
	}
	// A reload with new tokens: the old ones stop working at once.
	if err := o.S.SetTokens("new-admin-token-0123456789ab", []web.Token{{Name: "grafana", Scope: web.ScopeRead, Secret: "new-read-token-0123456789abc"}}); err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{webtest.Token: 401, webtest.ReadToken: 401, webtest.DataToken: 401, "new-admin-token-0123456789ab": 200, "new-read-token-0123456789abc": 200} {
		if s, _ := o.Call(tok, "GET", "/api/v1/groups", ""); s != want {
			t.Errorf("token %s after SetTokens: %d, want %d", tok, s, want)
		}
	}
}

func TestReadyzFailsWhileTheDatabaseCannotBeWritten(t *testing.T) {
	o := webtest.NewOps(t)
	status, _ := o.Call("", "GET", "/readyz", "")
	o.Ready = errors.New("database /var/lib/limiterd/limiterd.db cannot be written: write: no space left on device")
	status2, body := o.Call("", "GET", "/readyz", "")
	// The upstream is not configured here, so the first answer is 503 for
	// it; the database check is what changes.
	if status2 != 503 || !strings.Contains(body, "no space left on device") {
		t.Errorf("readyz with the database failing: %d %s (before: %d)", status2, body, status)
	}
}

// TestSessionsEndWithTheirToken: a dashboard login lasts while its token
// does: rotating the token (SIGHUP) logs its sessions out, and a token's
// new scope applies to its sessions at once.
func TestSessionsEndWithTheirToken(t *testing.T) {
	o := webtest.NewOps(t)
	login := func(token string) string {
		resp := o.Do("POST", "/login", url.Values{"token": {token}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d", resp.StatusCode)
		}
		for _, c := range resp.Cookies() {
			return c.Name + "=" + c.Value
		}
		t.Fatal("no cookie")
		return ""
	}
	grafana, ops, admin := login(webtest.ReadToken), login(webtest.OpsToken), login(webtest.Token)
	page := func(cookie string) int { return o.Do("GET", "/groups", nil, "Cookie", cookie).StatusCode }
	for _, c := range []string{grafana, ops, admin} {
		if s := page(c); s != 200 {
			t.Fatalf("a fresh session: %d", s)
		}
	}
	// grafana's secret rotated, ops becomes read-only, the admin token stays.
	if err := o.S.SetTokens(webtest.Token, []web.Token{
		{Name: "grafana", Scope: web.ScopeRead, Secret: "grafana-rotated-0123456789abcdef"},
		{Name: "ops", Scope: web.ScopeRead, Secret: webtest.OpsToken},
	}); err != nil {
		t.Fatal(err)
	}
	if s := page(grafana); s != http.StatusSeeOther {
		t.Errorf("a session of a rotated token: %d, want a redirect to /login", s)
	}
	if s := page(admin); s != 200 {
		t.Errorf("a session of the unchanged admin token: %d", s)
	}
	body, _ := io.ReadAll(o.Do("GET", "/", nil, "Cookie", ops).Body)
	if !strings.Contains(string(body), `id="read-only"`) {
		t.Error("a session of a token now of scope read is not read-only")
	}
	if resp := o.Do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {webtest.CSRFOf(t, string(body))}}, "Cookie", ops); resp.StatusCode != 403 {
		t.Errorf("a session of a token now of scope read switched the limiter: %d", resp.StatusCode)
	}
}

// TestLegacySessionKept: a session stored before tokens had fingerprints
// (an upgrade) was opened with the main admin token: it stays logged in
// while that token stays.
func TestLegacySessionKept(t *testing.T) {
	c := limitertest.NewClock(limitertest.T0)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, _ := limiter.New(memory.New(), c.Now(), cfg)
	st := webtest.OpenStore(t)
	lv, _ := live.New(context.Background(), lim, st, cfg, c.Now)
	id := "legacy-session-id-0123456789abcdef"
	key := sha256.Sum256([]byte(id))
	v := fmt.Sprintf(`{"csrf":"c","actor":"session:abcd1234","expires_ms":%d}`, c.Now().Add(time.Hour).UnixMilli())
	if err := st.PutSession(context.Background(), key[:], []byte(v)); err != nil {
		t.Fatal(err)
	}
	s := webtest.MustNewServer(t, lim, lv, web.Options{Token: webtest.Token, Now: c.Now, Sessions: st})
	get := func() int {
		r := httptest.NewRequest("GET", "/groups", nil)
		r.Header.Set("Cookie", "limiterd_session="+id)
		w := httptest.NewRecorder()
		s.AdminHandler().ServeHTTP(w, r)
		return w.Code
	}
	if code := get(); code != 200 {
		t.Errorf("a legacy session: %d, want 200", code)
	}
	// The main admin token rotated: the session ends.
	if err := s.SetTokens("another-admin-token-0123456789", nil); err != nil {
		t.Fatal(err)
	}
	if code := get(); code != http.StatusSeeOther {
		t.Errorf("a legacy session after the admin token rotated: %d, want a redirect", code)
	}
}
