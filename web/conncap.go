package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// adminConns caps the admin listener's open connections
// (admin.max_conns): at the cap, a new connection takes the slot of the
// keep-alive connection idle the longest, which is closed (as nginx does
// when it runs short of connections); with none idle, it is answered 503
// and closed. Without a cap, a client that opened connections and left
// them idle held each for the idle timeout (120 s), at about 16 KiB
// apiece. It is safe for concurrent use.
type adminConns struct {
	max int

	refused, idleClosed atomic.Uint64

	mu   sync.Mutex
	open int
	idle map[*capConn]time.Time // idle keep-alive connections, since when
}

func newAdminConns(max int) *adminConns {
	return &adminConns{max: max, idle: map[*capConn]time.Time{}}
}

// capListener is the admin listener's net.Listener under adminConns.
type capListener struct {
	net.Listener
	conns *adminConns
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
			refuseAdmin(c, l.conns.max)
			continue
		}
		return cc, nil
	}
}

// admit takes a slot for a new connection: a free one, or that of the
// connection idle the longest (returned, to be closed), or none (ok false).
func (a *adminConns) admit() (ok bool, evict *capConn) {
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
func (a *adminConns) release(c *capConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.idle, c)
	if !c.handedOver {
		a.open--
	}
}

// state follows the server's connections (http.Server.ConnState): those
// waiting for their next request are the ones a new connection may
// displace.
func (a *adminConns) state(nc net.Conn, st http.ConnState) {
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
}

// capConn is an admitted connection; closing it (once) gives back its
// slot.
type capConn struct {
	net.Conn
	conns *adminConns
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

// refuseAdmin answers a connection over admin.max_conns with 503 and
// closes it.
func refuseAdmin(c net.Conn, max int) {
	body := "limiterd: the admin listener has its " + strconv.Itoa(max) + " connections (admin.max_conns) in use; try again\n"
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	_ = c.Close()
}
