package chaos

import (
	"net"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// Upstream is the node behind limiterd: a fasthttp server on loopback
// that answers every request 200 with a small JSON body (POST /tx too, so
// that the data plane refunds it: a reduction). Safe for concurrent use.
type Upstream struct {
	URL    string
	Served atomic.Int64
	ln     net.Listener
}

// StartUpstream listens on a free port of 127.0.0.1.
func StartUpstream() (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{URL: "http://" + ln.Addr().String(), ln: ln}
	body := []byte(`{"ok":true}`)
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			u.Served.Add(1)
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
	}
	go func() { _ = s.Serve(ln) }()
	return u, nil
}

// Close stops listening.
func (u *Upstream) Close() { _ = u.ln.Close() }
