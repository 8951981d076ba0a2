// Command limiterd is a rate-limiting daemon for the HTTP API of an
// Arweave-style node: it proxies every request through the Arweave hybrid
// limiter, serves an admin API and Prometheus metrics, and can run a
// self-contained demo.
//
// Usage:
//
//	limiterd [serve] [-config PATH] [-data-dir DIR]
//	limiterd check-config [-config PATH]
//	limiterd backup -o FILE [-admin URL]
//	limiterd demo [-duration D]
//	limiterd import-arweave-config FILE [-o OUT [-force]] [-merge CONFIG]
//	limiterd version
//	limiterd help
//
// `limiterd help` lists every command and its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/limiterd/limiterd/internal/clock"
	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/livereplica"
	"github.com/limiterd/limiterd/internal/metrics"
	"github.com/limiterd/limiterd/internal/persist"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/limiter"
)

// Exit codes (docs/operations.md, "Exit codes").
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the drain; from then on the signals' default
	// action is back, so that a second one stops the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	m := NewMain()
	code := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Main is the program: its streams, environment and, once serving, its
// listeners' addresses. Tests run it in-process.
type Main struct {
	Stdout, Stderr io.Writer
	Env            []string
	// Hangup delivers reload requests; main wires SIGHUP to it.
	Hangup chan os.Signal

	ready      chan struct{}
	publicAddr net.Addr
	adminAddr  net.Addr
	token      string
	log        *slog.Logger
	level      *slog.LevelVar     // the log's level ([log].level, reloadable)
	rejects    *insight.RejectLog // refusals and upstream errors ([log].rejections)
	notify     *notifier          // sd_notify
	state      daemonState        // config loads and reloads, for the API and metrics
	srv        *web.Server        // the admin listener, whose tokens a reload replaces

	mu   sync.Mutex
	src  config.Source
	adj  adjust
	cfg  *config.Config
	live *live.Live
	// cluster is the Redis backend in cluster mode, nil otherwise.
	cluster *cluster.Backend
	// fileGroups are the groups' settings as the config file gives them
	// (cluster mode compares them with the other instances').
	fileGroups atomic.Pointer[map[string]limiter.GroupSettings]
	lim        *limiter.Limiter
	throttle   *throttle.Throttle
	// dataPlane is the public listener, whose rate-limit fields
	// (server.ratelimit_headers) a reload changes.
	dataPlane *proxy.Handler
	// audit bounds the audit log (admin.audit_max_entries, changed by a
	// reload).
	audit *auditBound
}

// NewMain returns a Main on the process's streams and environment, with
// SIGHUP delivered to Hangup.
func NewMain() *Main {
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Environ(), Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	signal.Notify(m.Hangup, syscall.SIGHUP)
	return m
}

// Ready is closed once the listeners accept connections.
func (m *Main) Ready() <-chan struct{} { return m.ready }

// PublicURL and AdminURL are the listeners' base URLs, once Ready.
func (m *Main) PublicURL() string { return "http://" + m.publicAddr.String() }

// AdminURL is the admin listener's base URL, once Ready.
func (m *Main) AdminURL() string { return "http://" + m.adminAddr.String() }

// Token is the admin token in force, once Ready.
func (m *Main) Token() string { return m.token }

// Run runs the subcommand in args and returns the exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	cmd := "serve"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || isTopFlag(args[0])) {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return m.serve(ctx, args)
	case "demo":
		return m.demo(ctx, args)
	case "check-config":
		return m.checkConfig(args)
	case "version", "-version", "--version":
		if helpRequested(args) {
			return m.help([]string{"version"})
		}
		printVersion(m.Stdout, buildInfo())
		return exitOK
	case "snapshot":
		return m.snapshotCmd(ctx, args)
	case "import-arweave-config":
		return m.importArweaveConfig(args)
	case "backup":
		return m.backupCmd(ctx, args)
	case "help", "-h", "-help", "--help":
		return m.help(args)
	}
	fmt.Fprintf(m.Stderr, "limiterd: unknown command %q\n\n", cmd)
	printHelp(m.Stderr)
	return exitUsage
}

