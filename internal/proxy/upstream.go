package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter/peer"
)

// upstream is the client of the node: a bounded pool of keep-alive
// connections to the one configured address, whatever a request names
// (limiterd is never an open proxy). It writes requests and reads answers
// with fasthttp's Request and Response, but keeps the connections itself
// (rather than through fasthttp.HostClient) so that an exchange knows its
// connection: a drain that runs out of time can cut it off, and a deadline
// is set per read and per write rather than on the whole exchange. While
// every connection is busy, a freed one goes to the waiting request whose
// peer holds the fewest (docs/config.md, "The node's connections"). It is
// safe for concurrent use.
type upstream struct {
	h      *Handler
	addr   string
	tls    *tls.Config // nil for http
	dialer net.Dialer
	max    int // UpstreamMaxConns

	mu sync.Mutex
	// conns counts the connections open or being opened, busy or idle: at
	// most max.
	conns  int
	idle   []*upConn // most recently used last
	open   map[*upConn]struct{}
	closed bool
	reaper *time.Timer // closes idle connections past maxIdleTime (upstream_reap.go)
	// held counts the busy connections (and those being opened) of each
	// peer; waiting holds the requests waiting for one, per peer, in the
	// order they came.
	held    map[peer.Key]int
	waiting map[peer.Key][]*upWaiter
	seq     uint64

	// h2c is the node's client over HTTP/2 (upstream_h2c.go) when
	// server.upstream_protocol is "h2c"; nil for HTTP/1.1.
	h2c *h2cUpstream
}

// upWaiter is a request waiting for a connection to the node: it gets an
// idle connection, or nil, meaning it may open one (counted for it
// already).
type upWaiter struct {
	key peer.Key
	seq uint64 // the order of arrival
	got chan *upConn
}

// upstreamHeaderBytes bounds the head of the node's answers (502 beyond).
const upstreamHeaderBytes = 16 << 10

// maxIdleTime is how long a connection may wait in the pool: below the
// keep-alive timeouts of common servers (nginx 75 s, Cowboy 60 s, Go's
// 3 min), so that a pooled connection is rarely one the node has just
// closed (and then the request is retried once, see do).
const maxIdleTime = 10 * time.Second

func (h *Handler) newUpstream() *upstream {
	u := h.opts.Upstream
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	h.upHost = []byte(u.Host)
	up := &upstream{
		h: h, addr: addr,
		dialer:  net.Dialer{Timeout: h.opts.UpstreamConnectTimeout, KeepAlive: 30 * time.Second},
		max:     h.opts.UpstreamMaxConns,
		open:    map[*upConn]struct{}{},
		held:    map[peer.Key]int{},
		waiting: map[peer.Key][]*upWaiter{},
	}
	if u.Scheme == "https" {
		up.tls = &tls.Config{ServerName: u.Hostname()}
	}
	if h.opts.UpstreamH2C {
		up.newH2C()
	}
	return up
}

// Errors of the upstream client.
var (
	errNoConn         = errors.New("no free connection to the node within server.upstream_connect_timeout")
	errUpstreamClosed = errors.New("the public listener is shut down")
)

// acquire returns a connection to the node for a request of the peer key:
// the most recently used idle one, or a new one when fewer than
// UpstreamMaxConns are open; otherwise it waits, up to
// UpstreamConnectTimeout, for one to be freed and handed to it (handOff).
func (u *upstream) acquire(key peer.Key) (c *upConn, reused bool, err error) {
	now := u.h.clock.now()
	u.mu.Lock()
	for len(u.idle) > 0 {
		c = u.idle[len(u.idle)-1]
		u.idle[len(u.idle)-1] = nil
		u.idle = u.idle[:len(u.idle)-1]
		if now.Sub(c.lastUsed) < maxIdleTime {
			u.hold(c, key)
			u.mu.Unlock()
			return c, true, nil
		}
		u.mu.Unlock()
		u.discard(c)
		u.mu.Lock()
	}
	if u.closed {
		u.mu.Unlock()
		return nil, false, errUpstreamClosed
	}
	if u.conns < u.max {
		u.conns++
		u.held[key]++
		u.mu.Unlock()
		return u.open1(key)
	}
	w := u.wait(key)
	u.mu.Unlock()
	t := time.NewTimer(u.h.opts.UpstreamConnectTimeout)
	defer t.Stop()
	select {
	case c = <-w.got:
	case <-t.C:
		u.mu.Lock()
		q := u.waiting[key]
		if i := slices.Index(q, w); i >= 0 {
			u.setWaiting(key, slices.Delete(q, i, i+1))
			u.mu.Unlock()
			return nil, false, errNoConn
		}
		u.mu.Unlock()
		c = <-w.got // handed one as the wait ended
	}
	if c != nil {
		return c, true, nil
	}
	return u.open1(key)
}

