// Package web is limiterd's admin listener: the one list of its routes
// (AdminHandler), who may call them (bearer tokens and their scopes, the
// dashboard's sessions and CSRF tokens, the login form's throttle), the
// connection cap, the bounds of request bodies, the one mapping of errors
// to statuses, the health checks, the metrics and the runtime's profiles.
// It keeps the records the dashboard reads (Run) and mounts the JSON API
// (package api) and the dashboard (package ui), which know nothing of it
// but what it gives them.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/internal/web/ui"
	"github.com/limiterd/limiterd/limiter"
)

// DataPlane serves the data-plane calls of the admin listener: the
// sidecar check, its release and nginx's auth_request (package proxy's
// Handler). Those decide as the public listener does; web only mounts them
// behind the token.
type DataPlane interface {
	HandleCheck(w http.ResponseWriter, r *http.Request)
	HandleRelease(w http.ResponseWriter, r *http.Request)
	HandleAuthRequest(w http.ResponseWriter, r *http.Request)
}

// Options configure a Server.
type Options struct {
	// Upstream is the node limiterd proxies to, checked by /readyz.
	Upstream *url.URL
	// DataPlane serves /api/v1/check, /api/v1/release and
	// /api/v1/check/auth; nil leaves those routes out.
	DataPlane DataPlane
	// Token is the main admin bearer token ([admin] token); Tokens are
	// the named ones ([[admin.tokens]]), each with its scope. At least one
	// token is needed; SetTokens replaces them on SIGHUP.
	Token  string
	Tokens []Token
	// MaxConns caps the admin listener's open connections (Listener;
	// admin.max_conns); 0: no cap.
	MaxConns int
	// HeavyConcurrency bounds the expensive calls run at once (audit
	// queries, peer searches, the what-if, the pages that grow with the
	// tables): 0 means DefaultHeavyConcurrency. A call waits up to HeavyWait
	// for a place (503 beyond) and runs at most HeavyTimeout; 0 means
	// DefaultHeavyWait, DefaultHeavyTimeout (heavy.go).
	HeavyConcurrency        int
	HeavyWait, HeavyTimeout time.Duration
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Ready reports readiness beyond the upstream check (the database);
	// nil means ready.
	Ready func(ctx context.Context) error
	// Backend, when set, reports whether the limiter's backend can decide
	// (cluster mode: Redis in use, or decisions that do not refuse
	// everyone meanwhile), and its state in words for /readyz.
	Backend func() (ready bool, state string)
	// Snapshot writes a snapshot now (POST /api/v1/snapshot); nil when the
	// daemon has no persistence.
	Snapshot func(ctx context.Context) error
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx ends, on the clock of Now: the delay of a
	// wrong token's answer (decision 192); nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Throttle is the outbound throttle served at /api/v1/throttle; nil
	// leaves those routes out. The global switch turns it off and on too.
	Throttle *throttle.Throttle
	// Sessions keeps the dashboard's logins across restarts; nil keeps
	// them in memory only.
	Sessions SessionStore
	// Build is the binary's version, shown by GET /api/v1/limiter and
	// limiterd_build_info.
	Build api.Build
	// Daemon reports the config in use and its reloads (GET
	// /api/v1/limiter, the reload metrics); nil reports nothing.
	Daemon func() api.DaemonInfo
	// Backup writes a consistent copy of the database (GET
	// /api/v1/backup); nil leaves the route answering 501.
	Backup api.Backup
	// Offenses keeps the record of offenders (who the limiter rejected in
	// the last 24 hours); nil keeps none.
	Offenses OffenseStore
	// Recorder is the record of the limiter's decisions (its observer,
	// limiter.WithObserver) the dashboard's top talkers, offenders and
	// what-if are built from; nil records nothing.
	Recorder *insight.Recorder
	// KeyHelp is the one-line help of each group key (config.toml's), shown
	// on the groups' forms.
	KeyHelp map[string]string
	// Conditions reports states every dashboard page shows as a banner
	// (cluster mode: its store unreachable); nil reports none.
	Conditions func() []ui.Condition
	// Cluster reports cluster mode's state for the overview's line on
	// where the limits live; nil when they are this instance's own.
	Cluster ui.ClusterStatus
	// Exchanges are the public listener's exchange histograms (the
	// proxy's), sampled once a second for the node's health; nil shows
	// no traffic.
	Exchanges *insight.Exchanges
	// UpstreamError returns the newest upstream error (the RejectLog's);
	// nil knows none.
	UpstreamError func() (insight.UpstreamFailure, bool)
	// Store reports the database's health: its snapshots and size; nil
	// reports none.
	Store func() StoreHealth
	// Fleet is the board the instances of a cluster share (cluster mode:
	// fleet.RedisBoard on its Redis), nil outside cluster mode; Instance
	// names this instance there (and on the pages).
	Fleet    fleet.Board
	Instance string
	// NowWindow is what the dashboard's "now" covers (admin.now_window);
	// 0 is DefaultNowWindow. SetNowWindow changes it.
	NowWindow time.Duration
	// TokenHint says on the login page where the admin token is.
	TokenHint string
}