// commonFlags parses -config and -data-dir into a config.Source.
func (m *Main) commonFlags(name string, args []string, extra func(*flag.FlagSet)) (config.Source, error) {
	src, _, err := m.flagsAndArgs(name, args, 0, extra)
	return src, err
}

// flagsAndArgs is commonFlags for a command that takes up to n arguments,
// before, between or after the flags; it returns them.
func (m *Main) flagsAndArgs(name string, args []string, n int, extra func(*flag.FlagSet)) (config.Source, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	help := helpRequested(args)
	if help {
		fs.SetOutput(m.Stdout)
	}
	setUsage(fs, name)
	path := fs.String("config", "", "config file `PATH` (default: config.toml in the working directory, else the embedded default)")
	dataDir := fs.String("data-dir", "", "data directory `DIR` (overrides server.data_dir)")
	if extra != nil {
		extra(fs)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if help && errors.Is(err, flag.ErrHelp) {
				err = errHelp
			}
			return config.Source{}, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		if len(pos) == n {
			return config.Source{}, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	src := config.Source{Path: *path, Required: *path != "", Env: m.Env, DataDir: *dataDir}
	if src.Path == "" {
		src.Path = "config.toml"
	}
	return src, pos, nil
}

// printConfigErrors writes a configuration's problems, "config: <key>:
// <problem>" each; under a problem that a release's change explains (a
// config an earlier limiterd accepted), what changed and the fix.
func (m *Main) printConfigErrors(err error) {
	var leaves []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		leaves = append(leaves, err)
	}
	walk(err)
	for _, leaf := range leaves {
		for _, line := range strings.Split(leaf.Error(), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if !strings.HasPrefix(line, "config: ") {
				line = "config: " + line
			}
			fmt.Fprintln(m.Stderr, line)
		}
		var fe *limiter.FieldError
		if errors.As(leaf, &fe) {
			if u, ok := config.UpgradeOf(fe); ok {
				fmt.Fprintf(m.Stderr, "  changed in limiterd %s: %s\n  fix: %s\n", u.Release, u.Change, u.Fix)
			}
		}
	}
}

func (m *Main) checkConfig(args []string) int {
	src, err := m.commonFlags("check-config", args, nil)
	if err != nil {
		return flagExit(err)
	}
	cfg, _, err := config.Load(src)
	if err == nil {
		_, err = limiterConfig(cfg)
	}
	if err == nil {
		err = checkTokenFiles(cfg)
	}
	if err != nil {
		m.printConfigErrors(err)
		return exitUsage
	}
	b, err := cfg.Redacted().TOML()
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd:", err)
		return exitRuntime
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(m.Stderr, "config: warning:", w)
	}
	m.Stdout.Write(b)
	return exitOK
}

// limiterConfig is cfg.Limiter(), refusing also the settings the config
// accepts but this build cannot honour: check-config, serve and SIGHUP
// all go through it.
func limiterConfig(cfg *config.Config) (limiter.Config, error) {
	lc, err := cfg.Limiter()
	if err == nil && cfg.Cluster.Backend == "redis" {
		err = checkClusterLimits(lc)
	}
	return lc, err
}

// adjust lets demo change the loaded config before serving.
type adjust func(*config.Config)

func (m *Main) serve(ctx context.Context, args []string) int {
	src, err := m.commonFlags("serve", args, nil)
	if err != nil {
		return flagExit(err)
	}
	return m.start(ctx, src, nil)
}

