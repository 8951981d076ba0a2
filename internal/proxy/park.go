package proxy

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// An idle keep-alive connection served by fasthttp keeps a goroutine, its
// stack grown by the request it served, a read buffer and a request
// context: some 16 KiB, 160 MiB for 10 000 idle peers. So the server
// keeps a connection for parkAfter after a request only; then it is
// parked until its next request begins, holding nothing but the socket:
// on Linux in an epoll set of the Handler's own, watched by one goroutine
// (park_linux.go), elsewhere by a small goroutine of its own
// (park_other.go). idle_timeout counts from the end of the request before.
const parkAfter = 100 * time.Millisecond

// serve serves c with the server until it is done with it, then parks it
// when its keep-alive wait ended without a request.
func (h *Handler) serve(c conn) {
	_ = h.srv.ServeConn(c)
	if c.park {
		c.park = false
		h.park(c)
	}
}

// park parks c, waiting for its next request (until idle_timeout).
func (h *Handler) park(c conn) {
	c.waiting(c.l.clock.now().UnixNano())
	if c.claimed() {
		c.closeNow()
		return
	}
	if p := h.parker(); p != nil && p.park(c, time.Now().Add(h.opts.IdleTimeout-h.parkAfter)) {
		return
	}
	go h.parkAlone(c)
}

// parkAlone waits for the next request on c in a goroutine of its own,
// and hands c back to the server with the byte it read.
func (h *Handler) parkAlone(c conn) {
	_ = c.TCPConn.SetReadDeadline(time.Now().Add(h.opts.IdleTimeout - h.parkAfter))
	n, _ := c.TCPConn.Read(c.first[:])
	if n == 0 {
		// The client closed it, idle_timeout passed, or a drain closed it.
		c.closeNow()
		return
	}
	if !c.busy() {
		c.closeNow() // a drain claimed it
		return
	}
	c.pending = true
	h.serve(c)
}

// resume hands a parked connection whose next request has begun (or
// which the client closed) back to the server.
func (h *Handler) resume(c conn) {
	if !c.busy() {
		c.closeNow() // a drain claimed it
		return
	}
	go h.serve(c)
}

// connState follows fasthttp's view of a connection: waiting while it
// waits for a request. A new connection waits until its first request
// begins (set at accept): a drain closes it once it has waited
// drainIdleAfter rather than wait read_header_timeout for a client that
// may never send one. A request that begins on a connection a drain
// claimed is answered 503 unserved (Handler.handle).
func connState(nc net.Conn, st fasthttp.ConnState) {
	if c, ok := nc.(conn); ok {
		switch st {
		case fasthttp.StateIdle, fasthttp.StateNew:
			c.waiting(c.l.clock.now().UnixNano())
		case fasthttp.StateActive:
			c.busy()
		}
	}
}
