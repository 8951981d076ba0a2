package proxy

import (
	"net"
	"syscall"
	"time"
)

// fasthttp does not read a client's connection while its handler runs, so
// it cannot tell that the client went away while the node has not
// answered yet (a streamed answer's next write tells, and so does a
// request body's next read). Without more, such a request would hold its
// in-flight slot, and a connection to the node, until the node answers or
// upstream_header_timeout ends. So the wait for the node's first byte is
// cut in slices of watchEvery: at the end of each, the handler's goroutine
// (the only one touching the client's connection meanwhile) looks at the
// client's socket without consuming anything, and gives up on the
// exchange if the client has closed its end. An answer within the first
// slice costs nothing more than the one read deadline it needs anyway.
const watchEvery = 250 * time.Millisecond

// clientWatch looks at a client's socket.
type clientWatch struct {
	c  net.Conn
	rc syscall.RawConn // got at the first look
}

// watch returns the watch of the client connection c.
func watch(c net.Conn) clientWatch { return clientWatch{c: c} }

// gone reports whether the client has closed its end (or reset it).
func (w *clientWatch) gone() bool {
	if w.rc == nil {
		sc, ok := w.c.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		w.rc = rc
	}
	return peerClosed(w.rc)
}
