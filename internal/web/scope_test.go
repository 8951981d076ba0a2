package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// The tokens of opsServer: the main admin token and one named token of
// each scope.
const (
	readToken  = "read-token-0123456789abcdef"
	dataToken  = "data-token-0123456789abcdef"
	opsToken   = "ops-token-0123456789abcdefgh"
	backupBody = "a bbolt file, as far as this test knows"
)

// opsServer is a Server with every route mounted (data plane, throttle,
// backup, snapshot) and four tokens, on a fake clock.
type opsServer struct {
	*dash
	s         *web.Server
	snapshots int
	ready     error
}

func newOps(t *testing.T) *opsServer {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := live.New(context.Background(), lim, web.OpenTestStore(t), cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(c.Now(), throttle.Config{Period: 30 * time.Second, RetryInterval: time.Second, DefaultType: "default", DefaultRPM: 900})
	if err != nil {
		t.Fatal(err)
	}
	o := &opsServer{}
	o.s = web.MustNewServer(t, lim, lv, web.Options{
		Token:    dashToken,
		Gatherer: prometheus.NewRegistry(),
		Tokens: []web.Token{
			{Name: "grafana", Scope: web.ScopeRead, Secret: readToken},
			{Name: "nginx", Scope: web.ScopeData, Secret: dataToken},
			{Name: "ops", Scope: web.ScopeAdmin, Secret: opsToken},
		},
		Now:       c.Now,
		DataPlane: proxy.New(lim, proxy.Options{Now: c.Now}),
		Throttle:  th,
		Snapshot:  func(context.Context) error { o.snapshots++; return nil },
		Ready:     func(context.Context) error { return o.ready },
		Build:     api.Build{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
		Daemon: func() api.DaemonInfo {
			return api.DaemonInfo{ConfigFile: "/etc/limiterd/config.toml", ConfigLoadedAt: c.Now().Add(-time.Hour), StartedAt: c.Now().Add(-2 * time.Hour)}
		},
		Backup: func(ctx context.Context, open func(int64) (io.Writer, error)) (int64, error) {
			w, err := open(int64(len(backupBody)))
			if err != nil {
				return 0, err
			}
			n, err := io.WriteString(w, backupBody)
			return int64(n), err
		},
	})
	t.Cleanup(o.s.Close)
	o.dash = &dash{t: t, h: o.s.AdminHandler(), lim: lim, live: lv, clock: c}
	return o
}

// call sends one request with a bearer token and returns the status and
// body.
func (o *opsServer) call(token, method, path, body string) (int, string) {
	o.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.1:4000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	o.h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// scopeOf is SPEC §8's scope table, written out on its own (not read from
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
	o := newOps(t)
	routes, ok := o.h.(chi.Routes)
	if !ok {
		t.Fatalf("AdminHandler is a %T, not a chi router", o.h)
	}
	n := 0
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/api/v1/") {
			return nil
		}
		n++
		need := scopeOf(method, route)
		for _, tok := range []struct{ secret, scope string }{{dashToken, "admin"}, {opsToken, "admin"}, {readToken, "read"}, {dataToken, "data"}} {
			body := "{}"
			if route == "/api/v1/throttle" && method == "POST" {
				body = `{"peer": "p", "path": "/info", "timeout": "1ms"}`
			}
			status, answer := o.call(tok.secret, method, concrete(route), body)
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
			if status, _ := o.call(bad, method, concrete(route), "{}"); status != http.StatusUnauthorized {
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
	o := newOps(t)
	if s, b := o.call(opsToken, "POST", "/api/v1/limiter/off", ""); s != 200 {
		t.Fatalf("switch off: %d %s", s, b)
	}
	if s, b := o.call(dashToken, "POST", "/api/v1/limiter/on", ""); s != 200 {
		t.Fatalf("switch on: %d %s", s, b)
	}
	_, v := o.api("GET", "/api/v1/audit", "")
	entries := v["entries"].([]any)
	if len(entries) != 2 || entries[0].(map[string]any)["actor"] != "api-token" || entries[1].(map[string]any)["actor"] != "token:ops" {
		t.Errorf("audit: %v", entries)
	}
}

// TestDashboardScopes: a read token sees every page, read-only, and is
// refused every change; a data token opens nothing; a read login's
// session is read-only too.
func TestDashboardScopes(t *testing.T) {
	o := newOps(t)
	for _, page := range []string{"/", "/groups", "/peers", "/exemptions", "/outbound", "/audit"} {
		resp := o.do("GET", page, nil, "Authorization", "Bearer "+readToken)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `id="read-only"`) {
			t.Errorf("GET %s with a read token: %d, read-only banner %v", page, resp.StatusCode, strings.Contains(string(body), `id="read-only"`))
		}
		if resp := o.do("GET", page, nil, "Authorization", "Bearer "+dataToken); resp.StatusCode != 403 {
			t.Errorf("GET %s with a data token: %d, want 403", page, resp.StatusCode)
		}
		resp = o.do("GET", page, nil, "Authorization", "Bearer "+opsToken)
		body, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || strings.Contains(string(body), `id="read-only"`) {
			t.Errorf("GET %s with an admin token: %d, read-only banner %v", page, resp.StatusCode, strings.Contains(string(body), `id="read-only"`))
		}
	}
	for _, post := range []string{"/switch", "/groups/general", "/groups/general/reset", "/exemptions", "/exemptions/delete", "/peer/reduce", "/peer/forget"} {
		if resp := o.do("POST", post, url.Values{"on": {"false"}}, "Authorization", "Bearer "+readToken); resp.StatusCode != 403 {
			t.Errorf("POST %s with a read token: %d, want 403", post, resp.StatusCode)
		}
	}
	if !o.lim.Enabled() {
		t.Fatal("a read token switched the limiter off")
	}

	// Logging in: a data token is refused, a read token gets a read-only
	// session that may log out.
	if resp := o.do("POST", "/login", url.Values{"token": {dataToken}}); resp.StatusCode != 403 {
		t.Errorf("login with a data token: %d, want 403", resp.StatusCode)
	}
	resp := o.do("POST", "/login", url.Values{"token": {readToken}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with a read token: %d", resp.StatusCode)
	}
	var cookie string
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	page := o.do("GET", "/", nil, "Cookie", cookie)
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !strings.Contains(string(body), `id="read-only"`) {
		t.Fatalf("a read session's overview: %d", page.StatusCode)
	}
	csrf := csrfOf(t, string(body))
	if resp := o.do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != 403 {
		t.Errorf("a read session switching off: %d, want 403", resp.StatusCode)
	}
	if resp := o.do("POST", "/logout", url.Values{"csrf": {csrf}}, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a read session logging out: %d", resp.StatusCode)
	}
}

// csrfOf finds the CSRF token of the first form of a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatal("no CSRF field on the page")
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestSetTokens(t *testing.T) {
	o := newOps(t)
	for _, bad := range [][]web.Token{
		{{Name: "a", Scope: web.ScopeRead, Secret: "x"}, {Name: "a", Scope: web.ScopeData, Secret: "y"}},
		{{Name: "a", Scope: web.ScopeRead, Secret: dashToken}},
		{{Name: "a", Scope: web.ScopeRead}},
		{{Name: "", Scope: web.ScopeRead, Secret: "z"}},
		{{Name: "a", Secret: "z"}},
	} {
		if err := o.s.SetTokens(dashToken, bad); err == nil {
			t.Errorf("SetTokens(%+v) accepted", bad)
		}
	}
	// Refused: the tokens in force stay.
	if s, _ := o.call(readToken, "GET", "/api/v1/groups", ""); s != 200 {
		t.Fatalf("after refused SetTokens, the read token: %d", s)
	}
	// A reload with new tokens: the old ones stop working at once.
	if err := o.s.SetTokens("new-admin-token-0123456789ab", []web.Token{{Name: "grafana", Scope: web.ScopeRead, Secret: "new-read-token-0123456789abc"}}); err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{dashToken: 401, readToken: 401, dataToken: 401, "new-admin-token-0123456789ab": 200, "new-read-token-0123456789abc": 200} {
		if s, _ := o.call(tok, "GET", "/api/v1/groups", ""); s != want {
			t.Errorf("token %s after SetTokens: %d, want %d", tok, s, want)
		}
	}
}

func TestLimiterEndpoint(t *testing.T) {
	o := newOps(t)
	status, body := o.call(readToken, "GET", "/api/v1/limiter", "")
	var v struct {
		Enabled bool `json:"enabled"`
		Config  struct {
			File     string    `json:"file"`
			Embedded bool      `json:"embedded"`
			LoadedAt time.Time `json:"loaded_at"`
		} `json:"config"`
		Version       api.Build `json:"version"`
		UptimeSeconds int64     `json:"uptime_seconds"`
		Token         struct{ Name, Scope string }
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || status != 200 {
		t.Fatalf("%d %s: %v", status, body, err)
	}
	if !v.Enabled || v.Config.File != "/etc/limiterd/config.toml" || v.Config.Embedded || !v.Config.LoadedAt.Equal(o.clock.Now().Add(-time.Hour)) ||
		v.Version.Version != "v1.2.3" || v.Version.Revision == "" || v.UptimeSeconds != 7200 || v.Token.Name != "grafana" || v.Token.Scope != "read" {
		t.Errorf("GET /api/v1/limiter: %s", body)
	}
	o.call(dashToken, "POST", "/api/v1/limiter/off", "")
	if _, body := o.call(dashToken, "GET", "/api/v1/limiter", ""); !strings.Contains(body, `"enabled":false`) || !strings.Contains(body, `"name":"admin","scope":"admin"`) {
		t.Errorf("after off: %s", body)
	}
}

func TestBackupEndpoint(t *testing.T) {
	o := newOps(t)
	r := httptest.NewRequest("GET", "/api/v1/backup", nil)
	r.Header.Set("Authorization", "Bearer "+opsToken)
	w := httptest.NewRecorder()
	o.h.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != backupBody || w.Header().Get("Content-Length") != strconv.Itoa(len(backupBody)) ||
		w.Header().Get("Content-Type") != "application/octet-stream" || w.Header().Get("X-Limiterd-Snapshot") != "written" ||
		!strings.HasPrefix(w.Header().Get("Content-Disposition"), `attachment; filename="limiterd-2023`) {
		t.Errorf("backup: %d %v %q", w.Code, w.Header(), w.Body)
	}
	if o.snapshots != 1 {
		t.Errorf("%d snapshots before the backup, want 1", o.snapshots)
	}
	if s, _ := o.call(opsToken, "GET", "/api/v1/backup?snapshot=false", ""); s != 200 || o.snapshots != 1 {
		t.Errorf("snapshot=false: %d, %d snapshots", s, o.snapshots)
	}
	if s, body := o.call(opsToken, "GET", "/api/v1/backup?snapshot=maybe", ""); s != 422 || !strings.Contains(body, `"field":"snapshot"`) {
		t.Errorf("snapshot=maybe: %d %s", s, body)
	}
	if s, _ := o.call(readToken, "GET", "/api/v1/backup", ""); s != 403 {
		t.Errorf("backup with a read token: %d, want 403", s)
	}
}

func TestReadyzFailsWhileTheDatabaseCannotBeWritten(t *testing.T) {
	o := newOps(t)
	status, _ := o.call("", "GET", "/readyz", "")
	o.ready = errors.New("database /var/lib/limiterd/limiterd.db cannot be written: write: no space left on device")
	status2, body := o.call("", "GET", "/readyz", "")
	// The upstream is not configured here, so the first answer is 503 for
	// it; the database check is what changes.
	if status2 != 503 || !strings.Contains(body, "no space left on device") {
		t.Errorf("readyz with the database failing: %d %s (before: %d)", status2, body, status)
	}
}

func TestExemptionExpiry(t *testing.T) {
	o := newOps(t)
	start := o.clock.Now()
	status, v := o.api("POST", "/api/v1/exemptions", `{"kind": "deny_peer", "value": "203.0.113.66", "note": "scraper, ticket 42", "expires": "24h"}`)
	if status != 201 || v["expires"] != start.Add(24*time.Hour).UTC().Format(time.RFC3339) {
		t.Fatalf("deny for 24h: %d %v", status, v)
	}
	at := start.Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if status, v := o.api("POST", "/api/v1/exemptions", `{"kind": "exempt_peer", "value": "198.51.100.0/24", "expires": "`+at+`"}`); status != 201 || v["expires"] != at {
		t.Fatalf("exempt until %s: %d %v", at, status, v)
	}
	for body, field := range map[string]string{
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "tomorrow"}`:             "expires",
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "-5m"}`:                  "expires",
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "2001-01-01T00:00:00Z"}`: "expires",
	} {
		if status, v := o.api("POST", "/api/v1/exemptions", body); status != 422 || v["field"] != field {
			t.Errorf("%s: %d %v", body, status, v)
		}
	}
	if d := o.lim.Decide(o.clock.Now(), o.lim.PeerOf("203.0.113.66:1", nil), 1); d.Allowed {
		t.Fatal("the denied peer is let through")
	}

	// Nothing expires early; then each at its time, audited with its note.
	if n, err := o.live.Expire(context.Background(), start.Add(2*time.Hour-time.Second)); n != 0 || err != nil {
		t.Fatalf("expired early: %d %v", n, err)
	}
	if n, err := o.live.Expire(context.Background(), start.Add(2*time.Hour)); n != 1 || err != nil {
		t.Fatalf("at 2h: %d %v", n, err)
	}
	if n, err := o.live.Expire(context.Background(), start.Add(25*time.Hour)); n != 1 || err != nil {
		t.Fatalf("at 25h: %d %v", n, err)
	}
	if _, v := o.api("GET", "/api/v1/exemptions", ""); len(v["exemptions"].([]any)) != 0 {
		t.Errorf("left after expiry: %v", v["exemptions"])
	}
	o.clock.Add(25 * time.Hour)
	if d := o.lim.Decide(o.clock.Now(), o.lim.PeerOf("203.0.113.66:1", nil), 1); !d.Allowed {
		t.Error("the deny entry expired but still applies")
	}

	// The audit keeps the note, and filters.
	_, v = o.api("GET", "/api/v1/audit?action=exemption&actor=limiterd", "")
	entries := v["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("expiries in the audit: %v", entries)
	}
	last := entries[0].(map[string]any)
	if last["action"] != "exemption.expire" || last["old"] != "203.0.113.66" || last["note"] != "scraper, ticket 42" || last["target"] != "deny_peer" {
		t.Errorf("expiry entry: %v", last)
	}
	_, v = o.api("GET", "/api/v1/audit?action=exemption.add", "")
	if e := v["entries"].([]any); len(e) != 2 || e[1].(map[string]any)["note"] != "scraper, ticket 42" || e[1].(map[string]any)["expires"] == nil {
		t.Errorf("additions: %v", e)
	}
	_, v = o.api("GET", "/api/v1/audit?since=1h", "")
	if e := v["entries"].([]any); len(e) != 0 {
		t.Errorf("since=1h (the expiries were audited on the clock of their call): %v", e)
	}
	_, v = o.api("GET", "/api/v1/audit?since="+start.Add(-time.Minute).UTC().Format(time.RFC3339)+"&limit=3", "")
	if e := v["entries"].([]any); len(e) != 3 || v["next"] == nil {
		t.Errorf("since the start, 3 a page: %v", v)
	}
	for q, field := range map[string]string{"since=yesterday": "since", "limit=0": "limit", "before=x": "before"} {
		if status, v := o.api("GET", "/api/v1/audit?"+q, ""); status != 422 || v["field"] != field {
			t.Errorf("audit?%s: %d %v", q, status, v)
		}
	}
}

// TestSessionsEndWithTheirToken: a dashboard login lasts while its token
// does: rotating the token (SIGHUP) logs its sessions out, and a token's
// new scope applies to its sessions at once.
func TestSessionsEndWithTheirToken(t *testing.T) {
	o := newOps(t)
	login := func(token string) string {
		resp := o.do("POST", "/login", url.Values{"token": {token}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d", resp.StatusCode)
		}
		for _, c := range resp.Cookies() {
			return c.Name + "=" + c.Value
		}
		t.Fatal("no cookie")
		return ""
	}
	grafana, ops, admin := login(readToken), login(opsToken), login(dashToken)
	page := func(cookie string) int { return o.do("GET", "/groups", nil, "Cookie", cookie).StatusCode }
	for _, c := range []string{grafana, ops, admin} {
		if s := page(c); s != 200 {
			t.Fatalf("a fresh session: %d", s)
		}
	}
	// grafana's secret rotated, ops becomes read-only, the admin token stays.
	if err := o.s.SetTokens(dashToken, []web.Token{
		{Name: "grafana", Scope: web.ScopeRead, Secret: "grafana-rotated-0123456789abcdef"},
		{Name: "ops", Scope: web.ScopeRead, Secret: opsToken},
	}); err != nil {
		t.Fatal(err)
	}
	if s := page(grafana); s != http.StatusSeeOther {
		t.Errorf("a session of a rotated token: %d, want a redirect to /login", s)
	}
	if s := page(admin); s != 200 {
		t.Errorf("a session of the unchanged admin token: %d", s)
	}
	body, _ := io.ReadAll(o.do("GET", "/", nil, "Cookie", ops).Body)
	if !strings.Contains(string(body), `id="read-only"`) {
		t.Error("a session of a token now of scope read is not read-only")
	}
	if resp := o.do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrfOf(t, string(body))}}, "Cookie", ops); resp.StatusCode != 403 {
		t.Errorf("a session of a token now of scope read switched the limiter: %d", resp.StatusCode)
	}
}

// TestLegacySessionKept: a session stored before tokens had fingerprints
// (an upgrade) was opened with the main admin token: it stays logged in
// while that token stays.
func TestLegacySessionKept(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, _ := limiter.New(memory.New(), c.Now(), cfg)
	st := web.OpenTestStore(t)
	lv, _ := live.New(context.Background(), lim, st, cfg, c.Now)
	id := "legacy-session-id-0123456789abcdef"
	key := sha256.Sum256([]byte(id))
	v := fmt.Sprintf(`{"csrf":"c","actor":"session:abcd1234","expires_ms":%d}`, c.Now().Add(time.Hour).UnixMilli())
	if err := st.PutSession(context.Background(), key[:], []byte(v)); err != nil {
		t.Fatal(err)
	}
	s := web.MustNewServer(t, lim, lv, web.Options{Token: dashToken, Now: c.Now, Sessions: st})
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