// start loads the config from src, lets adj change it, and serves.
func (m *Main) start(ctx context.Context, src config.Source, adj adjust) int {
	m.level = new(slog.LevelVar)
	// Until the config says otherwise: text at info.
	m.log = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: m.level}))
	cfg, info, err := config.Load(src)
	var limCfg limiter.Config
	if err == nil {
		if adj != nil {
			adj(cfg)
		}
		limCfg, err = limiterConfig(cfg)
	}
	if err == nil {
		err = checkTokenFiles(cfg)
	}
	if err != nil {
		m.printConfigErrors(err)
		return exitUsage
	}
	m.log = newLogger(m.Stderr, cfg.Log, m.level)
	for _, w := range cfg.Warnings() {
		m.log.Warn("config: " + w)
	}
	m.notify = newNotifier(m.Env, m.log)
	m.state.loaded(absPath(info.UsedFile), time.Now())
	if info.EmbeddedOnly {
		m.log.Info("no config file: running on the embedded default config", "looked_for", src.Path)
	} else {
		m.log.Info("config loaded", "file", info.UsedFile)
	}
	m.src, m.adj, m.cfg = src, adj, cfg
	if err := m.run(ctx, cfg, limCfg); err != nil {
		m.log.Error("limiterd stopped", "err", err)
		return exitRuntime
	}
	return exitOK
}

