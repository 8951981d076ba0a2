package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
)

// newServer returns the public listener's server. Its ReadTimeout bounds
// a request's headers (from the connection's opening for the first, from
// the first byte for the next); a request body's reads get deadlines of
// their own from the handler, per read, and every write has the send
// timeout (conn.Write). It has no panic recovery: handle recovers.
func (h *Handler) newServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:       h.handle,
		ErrorHandler:  h.badRequest,
		ExpectHandler: h.expect,
		// Headers are read into the read buffer: it is also their limit.
		ReadBufferSize:  MaxHeaderBytes,
		WriteBufferSize: 16 << 10,
		ReadTimeout:     h.opts.ReadHeaderTimeout,
		// The keep-alive wait in the server; then the connection is
		// parked (see parkAfter), or closed when idle_timeout is shorter.
		IdleTimeout: min(h.opts.IdleTimeout, h.parkAfter),
		ConnState:   connState,
		// No WriteTimeout: it would bound a whole answer. Each write has
		// the send timeout instead (conn.Write).
		// Bodies stream both ways; fasthttp does not enforce the body
		// limit on a stream (the handler does), only reads ahead up to it.
		StreamRequestBody:            true,
		MaxRequestBodySize:           int(min(h.opts.MaxRequestBody, 1<<30)),
		DisablePreParseMultipartForm: true,
		// The connection caps are the listener's (connLimiter); this is a
		// backstop above them.
		Concurrency:           h.opts.MaxConns + 1024,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// Buffers are kept while a connection is served: an idle one is
		// parked, without them, after parkAfter.
		ReduceMemoryUsage: false,
		// The request's time is read only if asked for (it is not).
		LazyRequestTime:       true,
		SecureErrorLogMessage: true,
		Logger:                fasthttpLogger{h},
	}
}

// fasthttpLogger passes fasthttp's own messages (a connection that failed)
// to the structured log at debug level.
type fasthttpLogger struct{ h *Handler }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.h.log.Debug("public listener", "msg", fmt.Sprintf(format, args...))
}

// badRequest answers a request fasthttp could not parse: 431 for headers
// over MaxHeaderBytes, 408 for headers not in within ReadHeaderTimeout, 400
// otherwise (a malformed request line or field, a duplicate or malformed
// Content-Length or Transfer-Encoding, an HTTP/2 preface…). fasthttp closes
// the connection after it.
func (h *Handler) badRequest(ctx *fasthttp.RequestCtx, err error) {
	h.Counts.BadRequests.Add(1)
	ctx.Response.Reset()
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		fail(ctx, http.StatusRequestHeaderFieldsTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		fail(ctx, http.StatusRequestTimeout)
	default:
		fail(ctx, http.StatusBadRequest)
	}
}

