package proxy

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limiterd/limiterd/insight"
)

// connLimiter is the public listener's gate: it counts open client
// connections in total and per client address, refuses those over
// server.max_conns (503) or server.max_conns_per_ip (429) at accept, and
// can close every connection still open when a drain runs out of time. A
// client address is keyed as the limiter keys peers (IPv6 by its
// ipv6_prefix, so that an attacker owning a /64 is one address); trusted
// proxies and exempt peers are not capped per address, since a proxy
// carries many clients. It is safe for concurrent use.
type connLimiter struct {
	net.Listener
	maxConns, maxPerIP int
	sendTimeout        time.Duration
	// uncapped reports whether an address is free of the per-address cap,
	// and gives the IPv6 prefix to key the others by.
	policy func(a netip.Addr) (uncapped bool, ipv6Prefix int)
	counts *insight.ProxyCounters

	mu    sync.Mutex
	open  map[*limitedConn]struct{}
	perIP map[netip.Addr]int
}

func newConnLimiter(ln net.Listener, maxConns, maxPerIP int, sendTimeout time.Duration, counts *insight.ProxyCounters,
	policy func(netip.Addr) (bool, int)) *connLimiter {
	return &connLimiter{
		Listener: ln, maxConns: maxConns, maxPerIP: maxPerIP, sendTimeout: sendTimeout, policy: policy, counts: counts,
		open: map[*limitedConn]struct{}{}, perIP: map[netip.Addr]int{},
	}
}

// Accept returns the next connection within the caps; a connection over
// them is answered and closed here, and Accept waits for the next.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := l.key(c)
		l.mu.Lock()
		switch {
		case l.maxConns > 0 && len(l.open) >= l.maxConns:
			l.mu.Unlock()
			l.counts.ConnsRefusedTotal.Add(1)
			refuse(c, tooManyConns)
			continue
		case keyed && l.maxPerIP > 0 && l.perIP[key] >= l.maxPerIP:
			l.mu.Unlock()
			l.counts.ConnsRefusedPerIP.Add(1)
			refuse(c, tooManyFromAddr)
			continue
		}
		lc := &limitedConn{l: l, key: key, keyed: keyed}
		if tc, ok := c.(*net.TCPConn); ok {
			lc.TCPConn = tc
		} else {
			lc.other = c
		}
		l.open[lc] = struct{}{}
		if keyed {
			l.perIP[key]++
		}
		l.mu.Unlock()
		return lc.conn(), nil
	}
}

// key returns the per-address key of c, keyed false when c is not capped
// per address.
func (l *connLimiter) key(c net.Conn) (netip.Addr, bool) {
	if l.maxPerIP <= 0 {
		return netip.Addr{}, false
	}
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a := tcp.AddrPort().Addr().Unmap().WithZone("")
	uncapped, bits := l.policy(a)
	if uncapped {
		return netip.Addr{}, false
	}
	if a.Is6() && bits > 0 && bits < 128 {
		if p, err := a.Prefix(bits); err == nil {
			a = p.Addr()
		}
	}
	return a, true
}

// forget removes a closed connection from the counts.
func (l *connLimiter) forget(c *limitedConn) {
	l.mu.Lock()
	delete(l.open, c)
	if c.keyed {
		if n := l.perIP[c.key] - 1; n > 0 {
			l.perIP[c.key] = n
		} else {
			delete(l.perIP, c.key)
		}
	}
	l.mu.Unlock()
}

