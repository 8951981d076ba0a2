// Package proxy is limiterd's data plane: the public listener, a
// fasthttp.Server that classifies every request, identifies its peer,
// decides, proxies an admitted request to the node through one
// fasthttp.HostClient and releases its in-flight slot however the exchange
// ends; and the data-plane calls the admin listener serves for other
// proxies (the sidecar check, its release and nginx's auth_request), which
// decide exactly as the public listener does and stay net/http handlers.
//
// Bodies stream both ways: neither a request nor a response body is held
// whole in memory. Every wait has a bound (Options); an in-flight slot is
// held until the node's side of the exchange ends (docs/limiting.md,
// "In-flight release"; decision 210).
package proxy

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// The defaults of Options, those of config.toml's [server] table
// (docs/config.md).
const (
	DefaultMaxRequestBody         = 64 << 20
	DefaultReadHeaderTimeout      = 10 * time.Second
	DefaultIdleTimeout            = 120 * time.Second
	DefaultClientBodyTimeout      = 60 * time.Second
	DefaultSendTimeout            = 60 * time.Second
	DefaultUpstreamConnectTimeout = 5 * time.Second
	DefaultUpstreamHeaderTimeout  = 60 * time.Second
	DefaultUpstreamReadTimeout    = 60 * time.Second
	DefaultUpstreamMaxConns       = 1024
	DefaultMaxConns               = 16384
	DefaultMaxConnsPerIP          = 512
	// MaxHeaderBytes bounds a request's line and headers (431 beyond),
	// and an upstream response's headers (502 beyond).
	MaxHeaderBytes = 64 << 10
)

// Options configure a Handler. A zero duration or size means its default.
type Options struct {
	// Upstream is the node the public listener proxies to (http only:
	// the node is on the same machine or network).
	Upstream *url.URL
	// CheckLease bounds how long a /api/v1/check admission holds its
	// in-flight slot when nobody releases it; 0 means 30 s.
	CheckLease time.Duration

	// MaxRequestBody is the largest request body passed on
	// (server.max_request_body); a larger one is answered 413.
	MaxRequestBody int64
	// ReadHeaderTimeout bounds the wait for a request's line and headers
	// from its first byte, or from the connection's opening for the first
	// request (server.read_header_timeout): 408 beyond.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection (server.idle_timeout): closed silently beyond.
	IdleTimeout time.Duration
	// ClientBodyTimeout bounds each wait for more of a request body
	// (server.client_body_timeout): 408 beyond.
	ClientBodyTimeout time.Duration
	// SendTimeout bounds how long a response may wait for the client to
	// take more of it (server.send_timeout); there is no bound on the
	// whole response.
	SendTimeout time.Duration
	// UpstreamConnectTimeout bounds connecting to the node, and waiting
	// for a free connection when UpstreamMaxConns are busy
	// (server.upstream_connect_timeout): 504 beyond.
	UpstreamConnectTimeout time.Duration
	// UpstreamHeaderTimeout bounds the wait for the first byte of the
	// node's answer once the request is sent
	// (server.upstream_header_timeout): 504 beyond.
	UpstreamHeaderTimeout time.Duration
	// UpstreamReadTimeout bounds each wait for more of the node's
	// response body, and for the node to take more of a request body
	// (server.upstream_read_timeout): the exchange is cut off beyond.
	UpstreamReadTimeout time.Duration
	// UpstreamMaxConns caps the connections to the node, busy and idle
	// (server.upstream_max_conns).
	UpstreamMaxConns int
	// UpstreamH2C reaches the node over cleartext HTTP/2 rather than
	// HTTP/1.1 (server.upstream_protocol = "h2c").
	UpstreamH2C bool

	// The buffers of the node's answers (docs/config.md, "Answers
	// buffered"): a body the client reads slower than the node sends it is
	// held in memory up to AnswerMemory per answer and AnswerMemoryTotal in
	// all (server.answer_memory, server.answer_memory_total), then in a
	// temporary file of AnswerTempDir ("": the system's) up to AnswerDisk
	// per answer and AnswerDiskTotal in all (server.answer_disk,
	// server.answer_disk_total); past them it waits for its client,
	// holding the node's connection. A negative value means none: with
	// neither memory nor disk, answers are not buffered.
	AnswerMemory, AnswerMemoryTotal int64
	AnswerDisk, AnswerDiskTotal     int64
	AnswerTempDir                   string
	// MaxConns caps the public listener's open connections
	// (server.max_conns): 503 and closed beyond. It is lowered to fit the
	// process's limit on open files.
	MaxConns int
	// MaxConnsPerIP caps the open connections of one client address
	// (server.max_conns_per_ip; IPv6 by peers.ipv6_prefix; trusted
	// proxies and exempt peers are not capped): 429 and closed beyond. A
	// negative value means no cap.
	MaxConnsPerIP int

	// HTTP2 configures cleartext HTTP/2 on the public listener (on by
	// default).
	HTTP2 HTTP2Options

	// RateLimitHeaders is server.ratelimit_headers: the rate-limit fields
	// a limited answer carries (the zero value is both sets, the default);
	// SetRateLimitHeaders changes it later.
	RateLimitHeaders ratelimit.Set

	Logger *slog.Logger
	// Now is the clock of decisions; nil means time.Now. Timeouts run on
	// the real clock.
	Now func() time.Time
	// RejectLog logs refusals and upstream errors ([log].rejections);
	// nil logs none.
	RejectLog *insight.RejectLog

	// hook, set by tests only, runs at the named points of an exchange.
	hook func(point string)
	// parkAfter, set by tests only, replaces the package's; parkAlone
	// makes every idle connection park in a goroutine of its own.
	parkAfter time.Duration
	parkAlone bool
}