func (m *Main) run(ctx context.Context, cfg *config.Config, limCfg limiter.Config) error {
	if err := os.MkdirAll(cfg.Server.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// The database first: one written by a newer limiterd, or damaged, is
	// refused before anything is written (a generated token, Redis).
	db, err := openDB(cfg.Server.DataDir, m.log)
	if err != nil {
		return err
	}
	defer db.Close()
	token, named, err := m.tokens(cfg)
	if err != nil {
		return err
	}
	m.token = token
	upstream, err := url.Parse(cfg.Server.Upstream)
	if err != nil {
		return fmt.Errorf("server.upstream: %w", err)
	}

	// Every interval is measured on the daemon's own clock, which a step
	// of the system's wall clock does not move (internal/clock).
	clk := clock.New(m.log)
	now := clk.Now
	cb, err := openCluster(cfg, limCfg, m.log)
	if err != nil {
		return err
	}
	if cb != nil {
		defer cb.Close()
		m.cluster = cb
		groups := maps.Clone(limCfg.Groups)
		m.fileGroups.Store(&groups)
	}
	// The limiter's one observer: the dashboard's record of decisions, the
	// log of refusals, which names groups by the limiter it observes, and
	// the share of each group's peers refused, for the alerts
	// (docs/operations.md, "LimiterdRejectingManyPeers").
	var lim *limiter.Limiter
	rec := insight.NewRecorder(insight.ArrivalsPerShard)
	shares := insight.NewPeerShare()
	m.rejects = insight.NewRejectLog(m.log, insight.RejectLogOptions{Mode: rejectMode(cfg.Log.Rejections),
		GroupName: func(g limiter.GroupID) string { return lim.GroupName(g) }})
	lim, err = limiter.New(backendOf(cb), now(), limCfg, limiter.WithObserver(insight.Observers{rec, m.rejects, shares}))
	if err != nil {
		return err
	}
	audit := newAuditBound(db, m.log)
	audit.set(cfg.Admin.AuditMaxEntries)
	th, err := throttle.New(now(), cfg.ThrottleConfig())
	if err != nil {
		return err
	}
	// The operators' edits first: the restore applies the ticks that fell
	// while the daemon was down, under the settings in force then (a live
	// leaky_tick_reduction, not the file's).
	lv, err := live.New(ctx, lim, live.LoggedStore(db, m.log), limCfg, now)
	if err != nil {
		return err
	}
	var replicator *cluster.Replicator
	if cb != nil {
		// The edits of other instances through Redis, with the records
		// kept in the database (decision 221): loaded before the first
		// edit is stamped. A database that answers nothing leaves the
		// fields of unknown age (the lowest stamp), as without records.
		var err error
		if replicator, err = livereplica.New(ctx, cb, lv, db, nil); err != nil {
			m.log.Error("cluster: the live records could not be read", "err", err)
		}
	}
	snaps := persist.New(lim, db, persist.Options{Throttle: th, Interval: cfg.Snapshot.Interval, Logger: m.log, Now: now, Wall: clk.Wall, Enabled: lv.Enabled})
	if err := snaps.Restore(ctx); err != nil {
		return err
	}
	dp := proxy.New(lim, dataPlaneOptions(cfg, upstream, m.log, now, m.rejects))
	m.mu.Lock()
	m.lim, m.live, m.throttle, m.dataPlane, m.audit = lim, lv, th, dp, audit
	m.mu.Unlock()
	reg := prometheus.NewRegistry()
	srv, err := web.NewServer(lim, lv, web.Options{
		Upstream:   upstream,
		DataPlane:  dp,
		Token:      token,
		Tokens:     named,
		Gatherer:   reg,
		Logger:     m.log,
		Now:        now,
		Ready:      db.Ready,
		Snapshot:   snaps.Save,
		Throttle:   th,
		Sessions:   db,
		Build:      buildInfo(),
		Daemon:     m.state.get,
		Backup:     backupOf(db),
		Offenses:   db,
		Recorder:   rec,
		KeyHelp:    config.GroupKeyHelp(),
		Cluster:    webCluster(cb),
		Conditions: clusterConditions(cb),
		Backend:    clusterReadiness(cb),
		MaxConns:   cfg.Admin.MaxConns,

		HeavyConcurrency: cfg.Admin.ExpensiveCalls,
		HeavyTimeout:     cfg.Admin.ExpensiveCallTimeout,

		// The dashboard's health and the fleet (docs/dashboard.md,
		// "Health" and "The fleet").
		Exchanges:     &dp.Exchanges,
		UpstreamError: m.rejects.LastUpstreamError,
		Store:         storeHealth(snaps, db),
		Fleet:         fleetBoard(cb),
		Instance:      instanceName(cb),
		NowWindow:     cfg.Admin.NowWindow,
		TokenHint:     tokenHint(cfg, m.state.get().ConfigFile),
	})
	if err != nil {
		return err
	}
	srv.SetProfiling(cfg.Admin.Pprof)
	m.mu.Lock()
	m.srv = srv
	m.mu.Unlock()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewCollector(lim, &dp.Lat, &dp.Counts, snaps.Collect, metrics.ThrottleMetrics(th), srv.DaemonMetrics, audit.collect, clockMetrics(clk)),
		metrics.NewExchangeCollector(&dp.Exchanges, lim.GroupName),
		metrics.NewPeerShareCollector(shares, lim.GroupName, now),
	)
	if cb != nil {
		reg.MustRegister(newClusterCollector(cb))
	}

	publicLn, adminLn, err := listeners(m.Env, cfg.Server.Listen, cfg.Admin.Listen, m.log)
	if err != nil {
		return err
	}
	m.publicAddr, m.adminAddr = publicLn.Addr(), adminLn.Addr()
	admin := srv.HTTPServer()

	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := dp.Serve(publicLn); err != nil {
			errc <- fmt.Errorf("public listener: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := admin.Serve(srv.Listener(adminLn)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin listener: %w", err)
		}
	}()
	wg.Add(6)
	go func() { defer wg.Done(); _ = srv.Run(bg) }()
	go func() { defer wg.Done(); _ = dp.Run(bg) }()
	go func() { defer wg.Done(); _ = snaps.Run(bg) }()
	go func() { defer wg.Done(); m.tickLoop(bg, lim, th, lv, now) }()
	go func() { defer wg.Done(); m.hangupLoop(bg) }()
	go func() { defer wg.Done(); m.rejects.Run(bg) }()
	wg.Add(1)
	go func() { defer wg.Done(); clk.Run(bg) }()
	wg.Add(1)
	go func() { defer wg.Done(); audit.run(bg) }()
	if cb != nil {
		wg.Add(1)
		go func() { defer wg.Done(); replicator.Run(bg) }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb.RunDrift(bg, func() map[string]limiter.GroupSettings { return *m.fileGroups.Load() })
		}()
	}

	// Ready (READY=1 to systemd) once both listeners accept: the admin
	// listener's http.Server accepts from its bound socket as soon as it
	// runs; the public listener's own accept loop says when it does.
	var runErr error
	select {
	case <-dp.Serving():
		m.log.Info("limiterd serving", "version", versionLine(buildInfo()), "public", m.publicAddr.String(), "admin", m.adminAddr.String(),
			"dashboard", dashboardURL(m.adminAddr), "upstream", upstream.String(), "groups", len(limCfg.Groups))
		m.state.started(time.Now())
		close(m.ready)
		m.notify.ready("serving")
		select {
		case <-ctx.Done():
		case runErr = <-errc:
		}
	case <-ctx.Done():
	case runErr = <-errc:
	}
	if runErr == nil {
		m.log.Info("shutting down: draining in-flight requests", "timeout", cfg.Server.ShutdownTimeout)
	}
	m.notify.stopping()
	// Outbound callers still waiting are told limiterd is going away (the
	// client then goes on, as when limiterd is not running).
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), max(cfg.Server.ShutdownTimeout, time.Millisecond))
	if err := dp.Shutdown(sctx); err != nil {
		m.log.Warn("drain ended before every request finished: their connections are closed", "err", err)
	}
	cancel()
	actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(actx, admin)
	cancel()
	stopBG()
	wg.Wait()
	if err := snaps.Save(context.Background()); err != nil {
		m.log.Error("final snapshot", "err", err)
		runErr = errors.Join(runErr, err)
	} else {
		m.log.Info("final snapshot written", "entries", snaps.LastWritten(), "file", db.Path())
	}
	m.log.Info("limiterd stopped")
	return runErr
}

