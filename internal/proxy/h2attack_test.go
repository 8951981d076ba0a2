package proxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/limiterd/limiterd/internal/proxy"
)

// h2raw is a hostile HTTP/2 client: frames as the test writes them, with
// nothing of a real client's manners.
type h2raw struct {
	t   *testing.T
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
	// noAck: the client does not acknowledge the server's SETTINGS (it
	// may not, in the middle of a header block).
	noAck bool
}

// dialH2 opens a connection to p, writes the preface and an empty
// SETTINGS (or the settings given).
func dialH2(t *testing.T, p *plane, settings ...http2.Setting) *h2raw {
	t.Helper()
	c := p.dial()
	r := &h2raw{t: t, c: c, fr: http2.NewFramer(c, c)}
	r.enc = hpack.NewEncoder(&r.buf)
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.fr.MaxHeaderListSize = 1 << 20
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return r
}

// writer returns a framer of r's connection for a goroutine of its own
// (a Framer is not safe for concurrent use; each writes a frame at once).
func (r *h2raw) writer() *http2.Framer { return http2.NewFramer(r.c, nil) }

// block encodes a request's header block: the pseudo-fields of a GET of
// path, then the fields given as name, value pairs.
func (r *h2raw) block(path string, fields ...string) []byte {
	r.buf.Reset()
	all := append([]string{":method", "GET", ":scheme", "http", ":authority", "node", ":path", path}, fields...)
	for i := 0; i+1 < len(all); i += 2 {
		if all[i] == "" { // a field left out
			continue
		}
		_ = r.enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
	}
	return bytes.Clone(r.buf.Bytes())
}

// get opens stream id with a GET of path.
func (r *h2raw) get(id uint32, path string, fields ...string) {
	r.t.Helper()
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(path, fields...),
		EndStream: true, EndHeaders: true}); err != nil {
		r.t.Fatal(err)
	}
}

// next reads frames (answering SETTINGS) until one that f accepts,
// GOAWAY or the connection's end; it returns the frame, or nil at the
// end.
func (r *h2raw) next(f func(http2.Frame) bool) http2.Frame {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		fr, err := r.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.t.Fatal("no frame within 10 s")
			}
			return nil
		}
		if s, ok := fr.(*http2.SettingsFrame); ok && !s.IsAck() && !r.noAck {
			_ = r.fr.WriteSettingsAck()
		}
		if _, ok := fr.(*http2.GoAwayFrame); ok || f(fr) {
			return fr
		}
	}
}

// goaway reads until the connection ends and returns the code of the
// first GOAWAY it got, or -1 when it got none.
func (r *h2raw) goaway() int {
	r.t.Helper()
	code := -1
	for {
		fr := r.next(func(http2.Frame) bool { return false })
		if fr == nil {
			return code
		}
		if code == -1 {
			code = int(fr.(*http2.GoAwayFrame).ErrCode)
		}
	}
}

// answer reads until stream id's answer head, or its reset: it returns
// the status (or "") and the reset's code (or -1).
func (r *h2raw) answer(id uint32) (status string, reset int) {
	r.t.Helper()
	fr := r.next(func(f http2.Frame) bool {
		if f.Header().StreamID != id {
			return false
		}
		switch f.(type) {
		case *http2.MetaHeadersFrame, *http2.RSTStreamFrame:
			return true
		}
		return false
	})
	switch f := fr.(type) {
	case *http2.MetaHeadersFrame:
		return f.PseudoValue("status"), -1
	case *http2.RSTStreamFrame:
		return "", int(f.ErrCode)
	case *http2.GoAwayFrame:
		r.t.Fatalf("stream %d: GOAWAY %v", id, f.ErrCode)
	}
	r.t.Fatalf("stream %d: the connection ended", id)
	return "", -1
}

// idle waits until p has nothing in flight and no connection open.
func (p *plane) idle() {
	p.t.Helper()
	p.settled()
	eventually(p.t, "every connection closed", func() bool { return p.h.OpenConns() == 0 })
}

