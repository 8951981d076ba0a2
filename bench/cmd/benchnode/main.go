// Command benchnode is the fast upstream of bench/proxy.sh and
// bench/check.sh: a fasthttp server that answers every request with a
// small JSON body, as cheaply as it can, so that the proxies in front of it
// get the machine's CPU; GET /big?size=N streams N bytes (for the memory of
// a large download); GET /__count answers how many requests it served
// (for "none of the rejected requests reached the node"). With -h2c-listen
// it also answers on a net/http server that speaks HTTP/1.1 and cleartext
// HTTP/2 on one port, as the node does (for bench/h2.sh's comparison of
// limiterd's ways to the node).
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18080", "address")
	h2cAddr := flag.String("h2c-listen", "", "address of a net/http server speaking HTTP/1.1 and h2c (none if empty)")
	flag.Parse()
	body := []byte(`{"ok":true}`)
	if *h2cAddr != "" {
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(true)
		hs := &http.Server{Addr: *h2cAddr, Protocols: &protos, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1000},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			})}
		go func() { log.Fatal(hs.ListenAndServe()) }()
	}
	var served atomic.Int64
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) == "/__count" {
				ctx.SetBodyString(strconv.FormatInt(served.Load(), 10))
				return
			}
			served.Add(1)
			if string(ctx.Path()) == "/big" {
				n, _ := strconv.ParseInt(string(ctx.QueryArgs().Peek("size")), 10, 64)
				ctx.SetBodyStream(&zeros{n: n}, int(n))
				return
			}
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
	}
	log.Fatal(s.ListenAndServe(*addr))
}

// zeros reads n zero bytes.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	m := min(int64(len(p)), z.n)
	clear(p[:m])
	z.n -= m
	return int(m), nil
}