// dataPlaneOptions are the public listener's settings from [server].
func dataPlaneOptions(cfg *config.Config, upstream *url.URL, log *slog.Logger, now func() time.Time, rejects *insight.RejectLog) proxy.Options {
	s := cfg.Server
	perIP := s.MaxConnsPerIP
	if perIP == 0 {
		perIP = -1 // no cap
	}
	return proxy.Options{
		Upstream:               upstream,
		CheckLease:             cfg.Admin.CheckLease,
		MaxRequestBody:         s.MaxRequestBody,
		ReadHeaderTimeout:      s.ReadHeaderTimeout,
		IdleTimeout:            s.IdleTimeout,
		ClientBodyTimeout:      s.ClientBodyTimeout,
		SendTimeout:            s.SendTimeout,
		UpstreamConnectTimeout: s.UpstreamConnectTimeout,
		UpstreamHeaderTimeout:  s.UpstreamHeaderTimeout,
		UpstreamReadTimeout:    s.UpstreamReadTimeout,
		UpstreamMaxConns:       s.UpstreamMaxConns,
		MaxConns:               s.MaxConns,
		MaxConnsPerIP:          perIP,
		Logger:                 log,
		Now:                    now,
		RejectLog:              rejects,
		RateLimitHeaders:       s.RateLimitHeaders,
		HTTP2:                  http2Options(s),
		UpstreamH2C:            s.UpstreamProtocol == "h2c",
		AnswerMemory:           noneIfZero(s.AnswerMemory),
		AnswerMemoryTotal:      noneIfZero(s.AnswerMemoryTotal),
		AnswerDisk:             noneIfZero(s.AnswerDisk),
		AnswerDiskTotal:        noneIfZero(s.AnswerDiskTotal),
		AnswerTempDir:          s.AnswerTempDir,
	}
}

// noneIfZero turns a bound of config.toml's, where 0 means none, into
// proxy.Options', where 0 means the default and a negative value none.
func noneIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// http2Options are the public listener's HTTP/2 settings from [server].
func http2Options(s config.Server) proxy.HTTP2Options {
	peerRate := s.HTTP2PeerStreamRate
	if peerRate == 0 {
		peerRate = -1 // no limit
	}
	return proxy.HTTP2Options{
		Off:                  !s.HTTP2,
		MaxConcurrentStreams: uint32(s.HTTP2MaxConcurrentStreams),
		MaxHeaderListSize:    int(s.HTTP2MaxHeaderListSize),
		ConnStreamRate:       s.HTTP2ConnStreamRate,
		PeerStreamRate:       peerRate,
	}
}

