package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
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
	log    *slog.Logger
	clock  *coarseClock
	// closing is set by Shutdown once it has closed the listener.
	closing atomic.Bool

	mu    sync.Mutex
	open  map[*limitedConn]struct{}
	perIP map[netip.Addr]int
	// h2 holds, for each client address with an HTTP/2 connection open,
	// the rate of its new streams (server.http2_peer_stream_rate).
	h2 map[netip.Addr]*peerStreams
	// streamInterval and streamBurst are that rate, in nanoseconds; 0: no
	// such limit.
	streamInterval, streamBurst int64
}

// peerStreams is a client address's HTTP/2 connections and stream rate.
type peerStreams struct {
	conns int
	rate  gcra
}

func newConnLimiter(ln net.Listener, maxConns, maxPerIP int, sendTimeout time.Duration, counts *insight.ProxyCounters,
	log *slog.Logger, policy func(netip.Addr) (bool, int)) *connLimiter {
	return &connLimiter{
		Listener: ln, maxConns: maxConns, maxPerIP: maxPerIP, sendTimeout: sendTimeout, policy: policy, counts: counts, log: log,
		open: map[*limitedConn]struct{}{}, perIP: map[netip.Addr]int{}, h2: map[netip.Addr]*peerStreams{},
	}
}

// Accept returns the next connection within the caps; a connection over
// them is answered and closed here, and Accept waits for the next. When
// the process is out of file descriptors (or the kernel of buffers),
// Accept waits and tries again, as net/http's server does, rather than
// failing: the caps keep most of this away, the node's connections and
// the admin listener's can still use the last descriptors.
func (l *connLimiter) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !resourceShortage(err) {
				return nil, err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if backoff == 5*time.Millisecond {
				l.log.Warn("public listener: cannot accept a connection; trying again", "err", err)
			}
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			return nil, fmt.Errorf("public listener: a %T, not a TCP connection", c)
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
		lc := &limitedConn{TCPConn: tc, l: l, key: key, keyed: keyed}
		lc.waiting(l.clock.now().UnixNano()) // until its first request begins
		l.open[lc] = struct{}{}
		if keyed {
			l.perIP[key]++
		}
		l.mu.Unlock()
		return conn{lc}, nil
	}
}

// resourceShortage reports whether an accept failed for want of file
// descriptors or memory, which passes.
func resourceShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// key returns the per-address key of c, keyed false when c is not capped
// per address.
func (l *connLimiter) key(c net.Conn) (netip.Addr, bool) {
	if l.maxPerIP <= 0 {
		return netip.Addr{}, false
	}
	return l.peerKey(c)
}

// peerKey returns the client address of c as the per-address cap keys
// it, whether or not that cap is on; keyed is false for the addresses
// free of it (trusted proxies, exempt peers).
func (l *connLimiter) peerKey(c net.Conn) (netip.Addr, bool) {
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

// addH2 and dropH2 count an HTTP/2 connection of the address key, which
// keeps its stream rate while it has one.
func (l *connLimiter) addH2(key netip.Addr) {
	l.mu.Lock()
	p := l.h2[key]
	if p == nil {
		p = &peerStreams{rate: gcra{interval: l.streamInterval, burst: l.streamBurst}}
		l.h2[key] = p
	}
	p.conns++
	l.mu.Unlock()
}

func (l *connLimiter) dropH2(key netip.Addr) {
	l.mu.Lock()
	if p := l.h2[key]; p != nil {
		if p.conns--; p.conns <= 0 {
			delete(l.h2, key)
		}
	}
	l.mu.Unlock()
}

// allowStream reports whether the address key may open a stream at now
// (Unix nanoseconds), and counts it.
func (l *connLimiter) allowStream(key netip.Addr, now int64) bool {
	if l.streamInterval == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.h2[key]
	return p == nil || p.rate.allow(now)
}

// addStream counts one more stream of the address key toward
// server.max_conns_per_ip, unless that is over it; dropStream uncounts
// one.
func (l *connLimiter) addStream(key netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxPerIP > 0 && l.perIP[key] >= l.maxPerIP {
		l.counts.HTTP2StreamsRefused.Add(1)
		return false
	}
	l.perIP[key]++
	return true
}

func (l *connLimiter) dropStream(key netip.Addr) {
	l.mu.Lock()
	if n := l.perIP[key] - 1; n > 0 {
		l.perIP[key] = n
	} else {
		delete(l.perIP, key)
	}
	l.mu.Unlock()
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
		c.closeNow()
	}
}

