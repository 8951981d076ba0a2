// Command bareproxy is the baseline of bench/proxy.sh: an
// httputil.ReverseProxy with no limiter, with the same transport settings
// as limiterd's proxy; -pool adds
// limiterd's buffer pool too, so that (a) against it isolates the limiter.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18082", "address")
	upstream := flag.String("upstream", "http://127.0.0.1:18080", "upstream")
	pool := flag.Bool("pool", false, "recycle copy buffers as limiterd does (a sync.Pool BufferPool)")
	flag.Parse()
	up, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up); pr.SetXForwarded(); pr.Out.Host = pr.In.Host },
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	if *pool {
		p.BufferPool = &bufferPool{}
	}
	log.Fatal(http.ListenAndServe(*addr, p))
}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
