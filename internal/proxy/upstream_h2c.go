package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// With server.upstream_protocol = "h2c" the node is reached over
// cleartext HTTP/2 (prior knowledge) through net/http's Transport: its
// requests multiplexed on as few connections as the node's
// SETTINGS_MAX_CONCURRENT_STREAMS allow, for HTTP/1.1 requests and HTTP/2
// streams alike. Each exchange has the same bounds as over HTTP/1.1 but
// for the watch of its client (docs/http2.md, "To the node").

// h2cUpstream is the HTTP/2 client of the node. It is safe for
// concurrent use.
type h2cUpstream struct {
	h    *Handler
	tr   *http.Transport
	base string // "http://host:port"
	// ctx ends every exchange still running (a drain that ran out).
	ctx    context.Context
	cancel context.CancelFunc
}

func (u *upstream) newH2C() {
	h := u.h
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	d := &net.Dialer{Timeout: h.opts.UpstreamConnectTimeout, KeepAlive: 30 * time.Second}
	c := &h2cUpstream{h: h, base: "http://" + u.addr}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.tr = &http.Transport{
		Protocols:              &protos,
		DialContext:            d.DialContext,
		MaxConnsPerHost:        h.opts.UpstreamMaxConns,
		IdleConnTimeout:        maxIdleTime,
		ResponseHeaderTimeout:  h.opts.UpstreamHeaderTimeout,
		MaxResponseHeaderBytes: upstreamHeaderBytes,
		DisableCompression:     true,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     h2UploadPerStream,
			MaxReceiveBufferPerConnection: h2UploadPerConn,
		},
	}
	u.h2c = c
}

// do sends req to the node over HTTP/2 and reads the head of its answer
// into x.out, as upstream.do does over HTTP/1.1: a body of known length up
// to smallBody taken whole, a larger one streamed (x.upBody).
func (c *h2cUpstream) do(x *exchange, req *fasthttp.Request, hasBody bool) error {
	ctx, cancel := context.WithCancel(c.ctx)
	out := &http.Request{
		Method:     string(req.Header.Method()),
		Host:       string(req.Header.Host()),
		Header:     make(http.Header, 8),
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
	}
	var err error
	if out.URL, err = url.Parse(c.base + string(req.RequestURI())); err != nil {
		cancel()
		return err
	}
	for k, v := range req.Header.All() {
		if hopByHop(k) || eqFold(k, "host") || eqFold(k, "content-length") {
			continue
		}
		name := string(k)
		out.Header[name] = append(out.Header[name], string(trimOWS(v)))
	}
	if hasBody {
		out.Body = io.NopCloser(req.BodyStream())
		out.ContentLength = int64(req.Header.ContentLength())
		if out.ContentLength < 0 {
			out.ContentLength = -1
		}
	}
	// Each read of the answer's body within upstream_read_timeout of the
	// previous one (the head's wait is the Transport's).
	idle := time.AfterFunc(time.Hour, cancel)
	idle.Stop()
	resp, err := c.tr.RoundTrip(out.WithContext(ctx))
	if err != nil {
		cancel()
		if errors.Is(err, context.Canceled) && c.ctx.Err() != nil {
			return errCut
		}
		return err
	}
	hd := &x.out.Header
	hd.SetStatusCode(resp.StatusCode)
	for name, values := range resp.Header {
		if name == "Content-Length" || name == "Date" {
			continue // framing and the date are the server's own
		}
		for _, v := range values {
			hd.Add(name, v)
		}
	}
	noBody := req.Header.IsHead() || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if noBody {
		if resp.ContentLength >= 0 {
			hd.SetContentLength(int(resp.ContentLength))
		}
		resp.Body.Close()
		cancel()
		return nil
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= smallBody {
		b := make([]byte, resp.ContentLength)
		idle.Reset(c.h.opts.UpstreamReadTimeout)
		_, err := io.ReadFull(resp.Body, b)
		idle.Stop()
		resp.Body.Close()
		cancel()
		if err != nil {
			return err
		}
		x.out.SetBody(b)
		hd.SetContentLength(len(b))
		x.bodyTaken = true
		return nil
	}
	hd.SetContentLength(int(max(resp.ContentLength, -1)))
	x.upBody = upBody{s: &h2cBody{rc: resp.Body, idle: idle, cancel: cancel, timeout: c.h.opts.UpstreamReadTimeout}}
	x.answerBody = true
	return nil
}

// h2cBody is the node's answer body over h2c: each read within the
// timeout of the previous one; Close ends the stream.
type h2cBody struct {
	rc      io.ReadCloser
	idle    *time.Timer
	cancel  context.CancelFunc
	timeout time.Duration
	once    sync.Once
}

func (b *h2cBody) Read(p []byte) (int, error) {
	b.idle.Reset(b.timeout)
	n, err := b.rc.Read(p)
	b.idle.Stop()
	if errors.Is(err, context.Canceled) {
		err = errUpstreamReadTimeout
	}
	return n, err
}

func (b *h2cBody) Close() error {
	b.once.Do(func() {
		b.idle.Stop()
		_ = b.rc.Close()
		b.cancel()
	})
	return nil
}

// errUpstreamReadTimeout: the node stalled mid-answer past
// upstream_read_timeout (a timeout, for isTimeout).
var errUpstreamReadTimeout error = timeoutError("the node stalled past server.upstream_read_timeout")

type timeoutError string

func (e timeoutError) Error() string   { return string(e) }
func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }
