package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// exchange is one proxied request: its decision (and in-flight slot), the
// request body going up and the answer coming down. The handler owns it
// until it hands the answer's body to fasthttp; then fasthttp does (it
// closes the relay once, when the body is written, fails, or is dropped),
// or the goroutine of a hijacked connection does. Whoever ends it calls
// finish, and only the first call counts.
type exchange struct {
	h *Handler
	// ctx is the HTTP/1.1 request's, nil for an HTTP/2 stream; out is the
	// answer being made, the head of the node's read into it (ctx's
	// Response, or the stream's own).
	ctx *fasthttp.RequestCtx
	out *fasthttp.Response
	d   limiter.Decision
	// nodeFields is set when the node's answer carries a field named
	// ratelimit…: ours must replace it.
	nodeFields bool

	// handedOff is set when the answer's body was handed to fasthttp or
	// to a hijack handler: the handler no longer finishes the exchange.
	handedOff bool
	done      atomic.Bool
	// refs counts who still uses the exchange (the handler, the relay
	// fasthttp holds); the last one gives it back to the Handler's pool.
	// An exchange handed to a hijack handler is never given back.
	refs atomic.Int32

	// The request body: the client's stream, what was read of it, the
	// limit for a body without Content-Length, the client's read deadline
	// and the error that stopped it.
	body    io.Reader
	read    int64
	limit   int64
	readDL  time.Time
	bodyErr error

	// The answer: its body stream, and the node's error that cut it
	// short.
	upBody     upBody
	answerBody bool // upBody is the answer's body, until finish
	// ans buffers upBody for the client (startAnswer); nil when it is read
	// as the client takes it. sides counts the sides of such an exchange
	// still going (the node's, the client's): the last releases the slot.
	ans       *answer
	sides     atomic.Int32
	bodyTaken bool // the answer's body was taken whole with its head
	upErr     error

	// hijack: 0 while a hijack handler has neither started nor been given
	// up; 1 once it runs; 2 once the watchdog ended the exchange instead.
	hijack atomic.Int32

	// start is when the handler began, group the exchange's (or
	// limiter.ExemptPathGroup), status the answer's: what noteExchange
	// records. start is zero until the request is classified; status is
	// zero until it is answered.
	start  time.Time
	group  limiter.GroupID
	status int

	framing framing
	peer    peerHeaders
	peerKey peer.Key
	// keep is what the exchange keeps across the pool.
	keep struct {
		up *fasthttp.Response // the node's answer, when streamed
		// out and req are an HTTP/2 stream's answer and request for the
		// node, made at its first stream.
		out *fasthttp.Response
		req *fasthttp.Request
		// fields is where the rate-limit fields are formatted, so that
		// formatting them allocates nothing.
		fields []byte
	}
	// peerAddr and peerIP are the TCP peer as text (the connection's).
	peerAddr, peerIP []byte

	// An HTTP/2 stream's: its writer and request, the deadline of its
	// writes, whether its head was written, and the error that ended it.
	sw     http.ResponseWriter
	sr     *http.Request
	sendDL time.Time
	wrote  bool
	endErr error
}

// Errors that end an exchange.
var (
	// errBodyTooLarge: a request body without Content-Length ran past
	// server.max_request_body (413).
	errBodyTooLarge = errors.New("request body larger than server.max_request_body")
	// errHijackLost: fasthttp never started the hijack handler that was to
	// write an answer to an HTTP/1.0 client (the connection failed first).
	errHijackLost = errors.New("the connection failed before its answer was written")
	// errInternal: a panic of limiterd's own cut an answer short.
	errInternal = errors.New("internal error")
	// errClientGone: an HTTP/2 stream was abandoned (reset by the client,
	// its connection lost) while its answer was written.
	errClientGone = errors.New("the client went away or stopped reading")
	// errSwitchingProtocols: the node answered 101, which limiterd never
	// asks for (Upgrade is not forwarded).
	errSwitchingProtocols = errors.New("the node answered 101 Switching Protocols to a request without Upgrade")
)

// newExchange returns an exchange for a request of ctx, from the pool.
func (h *Handler) newExchange(ctx *fasthttp.RequestCtx) *exchange {
	x, _ := h.exchanges.Get().(*exchange)
	if x == nil {
		x = new(exchange)
		x.keep.up = new(fasthttp.Response)
	}
	x.h, x.ctx, x.out = h, ctx, &ctx.Response
	x.refs.Store(1)
	return x
}

// unref drops one use of x; the last gives it back to the pool, cleared
// (but for what it keeps, reset).
func (x *exchange) unref() {
	if x.refs.Add(-1) != 0 {
		return
	}
	h, keep := x.h, x.keep
	keep.up.Reset()
	if keep.out != nil {
		keep.out.Reset()
		keep.req.Reset()
	}
	*x = exchange{}
	x.keep = keep
	h.exchanges.Put(x)
}