// Server serves the admin listener: the JSON API, the dashboard, the
// metrics and the health endpoints. It is safe for concurrent use; Run
// owns its background work (sampling the history and the peer history,
// refreshing the peer index, draining the record of decisions and saving
// its offenders); Close ends what NewServer started.
type Server struct {
	lim  *limiter.Limiter
	live *live.Live
	opts Options
	log  *slog.Logger
	now  func() time.Time
	// sleep delays the answer to a wrong token (Options.Sleep).
	sleep func(ctx context.Context, d time.Duration) error
	// api serves the JSON API.
	api *api.API
	// ui serves the dashboard.
	ui *ui.Dashboard
	// sess are the dashboard's logins, loaded by NewServer.
	sess *sessions
	// fails counts failed logins per client address.
	fails *authFails
	// history is the per-second history of the counters, fed by Run.
	history *insight.History
	// peers answers the peer queries on large tables, rebuilt by Run.
	peers *insight.PeerIndex
	// peerHist is the history of the busiest and the viewed peers, fed by
	// Run.
	peerHist *insight.PeerHistory
	// activity follows the limiter's record of decisions for the
	// dashboard: top talkers, the request log of the what-if, the offenses
	// to save (drained by Run).
	activity *insight.Activity
	// node is the node's last minute, sampled by Run.
	node insight.NodeWindow
	// nowWindow is what "now" covers (SetNowWindow), in ns.
	nowWindow atomic.Int64
	// fp caches the configuration's fingerprint.
	fp fingerprints
	// publisher writes this instance's summary to the fleet's board (Run),
	// fleetReader reads the others'; both nil outside cluster mode.
	publisher   *fleet.Publisher
	fleetReader *fleet.Reader

	// conns caps the admin listener's connections (Listener).
	conns *connCap
	// heavy bounds the expensive calls (boundHeavy).
	heavy *heavyGate
	// profiling serves /debug/pprof/ (SetProfiling; admin.pprof).
	profiling atomic.Bool

	upMu      sync.Mutex
	upChecked time.Time
	upErr     error

	// tokens are the bearer tokens in force (SetTokens).
	tokens atomic.Pointer[tokenSet]
}

