package proxy

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
)

// serveStream is an HTTP/2 stream's way through the house, the same as an
// HTTP/1.1 request's (handle): classify, identify the peer, decide,
// proxy, and release the in-flight slot once the exchange with the node
// has ended. The HTTP/2 server has checked the request's form already
// (pseudo-header fields, connection-specific fields, sizes: a malformed
// one is a stream or connection error that never reaches here).
//
// The slot is held until the node has answered (docs/limiting.md,
// "In-flight release"): a stream the client resets, or a connection lost,
// while the node thinks does not end the exchange; its answer is then
// read and dropped. Once the answer's body flows, a write that fails ends
// it, and the node's connection is closed.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request) {
	hc, _ := r.Context().Value(h2ConnKey{}).(*h2Conn)
	if hc == nil {
		return
	}
	h.Counts.HTTP2Streams.Add(1)
	if !hc.streamBegins() {
		h2Refuse(w)
		return
	}
	defer hc.streamEnds(true)
	start := h.now()
	x := h.newStreamExchange(w, r)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				err := x.endErr
				if err == nil {
					err = errClientGone
				}
				x.finish(err)
				x.unref()
				panic(v)
			}
			h.Counts.InternalErrors.Add(1)
			h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "panic", v)
			if x.wrote {
				x.finish(errInternal)
				x.unref()
				panic(http.ErrAbortHandler) // RST_STREAM: the answer is cut short
			}
			x.status = http.StatusServiceUnavailable
			x.finish(errInternal)
			x.unref()
			h2Fail(w, http.StatusServiceUnavailable)
			return
		}
		x.finish(x.endErr)
		x.unref()
	}()

	if r.Method == http.MethodConnect {
		// limiterd is never a tunnel.
		h.Counts.BadRequests.Add(1)
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH")
		h2Fail(w, http.StatusMethodNotAllowed)
		return
	}
	t, ok := parseTarget([]byte(r.RequestURI))
	var path []byte
	if ok && t.authority == nil {
		path, ok = decodePath(t.path, nil)
	} else {
		ok = false
	}
	if !ok {
		h.Counts.BadRequests.Add(1)
		h2Fail(w, http.StatusBadRequest)
		return
	}
	if r.ContentLength > h.opts.MaxRequestBody {
		h.Counts.TooLarge.Add(1)
		h2Fail(w, http.StatusRequestEntityTooLarge)
		return
	}

	x.start, x.group = start, limiter.ExemptPathGroup
	peer := h.lim.PeerOf(b2s(hc.peerAddr), r.Header)
	x.peerKey, x.peerIP = peer.Key, hc.peerIP
	now := h.now()
	x.d = h.lim.Check(now, limiter.Request{Method: r.Method, Path: b2s(path), Peer: peer})
	d := &x.d
	x.group = d.Group
	if d.OnExemptPath() {
		if !d.Allowed {
			x.status = http.StatusForbidden
			h2Fail(w, http.StatusForbidden)
			return
		}
		h.Counts.ExemptPath.Add(1)
		h.forwardStream(w, r, x, &t)
		return
	}
	h.Lat.Observe(d.Group, h.since(now))
	switch {
	case d.Reason == limiter.ReasonDenied && !d.Allowed:
		x.status = http.StatusForbidden
		h2Fail(w, http.StatusForbidden)
	case d.Reason == limiter.ReasonUnavailable:
		// 503 without rate-limit fields (docs/replies.md, "Other statuses").
		x.status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
		h2Fail(w, http.StatusServiceUnavailable)
	case d.Reason == limiter.ReasonAdaptive && !d.Allowed:
		x.status = http.StatusServiceUnavailable
		h.setStreamFields(w.Header(), d)
		h.shedStream(w, r, d)
	case !d.Allowed:
		x.status = http.StatusTooManyRequests
		h.setStreamFields(w.Header(), d)
		h.rejectStream(w, r, d)
	default:
		h.forwardStream(w, r, x, &t)
	}
}

// newStreamExchange returns an exchange for a stream, from the pool.
func (h *Handler) newStreamExchange(w http.ResponseWriter, r *http.Request) *exchange {
	x, _ := h.exchanges.Get().(*exchange)
	if x == nil {
		x = new(exchange)
		x.keep.up = new(fasthttp.Response)
	}
	if x.keep.out == nil {
		x.keep.out, x.keep.req = new(fasthttp.Response), new(fasthttp.Request)
	}
	x.h, x.out = h, x.keep.out
	x.sw, x.sr = w, r
	x.refs.Store(1)
	return x
}

