package web

// The admin listener's connection cap (admin.max_conns): at the cap a new
// connection takes the slot of the keep-alive connection idle the longest,
// which is closed (as nginx does when it runs short of connections); with
// none idle, it is answered 503 and closed.

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// connCap counts and caps a listener's connections (Listener) as an
// http.Server serves them (State, its ConnState hook). Without a cap, a
// client that opened connections and left them idle held each for the
// idle timeout (120 s), at about 16 KiB apiece. It is safe for concurrent
// use.
type connCap struct {
	max int

	refused, idleClosed atomic.Uint64

	mu   sync.Mutex
	open int
	idle map[*capConn]time.Time // idle keep-alive connections, since when
	// fresh holds the connections that have not begun a request yet.
	fresh map[*capConn]struct{}
}

// newConnCap returns a connCap capping at max open connections; 0: no cap (they are
// still counted).
func newConnCap(max int) *connCap {
	return &connCap{max: max, idle: map[*capConn]time.Time{}, fresh: map[*capConn]struct{}{}}
}

// Listener returns ln under the cap: give it to the http.Server whose
// ConnState is State.
func (a *connCap) Listener(ln net.Listener) net.Listener { return capListener{Listener: ln, conns: a} }

// Open returns the connections open now.
func (a *connCap) Open() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.open
}

// Refused returns how many connections were answered 503 at the cap.
func (a *connCap) Refused() uint64 { return a.refused.Load() }

// IdleClosed returns how many idle connections were closed to make room.
func (a *connCap) IdleClosed() uint64 { return a.idleClosed.Load() }

// capListener is a net.Listener under connCap.
type capListener struct {
	net.Listener
	conns *connCap
}

// Accept returns the next connection the cap lets in; one it refuses is
// answered and closed here, and Accept waits for the next.
func (l capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &capConn{Conn: c, conns: l.conns}
		ok, evict := l.conns.admit()
		if evict != nil {
			evict.Conn.Close() // its server goroutine ends on the read error
		}
		if !ok {
			refuse(c, l.conns.max)
			continue
		}
		return cc, nil
	}
}

// admit takes a slot for a new connection: a free one, or that of the
// connection idle the longest (returned, to be closed), or none (ok false).
func (a *connCap) admit() (ok bool, evict *capConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.max <= 0 || a.open < a.max {
		a.open++
		return true, nil
	}
	var at time.Time
	for c, t := range a.idle {
		if evict == nil || t.Before(at) {
			evict, at = c, t
		}
	}
	if evict == nil {
		a.refused.Add(1)
		return false, nil
	}
	delete(a.idle, evict)
	evict.handedOver = true // its slot is the new connection's
	a.idleClosed.Add(1)
	return true, evict
}

// release gives back c's slot, unless it was handed over.
func (a *connCap) release(c *capConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.idle, c)
	delete(a.fresh, c)
	if !c.handedOver {
		a.open--
	}
}

// State follows the server's connections (its http.Server.ConnState):
// those waiting for their next request are the ones a new connection may
// displace.
func (a *connCap) State(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*capConn)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st == http.StateIdle && !c.handedOver && !c.closed {
		a.idle[c] = time.Now()
	} else {
		delete(a.idle, c)
	}
	if st == http.StateNew && !c.closed {
		a.fresh[c] = struct{}{}
	} else {
		delete(a.fresh, c)
	}
}

// hurryFresh gives the connections that have not begun a request until
// deadline to begin one: past it their read fails and the server closes
// them.
func (a *connCap) hurryFresh(deadline time.Time) {
	a.mu.Lock()
	fresh := make([]*capConn, 0, len(a.fresh))
	for c := range a.fresh {
		fresh = append(fresh, c)
	}
	a.mu.Unlock()
	for _, c := range fresh {
		_ = c.Conn.SetReadDeadline(deadline)
	}
}

// capConn is an admitted connection; closing it (once) gives back its
// slot.
type capConn struct {
	net.Conn
	conns *connCap
	once  sync.Once
	// handedOver and closed are guarded by conns.mu.
	handedOver, closed bool
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		c.conns.mu.Lock()
		c.closed = true
		c.conns.mu.Unlock()
		c.conns.release(c)
	})
	return c.Conn.Close()
}

// refuse answers a connection over the cap with 503 and closes it.
func refuse(c net.Conn, max int) {
	body := "limiterd: the admin listener has its " + strconv.Itoa(max) + " connections (admin.max_conns) in use; try again\n"
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	_ = c.Close()
}