// NewServer returns a Server reading lim and editing through lv. It loads
// the dashboard's sessions from opts.Sessions; an error says they could
// not be read.
func NewServer(lim *limiter.Limiter, lv *live.Live, opts Options) (*Server, error) {
	s := &Server{lim: lim, live: lv, opts: opts, log: opts.Logger, now: opts.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.sleep = opts.Sleep
	if s.sleep == nil {
		s.sleep = sleep
	}
	if err := s.SetTokens(opts.Token, opts.Tokens); err != nil {
		return nil, err
	}
	s.fails = newAuthFails(s.now)
	s.conns = newConnCap(opts.MaxConns)
	s.heavy = newHeavyGate(opts.HeavyConcurrency, opts.HeavyWait, opts.HeavyTimeout)
	s.peers = insight.NewPeerIndex(lim, s.now)
	s.history = insight.NewHistory()
	s.peerHist = insight.NewPeerHistory()
	s.activity = insight.NewActivity(lim, s.recorder(), s.now)
	s.SetNowWindow(opts.NowWindow)
	if opts.Fleet != nil {
		s.publisher = fleet.NewPublisher(opts.Fleet, opts.Instance, func(now time.Time) fleet.Summary { return s.summary(now, true) }, s.log, s.now)
		s.fleetReader = fleet.NewReader(opts.Fleet, s.log, s.now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if s.sess, err = newSessions(ctx, s.now, opts.Sessions, s.log, fingerprint(opts.Token)); err != nil {
		return nil, fmt.Errorf("dashboard sessions: %w", err)
	}
	s.ui = ui.New(lim, lv, ui.Options{
		History: s.history, Peers: s.peers, PeerHistory: s.peerHist, Activity: s.activity,
		Offenses: opts.Offenses, Throttle: opts.Throttle, KeyHelp: opts.KeyHelp, Conditions: opts.Conditions,
		Cluster: opts.Cluster, Logger: s.log, Now: s.now,
		Viewer: uiViewer, LoggedIn: s.sessionViewer, Status: statusOf,
		Fleet: s.FleetView, NowWindow: s.NowWindow, TokenHint: opts.TokenHint,
	})
	s.api = api.New(lim, lv, api.Options{
		Peers: s.peers, Snapshot: opts.Snapshot, Backup: opts.Backup, Build: opts.Build, Daemon: opts.Daemon,
		Throttle: opts.Throttle, Logger: s.log, Now: s.now,
		Actor: requestActor, Token: s.tokenOfRequest, Fail: s.fail,
		Fleet: s.FleetView,
	})
	// The global switch turns the throttle off and on too
	// (ar_rate_limiter's off/on: new outbound calls pass at once; callers
	// already waiting keep waiting).
	if opts.Throttle != nil && lv != nil {
		lv.Follow(opts.Throttle)
	}
	return s, nil
}

// Close ends what NewServer started: outbound callers still waiting are
// told limiterd is going away (the client then goes on, as when limiterd
// is not running). Call it once the listener stops taking requests.
func (s *Server) Close() { s.api.Close() }

// Run samples the counters into the history and the node's exchanges
// once a second, checks that the node accepts connections every 2 s,
// samples the chosen peers' counters into the peer history every
// insight.PeerHistoryStep, drains the limiter's record of decisions for
// the dashboard and saves its offenders every minute, and in cluster mode
// publishes this instance's summary to the fleet every fleet.Every, until
// ctx ends.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); s.peers.Run(ctx) }()
	go func() { defer wg.Done(); s.runPeerHistory(ctx) }()
	go func() { defer wg.Done(); s.runActivity(ctx) }()
	go func() { defer wg.Done(); s.runHealth(ctx) }()
	go func() { defer wg.Done(); s.runFleet(ctx) }()
	defer wg.Wait()
	s.sample() // the counters' baseline
	ticker.Every(ctx, time.Second, s.sample)
	return nil
}

// sample takes the per-second samples: the groups' counters into the
// history, the node's exchanges into its minute.
func (s *Server) sample() {
	now := s.now()
	s.history.Sample(now, s.lim.Stats())
	if e := s.opts.Exchanges; e != nil {
		s.node.Sample(now, e)
	}
}

// History returns the server's per-second history (fed by Run).
func (s *Server) History() *insight.History { return s.history }

// AdminHandler serves the admin listener: health, metrics, the dashboard,
// the JSON API, the data plane's calls and the runtime's profiles.
func (s *Server) AdminHandler() http.Handler {
	r := chi.NewRouter()
	// A handler's panic is logged at ERROR; a body over a route's bound
	// is 413, unread (boundBody).
	r.Use(s.recoverPanic, s.boundBody)
	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	if s.opts.Gatherer != nil {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	}
	// The dashboard: its assets and the login form for anyone, its pages
	// for a session or a token; every form bounded, every answer with the
	// dashboard's security headers.
	r.Group(func(r chi.Router) {
		r.Use(ui.SecurityHeaders, s.limitForm)
		ui.StaticRoutes(r)
		r.Get("/login", s.handleLoginForm)
		r.Post("/login", s.handleLogin)
		r.Group(func(r chi.Router) {
			r.Use(s.requireViewer, s.boundHeavy)
			r.Post("/logout", s.handleLogout)
			s.ui.Routes(r)
		})
	})
	// The JSON API, the data plane's calls and the runtime's profiles, each
	// for the tokens whose scope allows it.
	r.Group(func(r chi.Router) {
		r.Use(s.requireToken, s.boundHeavy)
		s.api.Routes(r)
		if dp := s.opts.DataPlane; dp != nil {
			r.Post("/api/v1/check", dp.HandleCheck)
			r.Get("/api/v1/check/auth", dp.HandleAuthRequest)
			r.Post("/api/v1/release", dp.HandleRelease)
		}
		r.Get(pprofPrefix+"*", s.handlePprof)
	})
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	return r
}

// HTTPServer returns the admin listener's http.Server, with timeouts a
// slow client cannot abuse: headers within 10 s, a body within 60 s, a
// response written within 120 s, idle connections closed after 120 s,
// headers at most 64 KiB.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.AdminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState:         s.conns.State,
	}
}