// Handler is the data plane. It is safe for concurrent use; Run owns its
// background work (ending check leases), Serve and Shutdown the public
// listener.
type Handler struct {
	lim  *limiter.Limiter
	opts Options
	log  *slog.Logger
	now  func() time.Time

	srv       *fasthttp.Server
	h2        *http.Server  // the HTTP/2 server; nil when HTTP/2 is off
	h2ln      *connQueue    // its listener
	h2done    chan struct{} // closed when h2's Serve has returned
	upstream  *upstream
	parkAfter time.Duration
	upHost    []byte // the node's host:port, Host of a request without one

	// Lat holds the decision latency per group, Counts the data plane's
	// own counters; the metrics collector reads both at scrape time.
	Lat    insight.Latencies
	Counts insight.ProxyCounters
	// Exchanges times the public listener's exchanges per group and
	// status class, read at scrape time.
	Exchanges insight.Exchanges
	leases    *leases

	exchanges sync.Pool // of *exchange
	// answers is the budget of the answers' buffers.
	answers answerBudget
	// headers is the ratelimit.Set of the answers' rate-limit fields.
	headers atomic.Uint32
	// draining is set by Shutdown: answers say Connection: close.
	draining atomic.Bool
	// clock is the deadlines' clock, running while Serve does.
	clock coarseClock

	mu      sync.Mutex
	gate    *connLimiter  // the listener Serve serves, once it does
	parked  *parker       // its parked connections; nil: they park alone
	shut    bool          // Shutdown was called
	serving chan struct{} // closed once Serve accepts
}

// New returns a Handler deciding with lim.
func New(lim *limiter.Limiter, opts Options) *Handler {
	h := &Handler{lim: lim, opts: withDefaults(opts), log: opts.Logger, now: opts.Now, serving: make(chan struct{})}
	h.leases = newLeases(&h.Counts.CheckLeasesCut)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	o := &h.opts
	h.answers = answerBudget{memPer: o.AnswerMemory, memTotal: o.AnswerMemoryTotal,
		diskPer: o.AnswerDisk, diskTotal: o.AnswerDiskTotal, dir: o.AnswerTempDir, log: h.log,
		mem: &h.Counts.AnswerMemory, disk: &h.Counts.AnswerDisk, spills: &h.Counts.AnswerSpills, waits: &h.Counts.AnswerWaits}
	if h.now == nil {
		h.now = time.Now
	}
	h.parkAfter = cmp.Or(opts.parkAfter, parkAfter)
	h.SetRateLimitHeaders(opts.RateLimitHeaders)
	h.srv = h.newServer()
	h.newHTTP2()
	h.upstream = h.newUpstream()
	return h
}

