// Command barefast is a baseline of bench/proxy.sh: a bare reverse proxy on
// fasthttp.Server and fasthttp.HostClient, as fasthttp's own examples and
// most fasthttp proxies write one (the client's request passed on in place,
// the answer read into the server's response, X-Forwarded-For set), with no
// limiter, no streaming and none of limiterd's checks: what the data plane
// would cost with nothing of limiterd in it.
package main

import (
	"flag"
	"log"
	"net"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18087", "address")
	upstream := flag.String("upstream", "127.0.0.1:18080", "upstream host:port")
	flag.Parse()
	hc := &fasthttp.HostClient{Addr: *upstream, MaxConns: 1024}
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			req := &ctx.Request
			req.Header.Del("Connection")
			if tcp, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
				req.Header.Set("X-Forwarded-For", tcp.IP.String())
			}
			if err := hc.Do(req, &ctx.Response); err != nil {
				ctx.Error("Bad Gateway", fasthttp.StatusBadGateway)
				return
			}
			ctx.Response.Header.Del("Connection")
		},
		NoDefaultServerHeader: true,
	}
	log.Fatal(s.ListenAndServe(*addr))
}
