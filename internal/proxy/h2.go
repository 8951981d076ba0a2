package proxy

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// Cleartext HTTP/2 on the public listener (docs/http2.md): a connection
// whose first bytes are the HTTP/2 client preface is served by net/http's
// own HTTP/2 server, each stream by a handler of its own (serveStream),
// everything else by fasthttp as before. The choice of implementation is
// decision 195's.

// The defaults of HTTP2Options, those of config.toml's [server] table.
const (
	DefaultHTTP2MaxConcurrentStreams = 100
	DefaultHTTP2ConnStreamRate       = 1000
	DefaultHTTP2PeerStreamRate       = 2000
)

// HTTP2Options configure cleartext HTTP/2 on the public listener. A zero
// value means its default.
type HTTP2Options struct {
	// Off refuses the HTTP/2 preface as an HTTP/1.1 request (400), as
	// limiterd did before it spoke HTTP/2 (server.http2 = false).
	Off bool
	// MaxConcurrentStreams is the streams one connection may have open at
	// once, advertised in SETTINGS (server.http2_max_concurrent_streams).
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's decoded header list
	// (server.http2_max_header_list_size): 431 beyond.
	MaxHeaderListSize int
	// ConnStreamRate is the streams a connection may open per second,
	// with a burst of as many (server.http2_conn_stream_rate); beyond, the
	// connection is closed with GOAWAY ENHANCE_YOUR_CALM.
	ConnStreamRate int
	// PeerStreamRate is the same over all of one client address's
	// connections, keyed as server.max_conns_per_ip keys them
	// (server.http2_peer_stream_rate); negative: no such limit.
	PeerStreamRate int
}

func (o *HTTP2Options) withDefaults() {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultHTTP2MaxConcurrentStreams
	}
	if o.MaxHeaderListSize <= 0 {
		o.MaxHeaderListSize = MaxHeaderBytes
	}
	if o.ConnStreamRate <= 0 {
		o.ConnStreamRate = DefaultHTTP2ConnStreamRate
	}
	if o.PeerStreamRate == 0 {
		o.PeerStreamRate = DefaultHTTP2PeerStreamRate
	}
}

// The bounds on frames the server does not limit by itself, per
// connection: control frames (PING, SETTINGS, PRIORITY, RST_STREAM, empty
// DATA, frames of unknown types) at controlFrameRate a second with a burst
// of controlFrameBurst, and CONTINUATION frames per header block.
const (
	controlFrameRate   = 200
	controlFrameBurst  = 1000
	maxContinuations   = 64
	h2ReadBufferSize   = 4 << 10
	h2UploadPerConn    = 1 << 20
	h2UploadPerStream  = 256 << 10
	clientPrefaceBytes = len(http2.ClientPreface)
)

// newHTTP2 sets up the HTTP/2 server, unless it is off: net/http's, for
// unencrypted HTTP/2 only, serving the connections serveNew hands it.
func (h *Handler) newHTTP2() {
	o := &h.opts.HTTP2
	if o.Off {
		return
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h.h2ln = newConnQueue()
	h.h2 = &http.Server{
		Handler:   http.HandlerFunc(h.serveStream),
		Protocols: &protos,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: int(o.MaxConcurrentStreams),
			// A request body waits in the server's buffer until read; the
			// flow-control windows bound it.
			MaxReceiveBufferPerConnection: h2UploadPerConn,
			MaxReceiveBufferPerStream:     h2UploadPerStream,
			CountError:                    func(string) { h.Counts.HTTP2Errors.Add(1) },
		},
		// The wait for the preface's last bytes (sniff saw its first).
		ReadHeaderTimeout: h.opts.ReadHeaderTimeout,
		// A connection without a stream is closed after it, with GOAWAY.
		IdleTimeout: h.opts.IdleTimeout,
		// The server advertises and enforces it as
		// SETTINGS_MAX_HEADER_LIST_SIZE (with 32 bytes more a field).
		MaxHeaderBytes: o.MaxHeaderListSize,
		ErrorLog:       log.New(debugWriter{h}, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, h2ConnKey{}, c)
		},
	}
}

// debugWriter passes the HTTP/2 server's own messages (a connection error,
// a client gone) to the structured log at debug level.
type debugWriter struct{ h *Handler }