// wait queues a request of the peer key for the next connection freed,
// and counts it. u.mu is held.
func (u *upstream) wait(key peer.Key) *upWaiter {
	u.seq++
	w := &upWaiter{key: key, seq: u.seq, got: make(chan *upConn, 1)}
	u.waiting[key] = append(u.waiting[key], w)
	u.h.Counts.UpstreamWaits.Add(1)
	peers := len(u.held)
	if u.held[key] == 0 {
		peers++
	}
	if share := (u.max + peers - 1) / peers; u.held[key] >= share {
		u.h.Counts.UpstreamWaitsOverShare.Add(1)
	}
	return w
}

// setWaiting sets the queue of the peer key, dropping it when empty. u.mu
// is held.
func (u *upstream) setWaiting(key peer.Key, q []*upWaiter) {
	if len(q) == 0 {
		delete(u.waiting, key)
		return
	}
	u.waiting[key] = q
}

// next takes the waiting request to hand a freed connection to: the first
// of the peer that holds the fewest, the one waiting longest among equals;
// nil when none waits. Each peer thus gets an equal share of a contended
// pool, the rest going to those that want more. u.mu is held.
func (u *upstream) next() *upWaiter {
	var best *upWaiter
	bestHeld := 0
	for key, q := range u.waiting {
		w, n := q[0], u.held[key]
		if best == nil || n < bestHeld || (n == bestHeld && w.seq < best.seq) {
			best, bestHeld = w, n
		}
	}
	if best != nil {
		q := u.waiting[best.key]
		q[0] = nil
		u.setWaiting(best.key, q[1:])
		u.held[best.key]++
	}
	return best
}

// hold counts c busy for the peer key. u.mu is held.
func (u *upstream) hold(c *upConn, key peer.Key) {
	c.peer, c.busy = key, true
	u.held[key]++
}

// unhold uncounts a busy connection. u.mu is held.
func (u *upstream) unhold(c *upConn) {
	if !c.busy {
		return
	}
	c.busy = false
	if n := u.held[c.peer] - 1; n > 0 {
		u.held[c.peer] = n
	} else {
		delete(u.held, c.peer)
	}
}

// open1 opens a connection for the peer key, counted for it already.
func (u *upstream) open1(key peer.Key) (*upConn, bool, error) {
	nc, err := u.dial()
	if err != nil {
		u.mu.Lock()
		u.conns--
		if n := u.held[key] - 1; n > 0 {
			u.held[key] = n
		} else {
			delete(u.held, key)
		}
		u.handOff(nil)
		u.mu.Unlock()
		return nil, false, err
	}
	c := &upConn{Conn: nc, h: u.h, peer: key, busy: true}
	c.br = bufio.NewReaderSize(c, upstreamHeaderBytes)
	c.bw = bufio.NewWriterSize(c, 4<<10)
	u.mu.Lock()
	u.open[c] = struct{}{}
	u.mu.Unlock()
	return c, false, nil
}

// handOff gives a connection just freed, c, to the next waiting request;
// with c nil, the room for one more: the request opens it. It reports
// whether a request took it. u.mu is held.
func (u *upstream) handOff(c *upConn) bool {
	w := u.next()
	if w == nil {
		return false
	}
	if c == nil {
		u.conns++
	} else {
		c.peer, c.busy = w.key, true
	}
	w.got <- c
	return true
}