// freshGrace is how long a stop lets a connection that has not begun a
// request begin one (a client that connected just before the stop).
const freshGrace = 250 * time.Millisecond

// Shutdown stops hs, the server of HTTPServer serving Listener, as
// http.Server.Shutdown does (no new connection, idle ones closed, a wait
// for the requests in flight until ctx ends), except that a connection
// that has not begun a request is closed once it has had freshGrace to
// begin one, where net/http waits 5 s for it: a browser's preconnected
// socket to the dashboard held a stop for the whole of its timeout.
func (s *Server) Shutdown(ctx context.Context, hs *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- hs.Shutdown(ctx) }()
	deadline := time.Now().Add(freshGrace)
	tick := time.NewTicker(freshGrace / 5)
	defer tick.Stop()
	for {
		// Again until the grace is over: a connection accepted just before
		// the stop may set its own read deadline after this one.
		s.conns.hurryFresh(deadline)
		select {
		case err := <-done:
			return err
		case now := <-tick.C:
			if now.After(deadline) {
				s.conns.hurryFresh(deadline)
				return <-done
			}
		}
	}
}

// Listener returns ln under the cap of Options.MaxConns, for
// HTTPServer's Serve: a connection over it displaces the keep-alive
// connection idle the longest, or is answered 503 and closed.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return s.conns.Listener(ln)
}

// actorToken is the audit actor of the main admin token.
const actorToken = "api-token"

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz checks the database (Options.Ready), the limiter's backend
// (Options.Backend) and that the upstream accepts TCP connections (cached
// for 2 s).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{}
	ready := true
	if s.opts.Ready != nil {
		if err := s.opts.Ready(r.Context()); err != nil {
			checks["database"] = err.Error()
			ready = false
		} else {
			checks["database"] = "ok"
		}
	}
	if s.opts.Backend != nil {
		ok, state := s.opts.Backend()
		checks["backend"] = state
		ready = ready && ok
	}
	if err := s.upstreamReachable(r.Context()); err != nil {
		checks["upstream"] = err.Error()
		ready = false
	} else {
		checks["upstream"] = "ok"
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": ready, "checks": checks})
}

func (s *Server) upstreamReachable(ctx context.Context) error {
	if s.opts.Upstream == nil {
		return errors.New("no upstream configured")
	}
	s.upMu.Lock()
	defer s.upMu.Unlock()
	if time.Since(s.upChecked) < 2*time.Second {
		return s.upErr
	}
	host := s.opts.Upstream.Host
	if s.opts.Upstream.Port() == "" {
		port := "80"
		if s.opts.Upstream.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(s.opts.Upstream.Hostname(), port)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err == nil {
		c.Close()
	}
	s.upChecked, s.upErr = time.Now(), err
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) { jsonbody.Write(w, status, v) }

func writeError(w http.ResponseWriter, status int, msg, field string) {
	jsonbody.WriteError(w, status, msg, field)
}

// fail answers err as JSON with the status statusOf gives it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, field := statusOf(err)
	msg := err.Error()
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("admin API", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error: " + msg
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
	}
	writeError(w, status, msg, field)
}