// TestHTTP2RapidReset: streams opened and cancelled in a loop
// (CVE-2023-44487) end the connection with GOAWAY ENHANCE_YOUR_CALM once
// past http2_conn_stream_rate; the node sees at most the burst, and
// everything is back to idle.
func TestHTTP2RapidReset(t *testing.T) {
	p := newPlane(t, nil, func(o *proxy.Options) { o.HTTP2.ConnStreamRate = 50 })
	r := dialH2(t, p)
	w := r.writer()
	go func() {
		for id := uint32(1); id < 20000; id += 2 {
			if w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/info"), EndStream: true, EndHeaders: true}) != nil ||
				w.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	if code := r.goaway(); code != int(http2.ErrCodeEnhanceYourCalm) {
		t.Fatalf("GOAWAY %d, want ENHANCE_YOUR_CALM", code)
	}
	p.idle()
	if n := p.hits.Load(); n > 60 {
		t.Fatalf("%d streams reached the node, the burst is 50", n)
	}
	if n := p.h.Counts.HTTP2Calm.Load(); n != 1 {
		t.Fatalf("HTTP2Calm = %d", n)
	}
}

// TestHTTP2PeerStreamRate: the stream rate of a client address holds over
// all its connections.
func TestHTTP2PeerStreamRate(t *testing.T) {
	p := newPlane(t, nil, func(o *proxy.Options) {
		o.HTTP2.PeerStreamRate = 20
		o.HTTP2.ConnStreamRate = 1000
	})
	calm := 0
	for i := 0; i < 4; i++ {
		r := dialH2(t, p)
		w := r.writer()
		go func() {
			for id := uint32(1); id < 200; id += 2 {
				if w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/info"), EndStream: true, EndHeaders: true}) != nil {
					return
				}
			}
		}()
		if r.goaway() == int(http2.ErrCodeEnhanceYourCalm) {
			calm++
		}
	}
	if calm != 4 {
		t.Fatalf("%d of 4 connections ended ENHANCE_YOUR_CALM", calm)
	}
	p.idle()
}

// TestHTTP2ContinuationFlood: a header block that never ends, in empty
// CONTINUATION frames, or in ones that grow it past the header list's
// bound, ends the connection; nothing reaches the node.
func TestHTTP2ContinuationFlood(t *testing.T) {
	p := newPlane(t, nil, nil)
	r := dialH2(t, p)
	r.noAck = true
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/info")})
	go func(w *http2.Framer) {
		for i := 0; i < 100000; i++ {
			if w.WriteContinuation(1, false, nil) != nil {
				return
			}
		}
	}(r.writer())
	if code := r.goaway(); code != int(http2.ErrCodeEnhanceYourCalm) {
		t.Fatalf("empty CONTINUATION frames: GOAWAY %d, want ENHANCE_YOUR_CALM", code)
	}

	r = dialH2(t, p)
	r.noAck = true
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/info")})
	go func(w *http2.Framer, chunk []byte) {
		for i := 0; i < 1000; i++ {
			if w.WriteContinuation(1, false, chunk) != nil {
				return
			}
		}
	}(r.writer(), r.block("/info", "x-filler", strings.Repeat("a", 8000)))
	if code := r.goaway(); code == -1 || code == int(http2.ErrCodeNo) {
		t.Fatalf("growing CONTINUATION frames: GOAWAY %d, want an error", code)
	}

	// A block left open: read_header_timeout.
	p2 := newPlane(t, nil, func(o *proxy.Options) { o.ReadHeaderTimeout = 300 * time.Millisecond })
	r = dialH2(t, p2)
	r.noAck = true
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/info")})
	if code := r.goaway(); code != int(http2.ErrCodeEnhanceYourCalm) {
		t.Fatalf("an open header block: GOAWAY %d, want ENHANCE_YOUR_CALM", code)
	}
	if p.hits.Load()+p2.hits.Load() != 0 {
		t.Fatal("a request reached the node")
	}
	p.idle()
	p2.idle()
}

// TestHTTP2HPACKBomb: a small header block that decodes to a huge header
// list (one large field in the dynamic table, referenced again and again)
// is answered 431 and never reaches the node.
func TestHTTP2HPACKBomb(t *testing.T) {
	p := newPlane(t, nil, nil)
	r := dialH2(t, p)
	r.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "node"}, {":path", "/info"}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// 4000 bytes into the dynamic table (index 62), then 200 one-byte
	// references to it: 800 KB decoded from a block of about 4 KB.
	_ = r.enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)})
	for i := 0; i < 200; i++ {
		r.buf.WriteByte(0x80 | 62)
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if st, rst := r.answer(1); st != "431" {
		t.Fatalf("status %q (reset %d), want 431", st, rst)
	}
	if p.hits.Load() != 0 {
		t.Fatal("the bomb reached the node")
	}
}

