// Package webtest runs the admin listener for the tests of web, api and
// ui, as httptest runs an HTTP server: a web.Server on the daemon's real
// store and a fake clock, called as a browser, a script or an operator's
// token would call it, and its pages read as parsed HTML. Only tests
// import it.
package webtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The tokens of the test servers: the main admin token, and the named
// tokens of Ops, one of each scope.
const (
	Token      = "s3cret-token"
	ReadToken  = "read-token-0123456789abcdef"
	DataToken  = "data-token-0123456789abcdef"
	OpsToken   = "ops-token-0123456789abcdefgh"
	BackupBody = "a bbolt file, as far as this test knows"
)

// OpenStore opens a bbolt store in tb.TempDir() for the live settings
// and the sessions of a test Server, and closes it at cleanup: the tests
// run on the daemon's real store, not an imitation of it.
func OpenStore(tb testing.TB) *store.DB {
	tb.Helper()
	db, err := store.Open(filepath.Join(tb.TempDir(), "limiterd.db"), store.Options{})
	if err != nil {
		tb.Fatalf("open the test store: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close the test store: %v", err)
		}
	})
	return db
}

// MustNewServer is web.NewServer for a test: it fails tb on an error.
func MustNewServer(tb testing.TB, lim *limiter.Limiter, lv *live.Live, opts web.Options) *web.Server {
	tb.Helper()
	s, err := web.NewServer(lim, lv, opts)
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	return s
}

// ArweaveThrottle is the shipped outbound throttle table, its patterns
// compiled by the core (throttle.Config.Compile).
func ArweaveThrottle() throttle.Config {
	c := throttle.ArweaveConfig()
	c.Compile = limiter.ThrottleMatcher
	return c
}

// Dash is the admin handler of a test Server with its limiter, live
// settings and clock.
type Dash struct {
	T     *testing.T
	H     http.Handler
	Lim   *limiter.Limiter
	Live  *live.Live
	Clock *limitertest.Clock
}

// NewDash returns the admin listener of a Server with the main admin
// token, the data plane and the record of offenders, on the Arweave
// groups (general's leaky bucket 3 tokens, 3 back a tick).
func NewDash(t *testing.T) *Dash {
	t.Helper()
	d, _ := NewDashServer(t, nil)
	return d
}

// NewDashServer is NewDash with edit applied to the file configuration,
// keeping the Server (whose peer history the tests sample by hand on the
// fake clock: Run is not running). The clock starts on a 10 s boundary.
func NewDashServer(t *testing.T, edit func(*limiter.Config)) (*Dash, *web.Server) {
	t.Helper()
	return NewDashWith(t, edit, nil)
}