func (u *upstream) dial() (net.Conn, error) {
	nc, err := u.dialer.Dial("tcp", u.addr)
	if err != nil || u.tls == nil {
		return nc, err
	}
	tc := tls.Client(nc, u.tls)
	ctx, cancel := context.WithTimeout(context.Background(), u.h.opts.UpstreamConnectTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// release puts a connection whose exchange ended cleanly back in the
// pool, or hands it to a waiting request.
func (u *upstream) release(c *upConn) {
	c.lastUsed = u.h.clock.now()
	u.mu.Lock()
	u.unhold(c)
	if !u.closed {
		if !u.handOff(c) {
			u.idle = append(u.idle, c)
			u.armReaper(c.lastUsed)
		}
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	u.discard(c)
}

// discard closes a connection, busy or idle, and gives its room to a
// waiting request.
func (u *upstream) discard(c *upConn) {
	u.mu.Lock()
	delete(u.open, c)
	u.unhold(c)
	u.conns--
	if !u.closed {
		u.handOff(nil)
	}
	u.mu.Unlock()
	_ = c.Conn.Close()
}

// cutAll cuts off every exchange with the node still running (a drain
// that ran out of time).
func (u *upstream) cutAll() {
	if u.h2c != nil {
		u.h2c.cancel()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.open {
		c.cut()
	}
}

// closeIdle closes the pooled connections, and every one released from
// now on.
func (u *upstream) closeIdle() {
	if u.h2c != nil {
		u.h2c.tr.CloseIdleConnections()
	}
	u.mu.Lock()
	idle := u.idle
	u.idle, u.closed = nil, true
	u.mu.Unlock()
	for _, c := range idle {
		u.discard(c)
	}
}

// do sends req to the node and reads the head of its answer into resp.
// When the answer has a body, x.upBody streams it and owns the connection
// until closed; otherwise the connection is back in the pool when do
// returns. A request without a body whose reused connection turns out
// closed before a byte of the answer (the node closed it while pooled) is
// sent once more on a new connection.
func (u *upstream) do(x *exchange, req *fasthttp.Request, resp *fasthttp.Response, hasBody bool) error {
	if u.h2c != nil {
		return u.h2c.do(x, req, hasBody)
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := u.acquire(x.peerKey)
		if err != nil {
			return err
		}
		c.x = x
		err = u.roundTrip(x, c, req, resp)
		if err == nil {
			return nil
		}
		c.x = nil
		u.discard(c)
		if attempt > 0 || !reused || hasBody || !errors.Is(err, io.EOF) {
			return err
		}
	}
}

// roundTrip writes req on c and reads the answer's head. A body of known
// length that came whole with the head, at most smallBody, is taken into
// the client's answer at once (like a buffering proxy: the node's
// connection is free again when roundTrip returns); a larger one is
// streamed (x.upBody).
func (u *upstream) roundTrip(x *exchange, c *upConn, req *fasthttp.Request, resp *fasthttp.Response) error {
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return err
	}
	// The head is read straight into the client's answer.
	hd := &x.out.Header
	resp.SkipBody = req.Header.IsHead()
	if err := readHead(hd, c.br); err != nil {
		return err
	}
	if st := hd.StatusCode(); !resp.SkipBody && st != http.StatusNoContent && st != http.StatusNotModified && st >= 200 {
		size := hd.ContentLength()
		if size < 0 || size > smallBody || c.br.Buffered() < size {
			hd.CopyTo(&resp.Header) // the stream's framing
			resp.StreamBody = true
			if err := resp.ReadBody(c.br, 0); err != nil {
				return err
			}
			x.upBody = upBody{u: u, c: c, resp: resp, s: resp.BodyStream()}
			x.answerBody = true
			return nil
		}
		b, _ := c.br.Peek(size)
		x.out.SetBody(b)
		_, _ = c.br.Discard(size)
		x.bodyTaken = true
	}
	c.x = nil
	if !hd.ConnectionClose() && c.br.Buffered() == 0 {
		u.release(c)
	} else {
		u.discard(c)
	}
	return nil
}

// smallBody is the largest body taken whole with the head: the node's
// answers are mostly small, and such a one is answered like any buffered
// answer (one write of head and body, the node's connection and the
// in-flight slot freed at once) rather than streamed.
const smallBody = 16 << 10

// errTooManyInterim: the node sent informational answers without end.
var errTooManyInterim = errors.New("the node sent more than 100 informational (1xx) answers")

// readHead reads the head of an answer, past the informational ones
// (100 Continue, 103 Early Hints) but for 101.
func readHead(h *fasthttp.ResponseHeader, br *bufio.Reader) error {
	for n := 0; ; n++ {
		if err := h.Read(br); err != nil {
			return err
		}
		if st := h.StatusCode(); st >= 200 || st == http.StatusSwitchingProtocols {
			return nil
		}
		if n == 100 {
			return errTooManyInterim
		}
	}
}

// upBody is the body of the node's answer: it reads the answer's stream,
// and when closed returns the connection to the pool if the body was read
// to its end and the exchange ended cleanly, or closes it. Over h2c it
// has no connection (c nil): s is the stream's body, closed with it.
type upBody struct {
	u    *upstream
	c    *upConn
	resp *fasthttp.Response
	s    io.Reader
	eof  bool
}

func (b *upBody) Read(p []byte) (int, error) {
	n, err := b.s.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// cut ends the node's side from another goroutine: a read in progress
// returns at once, and the connection is closed when the body is.
func (b *upBody) cut() {
	if b.c != nil {
		b.c.cut()
		return
	}
	if s, ok := b.s.(*h2cBody); ok {
		s.cancel()
	}
}

// buffered returns how many bytes of the body (and maybe of its framing)
// were read ahead with the head.
func (b *upBody) buffered() int {
	if b.c == nil {
		return 0
	}
	return b.c.br.Buffered()
}

// CloseWithError ends the body: err is nil when it was passed on whole.
func (b *upBody) CloseWithError(err error) error {
	if b.c == nil {
		if c, ok := b.s.(io.Closer); ok {
			_ = c.Close()
		}
		return nil
	}
	b.c.x = nil
	reusable := err == nil && b.eof && !b.resp.ConnectionClose()
	_ = b.resp.CloseBodyStream()
	if reusable && b.c.br.Buffered() == 0 {
		b.u.release(b.c)
	} else {
		b.u.discard(b.c)
	}
	return nil
}

// upConn is a connection to the node with a deadline on every wait: the
// first byte of an answer within UpstreamHeaderTimeout of the request's
// last write, then each
// read of the body within UpstreamReadTimeout of the previous one, and each
// write within UpstreamReadTimeout. It carries one exchange at a time, x,
// so its fields need no lock; cut may be called from another goroutine.
type upConn struct {
	net.Conn
	h        *Handler
	peer     peer.Key      // whose exchange it carries, while busy
	busy     bool          // counted in upstream.held (upstream.mu)
	br       *bufio.Reader // reads c, the answers' heads and bodies
	bw       *bufio.Writer // writes c, the requests
	x        *exchange     // the exchange on it, nil while pooled
	lastUsed time.Time
	// awaiting is set by a write: the next read waits for an answer's
	// first byte, until firstDL.
	awaiting, firstSet bool
	firstDL            time.Time
	readDL, writeDL    time.Time
	cutOff             atomic.Bool
}

// errCut is the error of an exchange with the node cut off because a
// drain ran out of time.
var errCut = errors.New("the exchange with the node was cut off: the drain ran out of time")

// cut ends the exchange on c from another goroutine (a drain that ran
// out): its blocked read returns at once.
func (c *upConn) cut() {
	c.cutOff.Store(true)
	_ = c.Conn.SetDeadline(time.Unix(1, 0))
}

func (c *upConn) Write(p []byte) (int, error) {
	c.awaiting, c.firstSet = true, false
	// Moved about once a quarter of the timeout, not on every write.
	if dl, moved := moveDeadline(c.writeDL, c.h.clock.now(), c.h.opts.UpstreamReadTimeout); moved {
		c.writeDL = dl
		if err := c.Conn.SetWriteDeadline(c.writeDL); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *upConn) Read(p []byte) (int, error) {
	if c.awaiting {
		return c.readFirst(p)
	}
	if c.cutOff.Load() {
		return 0, errCut
	}
	if dl, moved := moveDeadline(c.readDL, c.h.clock.now(), c.h.opts.UpstreamReadTimeout); moved {
		c.readDL = dl
		if err := c.Conn.SetReadDeadline(c.readDL); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.cutOff.Load() {
		err = errCut
	}
	return n, err
}

// readFirst waits for the first byte of an answer, up to
// UpstreamHeaderTimeout, whatever the client does meanwhile: a client that
// went away does not end the node's work, so its slot is held until the
// node answers (docs/limiting.md, "In-flight release").
func (c *upConn) readFirst(p []byte) (int, error) {
	if !c.firstSet {
		c.firstSet = true
		c.firstDL = c.h.clock.now().Add(c.h.opts.UpstreamHeaderTimeout)
	}
	if c.cutOff.Load() {
		return 0, errCut
	}
	if !c.firstDL.Equal(c.readDL) {
		c.readDL = c.firstDL
		if err := c.Conn.SetReadDeadline(c.firstDL); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		// The answer has begun: from now on, the body's idle bound.
		c.awaiting = false
	}
	if err != nil && c.cutOff.Load() {
		err = errCut
	}
	return n, err
}

// isTimeout reports whether an error of the upstream client is a
// timeout: connecting, waiting for a free connection, or waiting for the
// answer.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, errNoConn) || errors.Is(err, fasthttp.ErrTimeout) ||
		(errors.As(err, &ne) && ne.Timeout())
}