func withDefaults(o Options) Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.CheckLease, 30*time.Second)
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.ClientBodyTimeout, DefaultClientBodyTimeout)
	def(&o.SendTimeout, DefaultSendTimeout)
	def(&o.UpstreamConnectTimeout, DefaultUpstreamConnectTimeout)
	def(&o.UpstreamHeaderTimeout, DefaultUpstreamHeaderTimeout)
	def(&o.UpstreamReadTimeout, DefaultUpstreamReadTimeout)
	if o.MaxRequestBody <= 0 {
		o.MaxRequestBody = DefaultMaxRequestBody
	}
	if o.UpstreamMaxConns <= 0 {
		o.UpstreamMaxConns = DefaultUpstreamMaxConns
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	for _, b := range []struct {
		v   *int64
		def int64
	}{{&o.AnswerMemory, DefaultAnswerMemory}, {&o.AnswerMemoryTotal, DefaultAnswerMemoryTotal},
		{&o.AnswerDisk, DefaultAnswerDisk}, {&o.AnswerDiskTotal, DefaultAnswerDiskTotal}} {
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	o.HTTP2.withDefaults()
	if o.Upstream == nil {
		o.Upstream = &url.URL{Scheme: "http", Host: "127.0.0.1:1984"}
	}
	return o
}

// since returns the time since t on the Handler's clock: with the real
// clock, from its monotonic reading alone (one clock read, not two).
func (h *Handler) since(t time.Time) time.Duration {
	if h.opts.Now == nil {
		return time.Since(t)
	}
	return h.now().Sub(t)
}

// Run ends the check leases that ran out, once a second, until ctx ends;
// then it releases every lease left.
func (h *Handler) Run(ctx context.Context) error {
	ticker.Every(ctx, time.Second, func() { h.leases.expire(h.now()) })
	h.leases.releaseAll()
	return nil
}

// Serve serves the public listener on ln until Shutdown; it returns nil
// after Shutdown.
func (h *Handler) Serve(ln net.Listener) error {
	maxConns := h.opts.MaxConns
	if fds := fdLimit(); fds > 0 {
		// Leave room for the node's connections, the admin listener, the
		// database and the log.
		if room := fds - h.opts.UpstreamMaxConns - 256; room < maxConns {
			h.log.Warn("server.max_conns lowered to fit the limit on open files (raise LimitNOFILE / ulimit -n)",
				"max_conns", maxConns, "now", max(room, 64), "open_files_limit", fds)
			maxConns = max(room, 64)
		}
	}
	gate := newConnLimiter(ln, maxConns, h.opts.MaxConnsPerIP, h.opts.SendTimeout, &h.Counts, h.log, h.connPolicy)
	gate.clock = &h.clock
	if r := h.opts.HTTP2.PeerStreamRate; r > 0 {
		gate.streamInterval = int64(time.Second) / int64(r)
		gate.streamBurst = int64(time.Second)
	}
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	h.gate = gate
	if !h.opts.parkAlone {
		h.parked = newParker(h)
	}
	h.clock.start()
	if h.h2 != nil {
		h.h2done = make(chan struct{})
		go func() {
			_ = h.h2.Serve(h.h2ln) // ends when Shutdown closes h2ln
			close(h.h2done)
		}()
	}
	select {
	case <-h.serving:
	default:
		close(h.serving)
	}
	h.mu.Unlock()
	for {
		c, err := gate.Accept()
		if err != nil {
			if gate.closing.Load() {
				return nil
			}
			return err
		}
		go h.serveNew(c.(conn))
	}
}

// Serving returns a channel closed once Serve accepts connections (its
// caps, the parking of idle connections and the deadlines' clock set up):
// the daemon says it is ready only then. It is never closed when Serve
// was not called, or when Shutdown came first.
func (h *Handler) Serving() <-chan struct{} { return h.serving }

// connPolicy says whether connections from a are free of the per-address
// cap (trusted proxies and exempt peers), and the IPv6 prefix peers are
// keyed by.
func (h *Handler) connPolicy(a netip.Addr) (bool, int) {
	cfg := h.lim.Config()
	for _, p := range cfg.TrustedProxies {
		if p.Contains(a) {
			return true, cfg.IPv6Prefix
		}
	}
	for _, p := range cfg.Exempt {
		if p.Contains(a) {
			return true, cfg.IPv6Prefix
		}
	}
	return false, cfg.IPv6Prefix
}

// drainIdleAfter is how long a drain lets a connection wait for its next
// request before closing it: a client that sends often gets its next
// request answered, with Connection: close, rather than its connection
// closed under the request it is sending (docs/operations.md, "Restarts
// nobody notices"; decision 197).
const drainIdleAfter = 250 * time.Millisecond

// Shutdown stops the public listener: no new connection is accepted (a
// listener passed by socket activation stays open in the process that
// passed it, its queue for the next process), the answers say
// Connection: close, a connection that has waited drainIdleAfter for a
// request is closed, and it waits for every connection to end until ctx
// does; then it closes every connection left, cuts off the exchanges
// with the node still running, and returns ctx's error.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.shut = true
	gate, parked, h2done := h.gate, h.parked, h.h2done
	h.mu.Unlock()
	h.draining.Store(true)
	if h2done != nil && h.Counts.HTTP2Open.Load() > 0 {
		// GOAWAY to the HTTP/2 connections: their streams in flight end,
		// no new one begins; the wait for them is below. (Without one
		// open, closing h2ln below is all there is to do.)
		go func() { _ = h.h2.Shutdown(ctx) }()
	}
	var err error
	if gate != nil {
		gate.closing.Store(true)
		_ = gate.Listener.Close()
		for gate.Open() > 0 {
			gate.closeIdle(time.Now().Add(-drainIdleAfter))
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
		if parked != nil {
			parked.stop()
		}
		if err != nil {
			gate.closeAll()
			h.upstream.cutAll()
		}
	}
	h.upstream.closeIdle()
	if h2done != nil {
		_ = h.h2ln.Close()
		<-h2done
	}
	h.mu.Lock()
	h.clock.halt()
	h.mu.Unlock()
	return err
}

// parker returns the parker of the connections, nil when there is none.
func (h *Handler) parker() *parker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parked
}

// OpenConns returns the public listener's open connections.
func (h *Handler) OpenConns() int {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate == nil {
		return 0
	}
	return gate.Open()
}