// NewDashWith is NewDashServer with opt applied to the Server's options.
func NewDashWith(t *testing.T, edit func(*limiter.Config), opt func(*web.Options)) (*Dash, *web.Server) {
	t.Helper()
	c := limitertest.NewClock(limitertest.T0)
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
	db := OpenStore(t)
	live, err := live.New(context.Background(), lim, db, cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	opts := web.Options{
		Token: Token, Now: c.Now, DataPlane: proxy.New(lim, proxy.Options{Now: c.Now}),
		Offenses: db, KeyHelp: map[string]string{"leaky_limit": "tokens a peer may hold consumed"}, Recorder: rec,
	}
	if opt != nil {
		opt(&opts)
	}
	s := MustNewServer(t, lim, live, opts)
	return &Dash{T: t, H: s.AdminHandler(), Lim: lim, Live: live, Clock: c}, s
}

// Restart returns the dashboard of a new Server on the same limiter, live
// state and clock, with sessions kept in store: what a restart of the
// daemon gives (d itself must have been built by Restart too).
func (d *Dash) Restart(store web.SessionStore) *Dash {
	s := MustNewServer(d.T, d.Lim, d.Live, web.Options{Token: Token, Now: d.Clock.Now, Sessions: store})
	return &Dash{T: d.T, H: s.AdminHandler(), Lim: d.Lim, Live: d.Live, Clock: d.Clock}
}

// Do sends one request from 192.0.2.1 with the headers hdr (name, value,
// …); form is POSTed url-encoded when not nil.
func (d *Dash) Do(method, path string, form url.Values, hdr ...string) *http.Response {
	d.T.Helper()
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
	d.H.ServeHTTP(w, r)
	return w.Result()
}

// Login logs in through the form and returns the session cookie header
// and the session's CSRF token (read from the overview's forms).
func (d *Dash) Login() (cookie, csrf string) {
	d.T.Helper()
	resp := d.Do("POST", "/login", url.Values{"token": {Token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		d.T.Fatalf("login: %d %v", resp.StatusCode, resp.Header)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "limiterd_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		d.T.Fatal("no session cookie")
	}
	doc := d.Page("/", cookie)
	in := Find(doc, func(n *html.Node) bool { return n.Data == "input" && Attr(n, "name") == "csrf" })
	if len(in) == 0 {
		d.T.Fatal("no CSRF field on the overview")
	}
	return cookie, Attr(in[0], "value")
}

// Page GETs path with the cookie, wants 200 and returns the parsed page.
func (d *Dash) Page(path, cookie string) *html.Node {
	d.T.Helper()
	resp := d.Do("GET", path, nil, "Cookie", cookie)
	if resp.StatusCode != http.StatusOK {
		d.T.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return Parse(d.T, resp)
}

// API sends one admin API request with the token and a JSON body, and
// returns the status and the decoded JSON answer.
func (d *Dash) API(method, path, body string) (int, map[string]any) {
	d.T.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+Token)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	d.H.ServeHTTP(w, r)
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		d.T.Fatalf("%s %s: %d, not JSON: %q", method, path, w.Code, w.Body)
	}
	return w.Code, v
}

// Send makes n requests of ip in group general.
func (d *Dash) Send(ip string, n int) {
	d.T.Helper()
	g, _ := d.Lim.GroupID("general")
	a := MustAddr(d.T, ip)
	for range n {
		dec := d.Lim.Decide(d.Clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		dec.Release()
	}
}

// Ops is a Server with every route mounted (data plane, throttle, backup,
// snapshot) and four tokens (Token, and ReadToken, DataToken and OpsToken
// named grafana, nginx and ops), on a fake clock. Snapshots counts the
// snapshots written; Ready is what the database's readiness check says.
type Ops struct {
	*Dash
	S         *web.Server
	Snapshots int
	Ready     error
}

// NewOps returns an Ops on the Arweave groups, its build v1.2.3, its config
// loaded an hour ago and the daemon started two hours ago.
func NewOps(t *testing.T) *Ops {
	t.Helper()
	c := limitertest.NewClock(limitertest.T0)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), c.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := live.New(context.Background(), lim, OpenStore(t), cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(c.Now(), throttle.Config{Period: 30 * time.Second, RetryInterval: time.Second, DefaultType: "default", DefaultRPM: 900})
	if err != nil {
		t.Fatal(err)
	}
	o := &Ops{}
	o.S = MustNewServer(t, lim, lv, web.Options{
		Token:    Token,
		Gatherer: prometheus.NewRegistry(),
		Tokens: []web.Token{
			{Name: "grafana", Scope: web.ScopeRead, Secret: ReadToken},
			{Name: "nginx", Scope: web.ScopeData, Secret: DataToken},
			{Name: "ops", Scope: web.ScopeAdmin, Secret: OpsToken},
		},
		Now:       c.Now,
		Sleep:     c.Sleep,
		DataPlane: proxy.New(lim, proxy.Options{Now: c.Now}),
		Throttle:  th,
		Snapshot:  func(context.Context) error { o.Snapshots++; return nil },
		Ready:     func(context.Context) error { return o.Ready },
		Build:     api.Build{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
		Daemon: func() api.DaemonInfo {
			return api.DaemonInfo{ConfigFile: "/etc/limiterd/config.toml", ConfigLoadedAt: c.Now().Add(-time.Hour), StartedAt: c.Now().Add(-2 * time.Hour)}
		},
		Backup: func(ctx context.Context, open func(int64) (io.Writer, error)) (int64, error) {
			w, err := open(int64(len(BackupBody)))
			if err != nil {
				return 0, err
			}
			n, err := io.WriteString(w, BackupBody)
			return int64(n), err
		},
	})
	t.Cleanup(o.S.Close)
	o.Dash = &Dash{T: t, H: o.S.AdminHandler(), Lim: lim, Live: lv, Clock: c}
	return o
}

// Call sends one request from 192.0.2.1 with a bearer token ("" for none)
// and returns the status and body.
func (o *Ops) Call(token, method, path, body string) (int, string) {
	o.T.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.1:4000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	o.H.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// MustAddr parses the IP address s.
func MustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