// TestHTTP2ControlFloods: PING and SETTINGS frames without end, the
// client reading every answer, end the connection with GOAWAY
// ENHANCE_YOUR_CALM.
func TestHTTP2ControlFloods(t *testing.T) {
	p := newPlane(t, nil, nil)
	for _, flood := range []struct {
		name  string
		write func(w *http2.Framer) error
	}{
		{"PING", func(w *http2.Framer) error { return w.WritePing(false, [8]byte{1}) }},
		{"SETTINGS", func(w *http2.Framer) error {
			return w.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
		}},
		// Resets of a stream already closed (one on an idle stream would
		// be a protocol error of its own).
		{"RST_STREAM", func(w *http2.Framer) error { return w.WriteRSTStream(1, http2.ErrCodeCancel) }},
		{"PRIORITY", func(w *http2.Framer) error {
			return w.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 1})
		}},
	} {
		r := dialH2(t, p)
		if flood.name == "RST_STREAM" {
			r.get(1, "/info")
			r.answer(1)
		}
		w := r.writer()
		go func() {
			for i := 0; i < 100000; i++ {
				if flood.write(w) != nil {
					return
				}
			}
		}()
		if code := r.goaway(); code != int(http2.ErrCodeEnhanceYourCalm) && code != -1 {
			t.Errorf("%s flood: GOAWAY %d, want ENHANCE_YOUR_CALM", flood.name, code)
		}
	}
	p.idle()
}

// TestHTTP2ZeroWindow: a client whose flow-control window never opens
// holds its stream until send_timeout: then the stream is reset, its slot
// released, and the connection closed at idle_timeout.
func TestHTTP2ZeroWindow(t *testing.T) {
	big := strings.Repeat("z", 1<<20)
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }, func(o *proxy.Options) {
		o.SendTimeout = 300 * time.Millisecond
		o.IdleTimeout = time.Second
	})
	r := dialH2(t, p, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.get(1, "/info")
	if st, _ := r.answer(1); st != "200" {
		t.Fatalf("status %q", st)
	}
	if fr := r.next(func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok }); fr == nil {
		t.Fatal("the stream was not reset")
	}
	p.settled()
	if code := r.goaway(); code != int(http2.ErrCodeNo) && code != -1 {
		t.Fatalf("idle connection: GOAWAY %d", code)
	}
	p.idle()
}

// TestHTTP2MoreStreamsThanAdvertised: a stream over
// http2_max_concurrent_streams is refused; those within are served.
func TestHTTP2MoreStreamsThanAdvertised(t *testing.T) {
	release := make(chan struct{})
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "late") },
		func(o *proxy.Options) { o.HTTP2.MaxConcurrentStreams = 2 })
	defer close(release)
	r := dialH2(t, p)
	r.next(func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && !s.IsAck() })
	r.get(1, "/info")
	r.get(3, "/info")
	r.get(5, "/info")
	if _, rst := r.answer(5); rst != int(http2.ErrCodeRefusedStream) && rst != int(http2.ErrCodeProtocol) {
		t.Fatalf("stream 5: reset %d, want REFUSED_STREAM or PROTOCOL_ERROR", rst)
	}
	eventually(t, "two at the node", func() bool { return p.hits.Load() == 2 })
}

