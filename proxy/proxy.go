// Package proxy is limiterd's data plane: the public listener's handler,
// which classifies every request, identifies its peer, decides, proxies
// an admitted request to the node and releases its in-flight slot however
// the exchange ends; and the data-plane calls the admin listener serves
// for other proxies (the sidecar check, its release and nginx's
// auth_request), which decide exactly as the proxy does.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limiterd/limiterd/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/ticker"
)

// Options configure a Handler.
type Options struct {
	// Upstream is the node the public listener proxies to.
	Upstream *url.URL
	// Transport is the proxy's transport; nil means a default tuned for
	// one upstream.
	Transport http.RoundTripper
	// CheckLease bounds how long a /api/v1/check admission holds its
	// in-flight slot when nobody releases it; 0 means 30 s.
	CheckLease time.Duration
	// SendTimeout bounds how long a proxied response may wait for the
	// client to take more of it; 0 means DefaultSendTimeout. There is no
	// bound on the whole response.
	SendTimeout time.Duration
	Logger      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RejectLog logs refusals and upstream errors ([log].rejections);
	// nil logs none.
	RejectLog *insight.RejectLog
}

// Handler is the data plane. It is safe for concurrent use; Run owns its
// background work (ending check leases).
type Handler struct {
	lim   *limiter.Limiter
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	proxy *httputil.ReverseProxy
	// Lat holds the decision latency per group, Counts the data plane's
	// own counters; the metrics collector reads both at scrape time.
	Lat    insight.Latencies
	Counts insight.ProxyCounters
	// Exchanges times the public listener's exchanges per group and
	// status class, read at scrape time.
	Exchanges insight.Exchanges
	leases    *leases
}

// New returns a Handler deciding with lim.
func New(lim *limiter.Limiter, opts Options) *Handler {
	h := &Handler{lim: lim, opts: opts, log: opts.Logger, now: opts.Now, leases: newLeases()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.opts.SendTimeout <= 0 {
		h.opts.SendTimeout = DefaultSendTimeout
	}
	if h.opts.CheckLease <= 0 {
		h.opts.CheckLease = 30 * time.Second
	}
	h.proxy = h.newProxy()
	return h
}

// Run ends the check leases that ran out, once a second, until ctx ends;
// then it releases every lease left.
func (h *Handler) Run(ctx context.Context) error {
	ticker.Every(ctx, time.Second, func() { h.leases.expire(h.now()) })
	h.leases.releaseAll()
	return nil
}

// HTTPServer returns the public listener's http.Server, with timeouts a
// slow client cannot abuse: headers within 10 s, a body within 60 s, a
// response begun within 120 s (then extended while the client reads, see
// proxyWriter), idle connections closed after 120 s, headers at most
// 64 KiB.
func (h *Handler) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// ServeHTTP is the public listener: see handleProxy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handleProxy(w, r) }

func (h *Handler) newProxy() *httputil.ReverseProxy {
	up := h.opts.Upstream
	tr := h.opts.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			// The client's own X-Forwarded-* never reach the node; limiterd
			// states the address it saw.
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		Transport:    tr,
		ErrorHandler: h.proxyError,
		BufferPool:   &bufferPool{},
		// What the proxy logs itself (an upstream that broke off a body)
		// goes to the structured log, as a warning.
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
}

// bufferPool recycles the proxy's 32 KiB copy buffers, which
// httputil.ReverseProxy otherwise allocates for every response.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// proxyError answers 504 for an upstream timeout and 502 otherwise; a
// client that went away gets nothing.
func (h *Handler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		h.Counts.UpstreamTimeouts.Add(1)
		h.noteUpstreamError(true, err)
		http.Error(w, "Gateway Timeout", http.StatusGatewayTimeout)
		return
	}
	h.Counts.UpstreamErrors.Add(1)
	h.noteUpstreamError(false, err)
	http.Error(w, "Bad Gateway", http.StatusBadGateway)
}