// streamWriter is what serveStream needs of the HTTP/2 server's
// ResponseWriter: deadlines per write (send_timeout) and per read of the
// request body (client_body_timeout), and flushing.
type streamWriter interface {
	http.ResponseWriter
	http.Flusher
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// forwardStream proxies an admitted stream to the node, as forward does an
// HTTP/1.1 request: a request for the node made from the stream's (its
// fields but those limiterd writes itself), the node's answer copied
// without its hop-by-hop fields, with the rate-limit fields set, its body
// relayed.
func (h *Handler) forwardStream(w http.ResponseWriter, r *http.Request, x *exchange, t *target) {
	req := x.keep.req
	in := &req.Header
	in.SetNoDefaultContentType(true)
	in.SetMethod(r.Method)
	for name, values := range r.Header {
		if droppedIndex([]byte(name)) >= 0 || name == "Host" || name == "Content-Length" {
			continue
		}
		for _, v := range values {
			in.Add(name, v)
		}
	}
	host := r.Host
	if host == "" {
		host = b2s(h.upHost)
	}
	in.SetHost(host)
	in.SetCanonical(hdrXFF, x.peerIP)
	in.SetCanonical(hdrXFH, []byte(host))
	in.SetCanonical(hdrXFP, valueHTTP)
	req.SetRequestURIBytes(t.uri)
	req.UseHostHeader = true
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	if hasBody {
		x.body, x.limit = r.Body, h.opts.MaxRequestBody
		req.SetBodyStream((*streamBody)(x), int(r.ContentLength))
	}
	if h.opts.hook != nil {
		h.opts.hook("upstream")
	}
	err := h.doTimed(x, req, x.keep.up, hasBody)
	if err != nil {
		h.streamUpstreamFailed(w, x, err)
		return
	}
	hd := &x.out.Header
	status := hd.StatusCode()
	if status == http.StatusSwitchingProtocols {
		h.Counts.UpstreamErrors.Add(1)
		h.noteUpstreamError(false, errSwitchingProtocols)
		x.status = http.StatusBadGateway
		h2Fail(w, http.StatusBadGateway)
		return
	}
	if x.d.RefundsOn(status) {
		h.lim.Reduce(h.now(), x.peerKey, x.d.Group)
	}
	x.nodeFields = cleanResponseHeaders(hd)
	x.setRateLimitFields()
	size := hd.ContentLength()
	wh := w.Header()
	for k, v := range hd.All() {
		if len(k) == len("content-length") && eqFold(k, "content-length") {
			continue
		}
		name := string(k)
		wh[name] = append(wh[name], string(trimOWS(v)))
	}
	if size >= 0 {
		wh["Content-Length"] = []string{strconv.Itoa(size)}
	}
	x.status = status
	if sw, ok := w.(streamWriter); ok {
		x.sendDL = h.clock.now().Add(h.opts.SendTimeout)
		_ = sw.SetWriteDeadline(x.sendDL)
	}
	w.WriteHeader(status)
	x.wrote = true
	switch {
	case x.bodyTaken:
		if _, err := w.Write(x.out.Body()); err != nil {
			x.endErr = err
		}
	case x.answerBody:
		x.startAnswer()
		h.relayStream(w, x)
	}
}

// relayStream copies the node's answer body to the stream, each write
// within send_timeout (moved a quarter of it at a time, as moveDeadline
// does), flushed whenever the node has nothing more at hand. A body the
// node breaks off, or a write that fails, resets the stream: the client
// must not take a cut answer for a whole one.
func (h *Handler) relayStream(w http.ResponseWriter, x *exchange) {
	sw, _ := w.(streamWriter)
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf := *bp
	for {
		if h.opts.hook != nil {
			h.opts.hook("relay")
		}
		n, rerr := x.readAnswer(buf)
		if n > 0 {
			if sw != nil {
				if dl, moved := moveDeadline(x.sendDL, h.clock.now(), h.opts.SendTimeout); moved {
					x.sendDL = dl
					_ = sw.SetWriteDeadline(dl)
				}
			}
			if _, err := w.Write(buf[:n]); err != nil {
				x.endErr = err
				panic(http.ErrAbortHandler)
			}
			if sw != nil && !x.answerAtHand() {
				sw.Flush()
			}
		}
		if rerr == io.EOF {
			return
		}
		if rerr != nil {
			x.upErr, x.endErr = rerr, rerr
			panic(http.ErrAbortHandler)
		}
	}
}

// relayBufs are relayStream's buffers.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// streamUpstreamFailed answers a stream the node did not answer, as
// upstreamFailed does a request: the client's own fault first (a body
// over the limit: 413; one that stalled: 408; one that broke: 400), then
// 504 for a timeout and 502 for anything else.
func (h *Handler) streamUpstreamFailed(w http.ResponseWriter, x *exchange, err error) {
	x.out.Header.Reset()
	code := http.StatusBadGateway
	switch {
	case errors.Is(x.bodyErr, errBodyTooLarge):
		h.Counts.TooLarge.Add(1)
		code = http.StatusRequestEntityTooLarge
	case x.bodyErr != nil && isTimeout(x.bodyErr):
		code = http.StatusRequestTimeout
	case x.bodyErr != nil:
		h.log.Debug("client broke off a request body", "err", x.bodyErr)
		code = http.StatusBadRequest
	case isTimeout(err):
		h.Counts.UpstreamTimeouts.Add(1)
		h.noteUpstreamError(true, err)
		code = http.StatusGatewayTimeout
	default:
		h.Counts.UpstreamErrors.Add(1)
		h.noteUpstreamError(false, err)
	}
	x.status = code
	h.setStreamFields(w.Header(), &x.d)
	h2Fail(w, code)
}

// streamBody is a stream's request body as the upstream client reads it:
// each read within client_body_timeout of the previous one, a body
// without Content-Length cut at the limit.
type streamBody exchange

func (b *streamBody) Read(p []byte) (int, error) {
	x := (*exchange)(b)
	if x.bodyErr != nil {
		return 0, x.bodyErr
	}
	if sw, ok := x.sw.(streamWriter); ok {
		if dl, moved := moveDeadline(x.readDL, x.h.clock.now(), x.h.opts.ClientBodyTimeout); moved {
			x.readDL = dl
			_ = sw.SetReadDeadline(dl)
		}
	}
	return x.counted(x.body.Read(p))
}

// setStreamFields writes the rate-limit fields of d on a stream's answer
// (lower-case on the wire, as HTTP/2 writes every name).
func (h *Handler) setStreamFields(wh http.Header, d *limiter.Decision) {
	if d.Limited {
		h.rateLimitFields(d, nil, func(name string, v []byte) {
			wh[headerKey(name)] = []string{string(trimOWS(v))}
		})
	}
}

// trimOWS drops the spaces and tabs that end a field value: HTTP/1.1
// takes them for optional whitespace, not part of the value, while HTTP/2
// holds a value that ends with one malformed (RFC 9113, 8.2.1). The node's
// ratelimit-limit ends with a space (docs/replies.md, "The Arweave
// fields").
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// rejectStream writes the 429 of docs/replies.md ("Rejections"), as
// reject does.
func (h *Handler) rejectStream(w http.ResponseWriter, r *http.Request, d *limiter.Decision) {
	wh := w.Header()
	var b [160]byte
	wh["Retry-After"] = []string{strconv.FormatInt(d.RetryAfter, 10)}
	wh["Cache-Control"] = []string{string(valueNoStore)}
	if prefersJSON(r.Header.Get("Accept")) {
		wh["Content-Type"] = []string{string(valueJSON)}
		body := h.rejectionJSON(b[:0], d)
		wh["Content-Length"] = []string{strconv.Itoa(len(body))}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
		return
	}
	wh["Content-Type"] = []string{string(valueText)}
	wh["Content-Length"] = []string{strconv.Itoa(len(bodyTooMany))}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(bodyTooMany)
}

// h2Fail answers code with http.Error's body, keeping the fields set.
func h2Fail(w http.ResponseWriter, code int) {
	wh := w.Header()
	wh.Del("Content-Encoding")
	body := http.StatusText(code) + "\n"
	wh["Content-Type"] = []string{"text/plain; charset=utf-8"}
	wh["X-Content-Type-Options"] = []string{"nosniff"}
	wh["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// h2Refuse answers a stream over server.max_conns_per_ip as an HTTP/1.1
// connection over it is answered.
func h2Refuse(w http.ResponseWriter) {
	const body = "Too many open connections from your address\n"
	wh := w.Header()
	wh["Content-Type"] = []string{"text/plain; charset=utf-8"}
	wh["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, body)
}