// TestHTTP2ProtocolErrors: the bad input of docs/http2.md ("Limits") gets
// the protocol's error, never a panic, and never reaches the node.
func TestHTTP2ProtocolErrors(t *testing.T) {
	p := newPlane(t, nil, nil)
	// Stream ids out of order.
	r := dialH2(t, p)
	r.get(5, "/info")
	r.get(3, "/info")
	if code := r.goaway(); code != int(http2.ErrCodeProtocol) {
		t.Errorf("stream ids out of order: GOAWAY %d, want PROTOCOL_ERROR", code)
	}
	hits := p.hits.Load() // stream 5 was a request like any
	// Malformed requests: a stream error each, the connection kept.
	for _, c := range []struct {
		name   string
		fields []string
	}{
		{"no :path", []string{":path", ""}},
		{"pseudo-field after a regular one", []string{"x-a", "1", ":foo", "bar"}},
		{"a connection-specific field", []string{"connection", "keep-alive"}},
		{"an upper-case name", []string{"X-Upper", "1"}},
		{"te other than trailers", []string{"te", "gzip"}},
	} {
		// A malformed request may be answered (400) before the stream is
		// closed, or reset (RFC 9113, 8.1.1).
		r := dialH2(t, p)
		var block []byte
		if c.name == "no :path" {
			r.buf.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "node"}} {
				_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			block = bytes.Clone(r.buf.Bytes())
		} else {
			block = r.block("/info", c.fields...)
		}
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
		if st, rst := r.answer(1); rst != int(http2.ErrCodeProtocol) && st != "400" {
			t.Errorf("%s: status %q reset %d, want PROTOCOL_ERROR or 400", c.name, st, rst)
		}
		r.c.Close()
	}
	// A malformed :authority, and a :path not in origin form: 400 from
	// limiterd.
	for _, c := range [][]string{{":authority", "a b@c"}, {":path", "*"}, {":path", "http://elsewhere/x"}} {
		r := dialH2(t, p)
		r.buf.Reset()
		f := map[string]string{":method": "GET", ":scheme": "http", ":authority": "node", ":path": "/info"}
		f[c[0]] = c[1]
		for _, k := range []string{":method", ":scheme", ":authority", ":path"} {
			_ = r.enc.WriteField(hpack.HeaderField{Name: k, Value: f[k]})
		}
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.buf.Bytes(), EndStream: true, EndHeaders: true})
		if st, rst := r.answer(1); st != "400" && rst != int(http2.ErrCodeProtocol) {
			t.Errorf("%s %q: status %q reset %d, want 400 or PROTOCOL_ERROR", c[0], c[1], st, rst)
		}
		r.c.Close()
	}
	// A preface with garbage after it.
	c := p.dial()
	io.WriteString(c, http2.ClientPreface+"GET / HTTP/1.1\r\n\r\n")
	fr := http2.NewFramer(io.Discard, c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	code := -1
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			code = int(g.ErrCode)
		}
	}
	if code != int(http2.ErrCodeProtocol) && code != int(http2.ErrCodeFrameSize) {
		t.Errorf("garbage after the preface: GOAWAY %d, want PROTOCOL_ERROR or FRAME_SIZE_ERROR", code)
	}
	c.Close()
	// An HTTP/1.1 request that starts like the preface.
	got, closed := p.raw("PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n")
	if status(got) != "HTTP/1.1 400 Bad Request" || !closed {
		t.Errorf("a near-preface: %q", got)
	}
	if n := p.hits.Load(); n != hits {
		t.Errorf("%d malformed requests reached the node", n-hits)
	}
	p.idle()
}

// TestHTTP2PrefaceThenSilence: a client that sends the preface and then
// nothing is closed without waiting for idle_timeout.
func TestHTTP2PrefaceThenSilence(t *testing.T) {
	p := newPlane(t, nil, nil)
	c := p.dial()
	io.WriteString(c, http2.ClientPreface)
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.Copy(io.Discard, c)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
	p.idle()
	// Half a preface, then silence: read_header_timeout.
	p2 := newPlane(t, nil, func(o *proxy.Options) { o.ReadHeaderTimeout = 300 * time.Millisecond })
	c = p2.dial()
	io.WriteString(c, "PRI * HTTP/2.0\r\n")
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	start = time.Now()
	_, _ = io.Copy(io.Discard, c)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("half a preface: closed after %v", d)
	}
	p2.idle()
}