// finish ends the client's side of the exchange once. Then the node's side
// ends too, if it has not: a buffered answer's reading from the node stops
// (answer.clientEnded), or the node's stream is closed (its connection
// pooled again only when the body was read whole and err is nil). The
// in-flight slot is released once both have ended.
func (x *exchange) finish(err error) {
	if !x.done.CompareAndSwap(false, true) {
		return
	}
	switch {
	case x.ans != nil:
		x.answerBody = false
		x.ans.clientEnded()
		x.sideEnded()
	case x.answerBody:
		_ = x.upBody.CloseWithError(err)
		x.answerBody = false
		x.d.Release()
	default:
		x.d.Release()
	}
	x.h.noteExchange(x)
	if err == nil {
		return
	}
	switch {
	case errors.Is(err, errInternal):
	case x.upErr != nil:
		// The node broke off or stalled in the middle of a body: the
		// client's connection is closed with the answer cut short.
		if isTimeout(x.upErr) {
			x.h.Counts.UpstreamTimeouts.Add(1)
		} else {
			x.h.Counts.UpstreamErrors.Add(1)
		}
		x.h.log.Debug("upstream broke off an answer", "err", x.upErr)
	default:
		// The client went away or stopped reading (send_timeout).
		x.h.log.Debug("client broke off an answer", "err", err)
	}
}

// answered notes the status of the answer for noteExchange, unless it is
// noted already or the request was never classified.
func (x *exchange) answered() {
	if x.status == 0 && !x.start.IsZero() {
		x.status = x.out.StatusCode()
	}
}

// reqBody is the request body as the HostClient reads it from the client:
// each read within ClientBodyTimeout of the previous one, and a body
// without Content-Length cut at the limit.
type reqBody exchange

func (b *reqBody) Read(p []byte) (int, error) {
	x := (*exchange)(b)
	if x.bodyErr != nil {
		return 0, x.bodyErr
	}
	if dl, moved := moveDeadline(x.readDL, x.h.clock.now(), x.h.opts.ClientBodyTimeout); moved {
		x.readDL = dl
		_ = x.ctx.SetReadDeadline(x.readDL)
	}
	return x.counted(x.body.Read(p))
}

// counted is a read of n bytes of the client's body, err its error:
// past the exchange's limit the body is refused; an error other than EOF
// is kept, so that every later read returns it.
func (x *exchange) counted(n int, err error) (int, error) {
	x.read += int64(n)
	if x.read > x.limit {
		x.bodyErr = errBodyTooLarge
		return 0, x.bodyErr
	}
	if err != nil && err != io.EOF {
		x.bodyErr = err
	}
	return n, err
}

// relay is the answer's body as fasthttp writes it to the client (each
// write within SendTimeout, see conn.Write; no bound on the
// whole answer, which may be a long transfer to a slow peer), and the
// exchange finished when fasthttp closes it.
type relay exchange

func (r *relay) Read(p []byte) (n int, err error) {
	x := (*exchange)(r)
	defer func() {
		// fasthttp would recover a panic here, but close the relay without
		// saying why: count it as limiterd's own error, end the answer.
		if v := recover(); v != nil {
			x.h.Counts.InternalErrors.Add(1)
			x.h.log.Error("internal error while relaying an answer", "panic", v)
			n, err = 0, errInternal
		}
	}()
	if x.h.opts.hook != nil {
		x.h.opts.hook("relay")
	}
	n, err = x.readAnswer(p)
	if err != nil && err != io.EOF {
		x.upErr = err
	}
	return n, err
}

// CloseWithError is fasthttp's call when the body was written (err nil),
// its write failed (err says why: the client went away or stopped
// reading, or the node broke off), or the answer was dropped unwritten.
func (r *relay) CloseWithError(err error) error {
	x := (*exchange)(r)
	if err == nil && x.upErr != nil {
		err = x.upErr
	}
	x.finish(err)
	x.unref()
	return nil
}

// streamHTTP10 writes an answer of unknown length to an HTTP/1.0 client,
// which cannot read chunked framing (fasthttp would send it chunked):
// the head, then the body until the node's ends, then the connection is
// closed. The connection is hijacked for it; should fasthttp fail before
// the hijack handler starts, a watchdog ends the exchange.
func (h *Handler) streamHTTP10(ctx *fasthttp.RequestCtx, x *exchange) {
	x.refs.Add(1) // never given back: the hijack handler and the watchdog hold it
	ctx.Response.SetConnectionClose()
	ctx.Response.Header.SetContentLength(-2) // neither Content-Length nor chunked
	head := append([]byte(nil), ctx.Response.Header.Header()...)
	watchdog := time.AfterFunc(h.opts.SendTimeout+time.Second, func() {
		if x.hijack.CompareAndSwap(0, 2) {
			x.finish(errHijackLost)
		}
	})
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		watchdog.Stop()
		if !x.hijack.CompareAndSwap(0, 1) {
			return
		}
		// c's writes have the send timeout (conn.Write).
		buf := make([]byte, 32<<10)
		_, err := c.Write(head)
		for err == nil {
			n, rerr := x.readAnswer(buf)
			if n > 0 {
				_, err = c.Write(buf[:n])
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				x.upErr, err = rerr, rerr
			}
		}
		x.finish(err)
	})
}

// tooLarge answers 413 to a request whose body is over the limit, then
// reads and discards what the client still sends, for a while, before
// closing: fasthttp would close at once, and a client still sending would
// get a reset instead of the answer (fasthttp issue #1348).
func (h *Handler) tooLarge(ctx *fasthttp.RequestCtx) {
	h.Counts.TooLarge.Add(1)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		_ = c.SetWriteDeadline(time.Now().Add(h.opts.SendTimeout))
		if _, err := io.WriteString(c, tooLargeAnswer); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c, lingerBytes)
	})
}

// The lingering close of a 413: at most this long and this much.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 256 << 20
)

const tooLargeAnswer = "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"X-Content-Type-Options: nosniff\r\nContent-Length: 25\r\nConnection: close\r\n\r\nRequest Entity Too Large\n"