// expect answers "Expect: 100-continue" before the body is sent: 413 when
// its announced length is over the limit, else 100 and the body follows.
func (h *Handler) expect(ctx *fasthttp.RequestCtx) int {
	if int64(ctx.Request.Header.ContentLength()) > h.opts.MaxRequestBody {
		h.Counts.TooLarge.Add(1)
		fail(ctx, http.StatusRequestEntityTooLarge)
		return http.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// handle is a request's way through the house: check the request, classify
// it, identify the peer, decide, proxy, and release the in-flight slot
// once the exchange has ended (see exchange.finish).
func (h *Handler) handle(ctx *fasthttp.RequestCtx) {
	start := h.now()
	x := h.newExchange(ctx)
	defer func() {
		if v := recover(); v != nil {
			h.internalError(ctx, v)
		}
		if !x.handedOff {
			x.answered()
			x.finish(nil)
		}
		x.unref()
	}()

	if h.draining.Load() {
		ctx.SetConnectionClose()
		if c, ok := ctx.Conn().(conn); ok && c.claimed() {
			// The drain is closing this connection as the request began:
			// never served, it may be sent again to the next process.
			unavailable(ctx)
			return
		}
	}
	// Refused before any decision: what cannot be proxied safely.
	req := &ctx.Request.Header
	if req.IsConnect() {
		// limiterd is never a tunnel.
		h.Counts.BadRequests.Add(1)
		ctx.Response.Header.Set("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH")
		failClose(ctx, http.StatusMethodNotAllowed)
		return
	}
	fr := &x.framing
	scanRequestHeaders(fr, req.RawHeaders())
	if !fr.ok || fr.ambiguous() {
		h.Counts.BadRequests.Add(1)
		failClose(ctx, http.StatusBadRequest)
		return
	}
	t, ok := parseTarget(req.RequestURI())
	var path []byte
	if ok {
		path, ok = decodePath(t.path, nil)
	}
	if !ok {
		h.Counts.BadRequests.Add(1)
		fail(ctx, http.StatusBadRequest)
		return
	}
	if int64(req.ContentLength()) > h.opts.MaxRequestBody {
		h.tooLarge(ctx)
		return
	}

	// Timed from here on (noteExchange): the request has a group.
	x.start, x.group = start, limiter.ExemptPathGroup
	x.peer.h = req
	if lc, ok := ctx.Conn().(conn); ok {
		x.peerAddr, x.peerIP = lc.peerText()
	} else {
		x.peerAddr = []byte(ctx.RemoteAddr().String())
		x.peerIP = []byte(ctx.RemoteIP().String())
	}
	peer := h.lim.PeerOf(b2s(x.peerAddr), &x.peer)
	x.peerKey = peer.Key
	now := h.now()
	x.d = h.lim.Check(now, limiter.Request{Method: b2s(req.Method()), Path: b2s(path), Peer: peer})
	d := &x.d
	x.group = d.Group
	if d.OnExemptPath() {
		if !d.Allowed { // a denied peer: the deny list applies everywhere
			fail(ctx, http.StatusForbidden)
			return
		}
		h.Counts.ExemptPath.Add(1)
		h.forward(ctx, x, &t)
		return
	}
	h.Lat.Observe(d.Group, h.since(now))
	if d.Reason == limiter.ReasonDenied && !d.Allowed {
		fail(ctx, http.StatusForbidden)
		return
	}
	if d.Reason == limiter.ReasonUnavailable {
		// The backend could not decide (docs/replies.md, "Other
		// statuses"): 503, without rate-limit fields.
		unavailable(ctx)
		return
	}
	if !d.Allowed {
		x.setRateLimitFields()
		h.reject(ctx, d)
		return
	}
	h.forward(ctx, x, &t)
}

// Header names and values written on every request, canonical already.
var (
	hdrXFF    = []byte("X-Forwarded-For")
	hdrXFH    = []byte("X-Forwarded-Host")
	hdrXFP    = []byte("X-Forwarded-Proto")
	valueHTTP = []byte("http")
)

// internalError turns a panic of limiterd's own into a 503 (docs/replies.md,
// "Other statuses") without rate-limit fields, counted and logged.
// Resetting the answer closes a relay already handed to it, which finishes
// the exchange.
func (h *Handler) internalError(ctx *fasthttp.RequestCtx, v any) {
	h.Counts.InternalErrors.Add(1)
	h.log.Error("internal error", "method", string(ctx.Method()), "path", string(ctx.Path()), "panic", v)
	ctx.Hijack(nil)
	ctx.HijackSetNoResponse(false)
	ctx.Response.Reset()
	fail(ctx, http.StatusServiceUnavailable)
}

// forward proxies an admitted request to the node and sets up the answer:
// a fresh request for the node (never the client's, so nothing the client
// sent is forwarded by accident), the node's answer copied without its
// hop-by-hop fields, and its body handed to fasthttp as a relay.
func (h *Handler) forward(ctx *fasthttp.RequestCtx, x *exchange, t *target) {
	req := &ctx.Request
	in := &req.Header
	http11 := in.IsHTTP11()
	host := t.authority
	if host == nil {
		host = in.Host()
	}
	if len(host) == 0 {
		host = h.upHost // HTTP/1.0 without Host
	}
	hasBody := false
	cl := in.ContentLength()
	if cl != 0 && cl != -2 {
		if s := ctx.RequestBodyStream(); s != nil {
			x.body, x.limit, hasBody = s, h.opts.MaxRequestBody, true
		}
	}
	// The request goes to the node as the client's, made fit in place
	// (the server has read what it needs of it: whether to close the
	// connection, the client's HTTP version).
	prepareRequest(in, &x.framing)
	// host may be part of the target: set before the target is.
	in.SetHostBytes(host)
	// The node learns the address limiterd saw, never what the client
	// claims (decision 21).
	in.SetCanonical(hdrXFF, x.peerIP)
	in.SetCanonical(hdrXFH, host)
	in.SetCanonical(hdrXFP, valueHTTP)
	// The target as the client sent it, so that the node gets it
	// unchanged: fasthttp's parsed URI would write "//a/b" as "/b".
	req.SetRequestURIBytes(t.uri)
	req.UseHostHeader = true
	if hasBody {
		req.SetBodyStream((*reqBody)(x), cl)
	}
	if h.opts.hook != nil {
		h.opts.hook("upstream")
	}

	up := x.keep.up
	err := h.doTimed(x, req, up, hasBody)
	if err != nil {
		h.upstreamFailed(ctx, x, err)
		return
	}
	hd := &ctx.Response.Header
	status := hd.StatusCode()
	if status == http.StatusSwitchingProtocols {
		// Upgrade is never forwarded: a node answering 101 is broken.
		h.Counts.UpstreamErrors.Add(1)
		h.noteUpstreamError(false, errSwitchingProtocols)
		ctx.Response.Reset()
		fail(ctx, http.StatusBadGateway)
		return
	}
	if x.d.RefundsOn(status) {
		h.lim.Reduce(h.now(), x.peerKey, x.d.Group)
	}
	x.nodeFields = cleanResponseHeaders(hd)
	if h.draining.Load() {
		// The node's head replaced the answer's, and a request in flight
		// when the drain began is answered now: either way a drain's
		// answer closes its connection.
		ctx.SetConnectionClose()
	}
	x.setRateLimitFields()
	if !x.answerBody {
		// Taken whole already, or none: HEAD (its Content-Length, the
		// GET's, stays as the node gave it), 204, 304.
		return
	}
	size := hd.ContentLength()
	x.status = status
	x.handedOff = true
	if size < 0 && !http11 {
		x.startAnswer()
		h.streamHTTP10(ctx, x)
		return
	}
	// The head goes out with the first bytes of the body, in one write,
	// when the whole body is at hand; otherwise at once, so that a client
	// waiting for a slow body sees the answer begin.
	ctx.Response.ImmediateHeaderFlush = size < 0 || x.upBody.buffered() < size
	x.startAnswer()
	x.refs.Add(1) // the relay's, dropped when fasthttp closes it
	ctx.Response.SetBodyStream((*relay)(x), max(size, -1))
}

// upstreamFailed answers a request the node did not answer: the client's
// own fault first (a body over the limit: 413; a body that stalled: 408;
// one that broke: 400), then 504 for a timeout and 502 for anything else
// (refused, reset before a byte, a malformed answer).
func (h *Handler) upstreamFailed(ctx *fasthttp.RequestCtx, x *exchange, err error) {
	// The head may hold part of a broken answer.
	ctx.Response.Reset()
	x.setRateLimitFields()
	switch {
	case errors.Is(x.bodyErr, errBodyTooLarge):
		x.status = http.StatusRequestEntityTooLarge // written on the hijacked connection
		h.tooLarge(ctx)
	case x.bodyErr != nil && isTimeout(x.bodyErr):
		failClose(ctx, http.StatusRequestTimeout)
	case x.bodyErr != nil:
		h.log.Debug("client broke off a request body", "err", x.bodyErr)
		failClose(ctx, http.StatusBadRequest)
	case isTimeout(err):
		h.Counts.UpstreamTimeouts.Add(1)
		h.noteUpstreamError(true, err)
		fail(ctx, http.StatusGatewayTimeout)
	default:
		h.Counts.UpstreamErrors.Add(1)
		h.noteUpstreamError(false, err)
		fail(ctx, http.StatusBadGateway)
	}
}