// Open returns the number of connections open.
func (l *connLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// closeAll closes every connection still open (a drain that ran out of
// time): their handlers see the error at their next read or write.
func (l *connLimiter) closeAll() {
	l.mu.Lock()
	all := make([]*limitedConn, 0, len(l.open))
	for c := range l.open {
		all = append(all, c)
	}
	l.mu.Unlock()
	for _, c := range all {
		_ = c.conn().Close()
	}
}

// The answers to a refused connection, written before its request is
// read, as fasthttp's own MaxConnsPerIP and Concurrency answer.
const (
	tooManyConns    = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 26\r\nConnection: close\r\n\r\nToo many open connections\n"
	tooManyFromAddr = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 44\r\nConnection: close\r\n\r\nToo many open connections from your address\n"
)

// refuse answers a connection over a cap and closes it. The socket's
// buffer is empty, so the write does not wait; the deadline is a guard.
func refuse(c net.Conn, answer string) {
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write([]byte(answer))
	_ = c.Close()
}

// limitedConn is an accepted connection that leaves the counts when it
// is closed (once, however many times Close is called). It embeds the
// *net.TCPConn so that its ReadFrom, SyscallConn and keep-alive methods
// stay visible to fasthttp and to the standard library.
type limitedConn struct {
	*net.TCPConn
	other  net.Conn // a listener other than TCP (tests)
	l      *connLimiter
	key    netip.Addr
	keyed  bool
	closed atomic.Bool
	// writeDL is the write deadline last set; see Write.
	writeDL time.Time
	// peer is the client's address as text (host:port), ipLen the length
	// of its IP part; made at the first request.
	peer  []byte
	ipLen int
}

// peerText returns the client's address as "ip:port" and its IP alone,
// made once per connection (the connection's goroutine calls it).
func (c *limitedConn) peerText() (addr, ip []byte) {
	if c.peer == nil {
		ap := c.TCPConn.RemoteAddr().(*net.TCPAddr).AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		c.peer = ap.AppendTo(nil)
		c.ipLen = len(ap.Addr().AppendTo(nil))
		if ap.Addr().Is6() {
			c.ipLen += 2 // the brackets
		}
	}
	ip = c.peer[:c.ipLen]
	if len(ip) > 1 && ip[0] == '[' {
		ip = ip[1 : len(ip)-1]
	}
	return c.peer, ip
}

// tcpLimitedConn and otherLimitedConn give a limitedConn the method set
// of what it wraps.
type (
	tcpLimitedConn   struct{ *limitedConn }
	otherLimitedConn struct {
		net.Conn
		lc *limitedConn
	}
)

func (c *limitedConn) conn() net.Conn {
	if c.TCPConn != nil {
		return tcpLimitedConn{c}
	}
	return otherLimitedConn{Conn: c.other, lc: c}
}

// Write writes p within the send timeout: a client that stops reading is
// cut off, one that reads slowly is not (nginx's send_timeout). The
// deadline moves when a quarter of it is used up, not on every write.
// Callers do not write one connection concurrently (fasthttp writes a
// connection from its one goroutine).
func (c tcpLimitedConn) Write(p []byte) (int, error) {
	if t, now := c.l.sendTimeout, time.Now(); c.writeDL.Sub(now) < t*3/4 {
		c.writeDL = now.Add(t)
		if err := c.TCPConn.SetWriteDeadline(c.writeDL); err != nil {
			return 0, err
		}
	}
	return c.TCPConn.Write(p)
}

// ReadFrom passes a copy through Write, so that the send timeout applies.
func (c tcpLimitedConn) ReadFrom(r io.Reader) (int64, error) {
	return genericReadFrom(c, r)
}

// SetWriteDeadline sets the deadline of the writes to come (a hijack
// handler's own); zero gives them the send timeout again.
func (c tcpLimitedConn) SetWriteDeadline(t time.Time) error {
	c.writeDL = t
	return c.TCPConn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines; see SetWriteDeadline.
func (c tcpLimitedConn) SetDeadline(t time.Time) error {
	c.writeDL = t
	return c.TCPConn.SetDeadline(t)
}

// genericReadFrom copies r to w through a buffer.
func genericReadFrom(w io.Writer, r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w}, r)
}

// Close closes the connection and takes it out of the counts.
func (c tcpLimitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.forget(c.limitedConn)
	}
	return c.TCPConn.Close()
}

// Close closes the connection and takes it out of the counts.
func (c otherLimitedConn) Close() error {
	if c.lc.closed.CompareAndSwap(false, true) {
		c.lc.l.forget(c.lc)
	}
	return c.Conn.Close()
}

// fdLimit returns the process's limit on open files, or 0 when unknown.
func fdLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
