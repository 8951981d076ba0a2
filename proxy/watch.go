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
// upstream_header_timeout ends. watchClient closes that gap: after
// watchAfter without an answer it looks at the client's socket every
// watchEvery (a non-consuming peek) and, once the client has closed its
// end, cuts the exchange's connection to the node off, which ends the
// exchange and releases the slot.
const (
	watchAfter = 500 * time.Millisecond
	watchEvery = 200 * time.Millisecond
)

// The states of an exchange while the node answers.
const (
	stateWaiting  int32 = iota // the request is on its way, no answer yet
	stateAnswered              // the head of the answer arrived (or failed)
	stateCut                   // watchClient cut the exchange off
)

// watchClient starts watching the client of x while it waits for the
// node; the returned timer is stopped, and x's state set to answered, when
// the head of the answer arrives (see answered).
func (x *exchange) watchClient(c net.Conn) *time.Timer {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	return time.AfterFunc(watchAfter, func() {
		rc, err := sc.SyscallConn()
		if err != nil {
			return
		}
		for x.state.Load() == stateWaiting {
			// While the request body streams, its reader holds the socket
			// (and sees a client that went away itself).
			if !x.bodyPending.Load() && peerClosed(rc) {
				x.clientGone.Store(true)
				if x.state.CompareAndSwap(stateWaiting, stateCut) {
					if uc := x.upConn.Load(); uc != nil {
						uc.cut()
					}
				}
				return
			}
			time.Sleep(watchEvery)
		}
	})
}

// answered ends the watch of x: false when watchClient cut it off
// meanwhile.
func (x *exchange) answered(t *time.Timer) bool {
	if t != nil {
		t.Stop()
	}
	return x.state.CompareAndSwap(stateWaiting, stateAnswered) || x.state.Load() == stateAnswered
}