// closeIdle closes the connections that have waited for a request,
// parked or not, since cutoff or before (a drain). Each is claimed first:
// a request that begins on it meanwhile is never served (see busy).
func (l *connLimiter) closeIdle(cutoff time.Time) {
	ns := cutoff.UnixNano()
	l.mu.Lock()
	var idle []*limitedConn
	for c := range l.open {
		if c.claim(ns) {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		c.closeNow()
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
// is closed (once, however many times). conn gives it the net.Conn the
// server uses.
type limitedConn struct {
	*net.TCPConn
	l      *connLimiter
	key    netip.Addr
	keyed  bool
	closed atomic.Bool
	// idleSince is connBusy while a request is under way, the Unix
	// nanoseconds since it waits for one (fasthttp's ConnState, and while
	// parked), or connClaimed once a drain took it to close.
	idleSince atomic.Int64

	// The fields below belong to the goroutine serving the connection
	// (one at a time: the server's, then the parking one's).

	// writeDL is the write deadline last set; see conn.Write.
	writeDL time.Time
	// peer is the client's address as text (host:port), ipLen the length
	// of its IP part; made at the first request.
	peer  []byte
	ipLen int
	// first holds the first byte of the next request, read while parked,
	// until the server reads it (pending).
	first   [1]byte
	pending bool
	// firstDL, when set, is the latest the first read deadline the server
	// sets may be: the end of read_header_timeout from the connection's
	// opening, part of which was spent waiting for its first bytes
	// (sniff).
	firstDL time.Time
	// idleExit is set when the last read found nothing before its
	// deadline (the server's keep-alive wait ended); park is set when the
	// server's Close was taken for "park it".
	idleExit, park bool
}

// peerText returns the client's address as "ip:port" and its IP alone,
// made once per connection.
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

// The states of limitedConn.idleSince other than waiting.
const (
	connBusy    = 0
	connClaimed = -1
)

// waiting marks c as waiting for a request since now (Unix nanoseconds),
// unless it already is or a drain claimed it.
func (c *limitedConn) waiting(now int64) {
	c.idleSince.CompareAndSwap(connBusy, max(now, 1))
}

// busy marks c as serving a request; false when a drain has claimed it
// to close: the request must not be served.
func (c *limitedConn) busy() bool {
	for {
		v := c.idleSince.Load()
		switch {
		case v == connClaimed:
			return false
		case v == connBusy || c.idleSince.CompareAndSwap(v, connBusy):
			return true
		}
	}
}

// claim claims c for a drain to close when it has waited for a request
// since cutoff (Unix nanoseconds) or before.
func (c *limitedConn) claim(cutoff int64) bool {
	v := c.idleSince.Load()
	return v > 0 && v <= cutoff && c.idleSince.CompareAndSwap(v, connClaimed)
}

// claimed reports whether a drain has claimed c to close.
func (c *limitedConn) claimed() bool { return c.idleSince.Load() == connClaimed }

// closeNow closes the connection whatever its state.
func (c *limitedConn) closeNow() {
	if c.closed.CompareAndSwap(false, true) {
		c.l.forget(c)
	}
	_ = c.TCPConn.Close()
}

// conn is the net.Conn of a limitedConn the server sees: its reads give
// the byte read while parked first; each write has the send timeout; its
// Close after a keep-alive wait that found nothing parks the connection
// instead (see Handler.park).
type conn struct{ *limitedConn }

func (c conn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first[0]
		c.pending, c.idleExit = false, false
		return 1, nil
	}
	n, err := c.TCPConn.Read(p)
	if n > 0 {
		c.idleExit = false
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.idleExit = true
	}
	return n, err
}

// Write writes p within the send timeout: a client that stops reading is
// cut off, one that reads slowly is not (nginx's send_timeout). The deadline
// moves at most once a quarter of it (moveDeadline), not on every write.
func (c conn) Write(p []byte) (int, error) {
	c.idleExit = false
	if dl, moved := moveDeadline(c.writeDL, c.l.clock.now(), c.l.sendTimeout); moved {
		c.writeDL = dl
		if err := c.TCPConn.SetWriteDeadline(c.writeDL); err != nil {
			return 0, err
		}
	}
	return c.TCPConn.Write(p)
}

// ReadFrom passes a copy through Write, so that the send timeout applies.
func (c conn) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{c}, r)
}

// SetWriteDeadline sets the deadline of the writes to come (a hijack
// handler's own); zero gives them the send timeout again.
func (c conn) SetWriteDeadline(t time.Time) error {
	c.writeDL = t
	return c.TCPConn.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline of the reads to come, the first no
// later than firstDL.
func (c conn) SetReadDeadline(t time.Time) error {
	if !c.firstDL.IsZero() {
		if t.IsZero() || t.After(c.firstDL) {
			t = c.firstDL
		}
		c.firstDL = time.Time{}
	}
	return c.TCPConn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines; see SetWriteDeadline.
func (c conn) SetDeadline(t time.Time) error {
	c.writeDL = t
	return c.TCPConn.SetDeadline(t)
}

// Close closes the connection, or, when the server gives it up after a
// keep-alive wait that found nothing, keeps it open to be parked (during
// a drain too: the drain closes it once it has waited long enough).
func (c conn) Close() error {
	if c.idleExit && !c.closed.Load() {
		c.idleExit, c.park = false, true
		return nil
	}
	c.closeNow()
	return nil
}

// fdLimit returns the process's limit on open files, or 0 when unknown.
func fdLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