func (w debugWriter) Write(p []byte) (int, error) {
	w.h.log.Debug("public listener", "msg", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// serveNew serves a new connection: as HTTP/2 when it opens with the
// client preface, else with the HTTP/1.1 server.
func (h *Handler) serveNew(c conn) {
	if h.h2 != nil {
		switch c.sniff(h.opts.ReadHeaderTimeout) {
		case sniffHTTP2:
			h.serveHTTP2(c)
			return
		case sniffClosed:
			c.closeNow()
			return
		}
	}
	h.serve(c)
}

// What a connection's first bytes say.
const (
	sniffHTTP1  = iota // anything but the preface: fasthttp reads it
	sniffHTTP2         // the whole HTTP/2 client preface
	sniffClosed        // closed before a byte
)

// sniff waits for a connection's first bytes, up to timeout, and tells
// whether they are the HTTP/2 client preface. It peeks: nothing is
// consumed, so the server that takes the connection reads it whole. A
// connection silent until timeout is left to the HTTP/1.1 server with
// its first read deadline already passed (it answers 408 at once, as it
// would have). Where peeking is not possible, every connection is
// HTTP/1.1.
func (c conn) sniff(timeout time.Duration) int {
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return sniffHTTP1
	}
	deadline := time.Now().Add(timeout)
	c.firstDL = deadline
	_ = c.TCPConn.SetReadDeadline(deadline)
	var b [clientPrefaceBytes]byte
	for {
		n, ok := peek(rc, b[:])
		switch {
		case !ok:
			// The deadline passed (or the socket failed): the HTTP/1.1
			// server finds it so at its first read.
			return sniffHTTP1
		case n == 0:
			return sniffClosed
		case !bytes.HasPrefix([]byte(http2.ClientPreface), b[:n]):
			return sniffHTTP1
		case n == len(b):
			return sniffHTTP2
		}
		// A part of the preface: the rest is on its way.
		if time.Now().After(deadline) {
			return sniffHTTP1
		}
		time.Sleep(time.Millisecond)
	}
}

// serveHTTP2 hands c to the HTTP/2 server, which serves it until it is
// closed.
func (h *Handler) serveHTTP2(c conn) {
	h.Counts.HTTP2Conns.Add(1)
	h.Counts.HTTP2Open.Add(1)
	hc := &h2Conn{conn: c, h: h, buf: make([]byte, h2ReadBufferSize)}
	hc.peerAddr, hc.peerIP = c.peerText()
	hc.peerKey, hc.peerKeyed = c.l.peerKey(c.TCPConn)
	hc.waiting(c.l.clock.now().UnixNano())
	hc.remain = clientPrefaceBytes // the server reads the preface first: no frame
	hc.rate.interval = int64(time.Second) / int64(h.opts.HTTP2.ConnStreamRate)
	hc.rate.burst = int64(time.Second)
	hc.control.interval = int64(time.Second) / controlFrameRate
	hc.control.burst = int64(time.Second) * controlFrameBurst / controlFrameRate
	if hc.peerKeyed {
		c.l.addH2(hc.peerKey)
	}
	c.firstDL = time.Time{}
	if !h.h2ln.push(hc) {
		hc.Close()
	}
}

// Close closes the connection and takes it out of the counts, once.
func (c *h2Conn) Close() error {
	if c.gone.CompareAndSwap(false, true) {
		c.h.Counts.HTTP2Open.Add(-1)
		if c.peerKeyed {
			c.l.dropH2(c.peerKey)
		}
	}
	c.closeNow()
	return nil
}

// h2ConnKey is the context key of a stream's connection (its *h2Conn).
type h2ConnKey struct{}

// h2Conn is a connection served as HTTP/2: the net.Conn the HTTP/2
// server reads and writes. Its reads are buffered, and every frame header
// that passes is looked at, to hold what the server does not bound by
// itself (docs/http2.md, "Limits"): the rate of new streams of the
// connection and of its client address, the rate of control frames, the
// CONTINUATION frames of a header block and the time a header block may
// stay open. Beyond a bound, the read that would deliver the frame fails
// with a connection error, which the server answers with GOAWAY
// ENHANCE_YOUR_CALM before closing. Writes have the send timeout (conn).
type h2Conn struct {
	conn
	h *Handler
	// Set before the server starts, read-only after.
	peerAddr, peerIP []byte
	peerKey          netip.Addr
	peerKeyed        bool

	// streams counts the streams being served; the connection waits
	// (limitedConn.idleSince) while there are none.
	streams atomic.Int32
	gone    atomic.Bool // Close was called

	// The fields below belong to the one goroutine that reads (the
	// server's frame reader).
	buf        []byte
	r, w       int   // buf[r:w] is read from the socket, not yet delivered
	limit      int   // deliver at most buf[:limit] before err, when err != nil
	err        error // the error to return once buf[:limit] is delivered
	hdr        [9]byte
	hn         int // bytes of the frame header in hdr
	remain     int // bytes of the current frame's payload still to come
	lastStream uint32
	inBlock    bool // a header block is open (HEADERS without END_HEADERS)
	conts      int  // CONTINUATION frames of the open block
	blockDL    time.Time
	rate       gcra // new streams
	control    gcra // control frames

	// The writes: the server's frames, and limiterd's own GOAWAY between
	// two of them (wmu held).
	wmu      sync.Mutex
	whdr     [9]byte
	whn      int    // bytes of the outgoing frame's header seen
	wremain  int    // bytes of its payload still to go
	calmDue  bool   // a GOAWAY of limiterd's is to go at the next frame boundary
	calmSent bool   // it went: the server's writes are dropped
	calmLast uint32 // the last stream id the GOAWAY names
}

// Write writes the server's frames, and limiterd's GOAWAY once due, at
// the first frame boundary.
func (c *h2Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.calmSent {
		return len(p), nil
	}
	n, err := c.conn.Write(p)
	c.track(p[:n])
	if c.calmDue && c.whn == 0 && c.wremain == 0 {
		c.sendCalm()
	}
	return n, err
}

// track follows the frames of the bytes written.
func (c *h2Conn) track(p []byte) {
	for len(p) > 0 {
		if c.wremain > 0 {
			skip := min(c.wremain, len(p))
			c.wremain -= skip
			p = p[skip:]
			continue
		}
		take := copy(c.whdr[c.whn:], p)
		c.whn += take
		p = p[take:]
		if c.whn == len(c.whdr) {
			c.whn = 0
			c.wremain = int(c.whdr[0])<<16 | int(c.whdr[1])<<8 | int(c.whdr[2])
		}
	}
}

// calm ends the connection with GOAWAY ENHANCE_YOUR_CALM: now, when no
// frame of the server's is half written, else after it.
func (c *h2Conn) calm() {
	c.h.Counts.HTTP2Calm.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.calmDue, c.calmLast = true, c.lastStream
	if c.whn == 0 && c.wremain == 0 {
		c.sendCalm()
	}
}

// sendCalm writes the GOAWAY (c.wmu held).
func (c *h2Conn) sendCalm() {
	c.calmDue, c.calmSent = false, true
	last := c.calmLast
	f := [17]byte{0, 0, 8, byte(http2.FrameGoAway), 0, 0, 0, 0, 0,
		byte(last >> 24), byte(last >> 16), byte(last >> 8), byte(last),
		0, 0, 0, byte(http2.ErrCodeEnhanceYourCalm)}
	_, _ = c.conn.Write(f[:])
}

// errCalm ends the reads of a connection over one of h2Conn's bounds,
// after its GOAWAY ENHANCE_YOUR_CALM: the server takes it for the client
// gone, and closes.
var errCalm = io.EOF

// Read gives the server what the socket delivered, looking at each frame
// header on the way.
func (c *h2Conn) Read(p []byte) (int, error) {
	if c.r == c.w {
		if c.err != nil {
			return 0, c.err
		}
		// A frame's payload, read whole into p: nothing to look at.
		if c.hn == 0 && c.remain >= len(p) && len(p) >= len(c.buf) {
			n, err := c.readSocket(p)
			c.remain -= n
			return n, err
		}
		c.r, c.w = 0, 0
		n, err := c.readSocket(c.buf)
		if n == 0 {
			return 0, err
		}
		c.w = n
		c.inspect()
	}
	end := c.w
	if c.err != nil {
		end = c.limit
		if c.r >= end {
			c.r = c.w
			return 0, c.err
		}
	}
	n := copy(p, c.buf[c.r:end])
	c.r += n
	return n, nil
}

// SetReadDeadline is a no-op: h2Conn sets its read deadlines itself (a
// header block left open), and the server's own (the preface's, which
// sniff saw whole already) would undo them.
func (c *h2Conn) SetReadDeadline(time.Time) error { return nil }

// readSocket reads the socket, with a deadline while a header block is
// open (read_header_timeout from its first frame) and none otherwise.
func (c *h2Conn) readSocket(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if err != nil && c.inBlock && isTimeout(err) {
		c.h.log.Debug("http2: a header block stayed open past read_header_timeout", "peer", string(c.peerAddr))
		c.calm()
		err = errCalm
	}
	return n, err
}

// inspect looks at the frame headers of buf[:w], from where the last
// inspection stopped.
func (c *h2Conn) inspect() {
	for i := 0; i < c.w; {
		if c.remain > 0 {
			skip := min(c.remain, c.w-i)
			c.remain -= skip
			i += skip
			continue
		}
		start := i - c.hn // where this header began (negative: in an earlier read)
		take := min(len(c.hdr)-c.hn, c.w-i)
		copy(c.hdr[c.hn:], c.buf[i:i+take])
		c.hn += take
		i += take
		if c.hn < len(c.hdr) {
			return
		}
		c.hn = 0
		c.remain = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
		if err := c.frame(http2.FrameType(c.hdr[3]), http2.Flags(c.hdr[4]), c.remain,
			uint32(c.hdr[5]&0x7f)<<24|uint32(c.hdr[6])<<16|uint32(c.hdr[7])<<8|uint32(c.hdr[8])); err != nil {
			c.err, c.limit = err, max(start, c.r)
			c.calm()
			return
		}
	}
}

// frame judges one frame by its header; a non-nil error ends the
// connection before it.
func (c *h2Conn) frame(t http2.FrameType, flags http2.Flags, length int, stream uint32) error {
	now := c.h.clock.now().UnixNano()
	switch t {
	case http2.FrameHeaders:
		if stream > c.lastStream && stream&1 == 1 { // a new stream
			c.lastStream = stream
			if !c.rate.allow(now) {
				c.h.log.Debug("http2: a connection opens streams too fast", "peer", string(c.peerAddr))
				return errCalm
			}
			if c.peerKeyed && !c.l.allowStream(c.peerKey, now) {
				c.h.log.Debug("http2: a client address opens streams too fast", "peer", string(c.peerAddr))
				return errCalm
			}
		}
		if flags&http2.FlagHeadersEndHeaders == 0 {
			c.openBlock()
		}
	case http2.FrameContinuation:
		c.conts++
		if c.conts > maxContinuations {
			return errCalm
		}
		if flags&http2.FlagContinuationEndHeaders != 0 {
			c.closeBlock()
		}
	case http2.FrameData, http2.FrameWindowUpdate:
		if t == http2.FrameData && length == 0 && flags&http2.FlagDataEndStream == 0 && !c.control.allow(now) {
			return errCalm
		}
	default: // PING, SETTINGS, PRIORITY, RST_STREAM, GOAWAY, PUSH_PROMISE, unknown
		if flags&http2.FlagPingAck != 0 && (t == http2.FramePing || t == http2.FrameSettings) {
			return nil // answers to the server's own
		}
		if !c.control.allow(now) {
			return errCalm
		}
	}
	return nil
}

// openBlock starts the wait for a header block's end: read_header_timeout.
func (c *h2Conn) openBlock() {
	c.inBlock, c.conts = true, 0
	c.blockDL = time.Now().Add(c.h.opts.ReadHeaderTimeout)
	_ = c.TCPConn.SetReadDeadline(c.blockDL)
}

// closeBlock ends it.
func (c *h2Conn) closeBlock() {
	c.inBlock, c.conts = false, 0
	_ = c.TCPConn.SetReadDeadline(time.Time{})
}

// streamBegins counts a stream being served toward its client address's
// connections (server.max_conns_per_ip): a connection counts once with
// one stream or none, and once more for each stream beyond the first. It
// is false when that is over the cap; the stream is then refused.
func (c *h2Conn) streamBegins() bool {
	n := c.streams.Add(1)
	if !c.busy() {
		// A drain is closing the connection: the stream is refused,
		// never served.
		c.streamEnds(false)
		return false
	}
	if n > 1 && c.keyed && !c.l.addStream(c.key) {
		c.streamEnds(false)
		return false
	}
	return true
}

// streamEnds ends what streamBegins began; counted says whether it was
// counted toward the cap.
func (c *h2Conn) streamEnds(counted bool) {
	n := c.streams.Add(-1)
	if counted && n > 0 && c.keyed {
		c.l.dropStream(c.key)
	}
	if n == 0 {
		c.waiting(c.l.clock.now().UnixNano())
	}
}

// gcra is a rate with a burst, as the generic cell rate algorithm keeps
// one: a theoretical arrival time in Unix nanoseconds.
type gcra struct {
	tat      int64
	interval int64 // nanoseconds per event
	burst    int64 // how far ahead of now tat may run, nanoseconds
}

// allow reports whether an event at now is within the rate, and counts it.
func (g *gcra) allow(now int64) bool {
	tat := max(g.tat, now)
	if tat-now > g.burst {
		return false
	}
	g.tat = tat + g.interval
	return true
}

var _ net.Conn = (*h2Conn)(nil)

// connQueue is the net.Listener of the HTTP/2 server: it accepts the
// connections serveNew found to open with the preface. It is safe for
// concurrent use.
type connQueue struct {
	ch     chan net.Conn
	done   chan struct{}
	closed atomic.Bool
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the server; false once the queue is closed.
func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	if q.closed.CompareAndSwap(false, true) {
		close(q.done)
	}
	return nil
}

func (q *connQueue) Addr() net.Addr { return queueAddr{} }

// queueAddr is connQueue's address: it has none of its own.
type queueAddr struct{}

func (queueAddr) Network() string { return "h2c" }
func (queueAddr) String() string  { return "the public listener's HTTP/2 connections" }