// tickLoop runs the limiter's sweeper, frees idle throttle keys and
// removes the exemptions that expired, once a second.
func (m *Main) tickLoop(ctx context.Context, lim *limiter.Limiter, th *throttle.Throttle, lv *live.Live, now func() time.Time) {
	ticker.Every(ctx, time.Second, func() {
		lim.Tick(now())
		th.Cleanup(now())
		if _, err := lv.Expire(ctx, now()); err != nil && ctx.Err() == nil {
			m.log.Error("remove expired exemptions (tried again in a second)", "err", err)
		}
	})
}

// hangupLoop reloads the config file on SIGHUP, keeping the running config
// when the new one is invalid. Each reload runs in a goroutine of its own,
// one at a time (a SIGHUP during one asks for one more after it), and the
// loop ends with ctx whether or not one is running: a reload that never
// ends (a config path that blocks when read, a cluster that does not
// answer) cannot hold up the shutdown; it is left behind as the process
// exits.
func (m *Main) hangupLoop(ctx context.Context) {
	done := make(chan struct{}, 1)
	running, again := false, false
	start := func() {
		running = true
		go func() {
			m.hangup()
			done <- struct{}{}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			if running {
				m.log.Warn("shutting down while a reload is still running: it is not waited for")
			}
			return
		case <-m.Hangup:
			if running {
				again = true
				continue
			}
			start()
		case <-done:
			running = false
			if again {
				again = false
				start()
			}
		}
	}
}

// Reload reads the config again and applies what a reload may change (the
// keys config.Keys says change on reload or live); a key that changes only
// on restart keeps its running value, and the log says so. On error the
// running config stays.
func (m *Main) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		return errors.New("not serving")
	}
	cfg, _, err := config.Load(m.src)
	if err != nil {
		return err
	}
	if m.adj != nil {
		m.adj(cfg)
	}
	limCfg, err := limiterConfig(cfg)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		m.log.Warn("reload: config: " + w)
	}
	thCfg := cfg.ThrottleConfig()
	if _, err := throttle.New(time.Now(), thCfg); err != nil {
		return err
	}
	admin, named, err := m.tokens(cfg)
	if err == nil {
		err = web.CheckTokens(admin, named)
	}
	if err != nil {
		return err
	}
	views := m.live.Groups()
	if err := m.live.SetBase(limCfg); err != nil {
		return err
	}
	groups := maps.Clone(limCfg.Groups)
	m.fileGroups.Store(&groups)
	m.logShadowed(views, limCfg.Groups)
	if err := m.srv.SetTokens(admin, named); err != nil {
		return err // checked above: cannot happen
	}
	m.token = admin
	m.applyLog(m.cfg.Log, cfg.Log)
	m.dataPlane.SetRateLimitHeaders(cfg.Server.RateLimitHeaders)
	m.audit.set(cfg.Admin.AuditMaxEntries)
	m.srv.SetProfiling(cfg.Admin.Pprof)
	m.srv.SetNowWindow(cfg.Admin.NowWindow)
	if err := m.throttle.Apply(thCfg); err != nil {
		return err
	}
	if m.cluster != nil {
		// The password file and the TLS files are read again, and
		// checked on a connection of their own.
		if err := m.cluster.Reload(max(time.Second, cfg.Cluster.Timeout)); err != nil {
			m.log.Error("cluster: the redis credentials or certificates read again do not work", "err", err)
		}
	}
	if keys := config.Changed(m.cfg, cfg, config.Restart); len(keys) > 0 {
		m.log.Warn("these keys change only on restart: the running values stay until then", "keys", strings.Join(keys, ", "))
	}
	m.cfg = cfg
	return nil
}