// handleProxy is a request's way through the house: classify, identify the
// peer, decide, release in a defer, proxy.
func (h *Handler) handleProxy(w http.ResponseWriter, r *http.Request) {
	defer h.recoverInternal(w, r)
	ex := exchange{start: h.now(), group: insight.ExemptPathGroup}
	defer h.noteExchange(&ex)
	route := h.lim.Classify(r.Method, r.URL.Path)
	peer := h.lim.PeerOf(r.RemoteAddr, r.Header)
	if route.Exempt {
		if h.lim.DenyExempt(peer) {
			h.noteDenied(ex.start, peer.Key)
			ex.status = http.StatusForbidden
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		h.Counts.ExemptPath.Add(1)
		sw := h.newProxyWriter(w)
		h.proxy.ServeHTTP(sw, r)
		ex.status = sw.status
		return
	}
	ex.group = route.Group
	now := h.now()
	d := h.lim.Decide(now, peer, route.Group)
	h.Lat.Observe(d.Group, h.now().Sub(now))
	defer d.Release()
	h.noteDecision(now, peer.Key, &d)

	if d.Reason == limiter.ReasonDenied && !d.Allowed {
		ex.status = http.StatusForbidden
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	if d.Reason == limiter.ReasonUnavailable {
		ex.status = http.StatusServiceUnavailable
		// The backend could not decide (SPEC §7: a limiter internal error):
		// 503, without rate-limit fields.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	if d.Limited {
		q := d.Quota()
		setRateLimitHeaders(w.Header(), h.lim.GroupName(d.Group), &q)
	}
	if !d.Allowed {
		ex.status = http.StatusTooManyRequests
		h.reject(w, r, &d)
		return
	}
	sw := h.newProxyWriter(w)
	h.proxy.ServeHTTP(sw, r)
	ex.status = sw.status
	if slices.Contains(route.ReduceOnStatus, sw.status) {
		h.lim.Reduce(h.now(), peer.Key, route.Group)
	}
}

// recoverInternal turns a panic of limiterd's own into a 503 (SPEC §7: a
// limiter internal error), counted and logged. http.ErrAbortHandler — the
// proxy aborting an exchange the upstream broke — goes on up to the server.
// Deferred before the decision, it runs after the in-flight slot is
// released.
func (h *Handler) recoverInternal(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	h.Counts.InternalErrors.Add(1)
	h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "panic", v)
	http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
}

// reject writes the 429 of SPEC §7.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, d *limiter.Decision) {
	hd := w.Header()
	hd.Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
	hd.Set("Cache-Control", "no-store")
	if prefersJSON(r.Header.Get("Accept")) {
		hd.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(struct {
			Error      string `json:"error"`
			Group      string `json:"group"`
			Reason     string `json:"reason"`
			RetryAfter int64  `json:"retry_after"`
		}{"too_many_requests", h.lim.GroupName(d.Group), d.Reason.String(), d.RetryAfter})
		return
	}
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("Too Many Requests"))
}

// setRateLimitHeaders writes RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers): the bucket as the group's policy
// and, when the group uses a sliding window, the window as "<group>-window".
func setRateLimitHeaders(h http.Header, group string, q *limiter.Quota) {
	var pol, cur []byte
	pol = appendItem(pol, group, "q", q.BucketLimit, "w", ceilSec(q.BucketWindow))
	cur = appendItem(cur, group, "r", q.BucketRemaining, "t", ceilSec(q.BucketReset))
	if q.WindowLimit > 0 {
		pol = append(pol, ", "...)
		pol = appendItem(pol, group+"-window", "q", q.WindowLimit, "w", ceilSec(q.WindowDuration))
		cur = append(cur, ", "...)
		cur = appendItem(cur, group+"-window", "r", q.WindowRemaining, "t", ceilSec(q.WindowReset))
	}
	h["Ratelimit-Policy"] = []string{string(pol)}
	h["Ratelimit"] = []string{string(cur)}
}

func appendItem(b []byte, name, k1 string, v1 int64, k2 string, v2 int64) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";`...)
	b = append(b, k1...)
	b = append(b, '=')
	b = strconv.AppendInt(b, v1, 10)
	b = append(b, ';')
	b = append(b, k2...)
	b = append(b, '=')
	return strconv.AppendInt(b, v2, 10)
}

func ceilSec(ms int64) int64 { return (ms + 999) / 1000 }

// prefersJSON reports whether an Accept header ranks application/json
// above text/plain (explicitly listed, with a q at least as high as any
// text or wildcard type).
func prefersJSON(accept string) bool {
	if accept == "" {
		return false
	}
	qJSON, qText := -1.0, -1.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		switch mt = strings.ToLower(strings.TrimSpace(mt)); {
		case mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")):
			qJSON = max(qJSON, q)
		case mt == "text/plain" || mt == "text/*" || mt == "*/*":
			qText = max(qText, q)
		}
	}
	return qJSON > 0 && qJSON >= qText
}

// DefaultSendTimeout is Options.SendTimeout's default.
const DefaultSendTimeout = 60 * time.Second

// proxyWriter is the ResponseWriter of a proxied request. It remembers
// the status the upstream answered (for reduce_on_status), and it moves
// the connection's write deadline sendTimeout past each write that makes
// progress: a response may take as long as it takes while the client
// reads it (chunks and blocks to slow peers), but a client that stops
// reading is cut off sendTimeout later, as nginx's send_timeout does. The
// server's WriteTimeout is the deadline until the first write.
type proxyWriter struct {
	http.ResponseWriter
	status   int
	timeout  time.Duration
	deadline time.Time // the write deadline last set; zero: the server's
}

func (h *Handler) newProxyWriter(w http.ResponseWriter) *proxyWriter {
	return &proxyWriter{ResponseWriter: w, timeout: h.opts.SendTimeout}
}

func (w *proxyWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *proxyWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	// Set again when a quarter of the timeout is used up: one deadline
	// change per write would be a timer reset per 32 KiB.
	if now := time.Now(); w.deadline.Sub(now) < w.timeout*3/4 {
		w.deadline = now.Add(w.timeout)
		// An error means the connection cannot take deadlines: the
		// server's stays.
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(w.deadline)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *proxyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes through for streamed responses.
func (w *proxyWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
