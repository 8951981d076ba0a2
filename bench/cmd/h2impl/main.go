// Command h2impl serves one small answer over cleartext HTTP/2 (prior
// knowledge) from the two Go implementations limiterd could use, side by
// side, for bench/h2impl.sh to compare under h2load:
//
//   - -xnet: golang.org/x/net/http2's Server.ServeConn on each accepted
//     connection (what lets limiterd keep its own accept loop and caps);
//   - -std: net/http's own, an http.Server whose Protocols are
//     unencrypted HTTP/2 only, serving a listener.
//
// Both answer every request with the same 11-byte JSON body, optionally
// after proxying it to -upstream through an http.Transport (HTTP/1.1, or
// h2c with -upstream-h2c), so that the comparison can include the way to
// the node.
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

func main() {
	xnet := flag.String("xnet", "127.0.0.1:18110", "address of the x/net/http2 server")
	std := flag.String("std", "127.0.0.1:18111", "address of the net/http server")
	upstream := flag.String("upstream", "", "proxy every request to this host:port (empty: answer locally)")
	upH2C := flag.Bool("upstream-h2c", false, "reach -upstream over h2c instead of HTTP/1.1")
	flag.Parse()

	body := []byte(`{"ok":true}`)
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write(body)
	})
	if *upstream != "" {
		tr := &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 10 * time.Second, DisableCompression: true}
		if *upH2C {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = &p
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			out, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+*upstream+r.URL.RequestURI(), nil)
			resp, err := tr.RoundTrip(out)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
	}

	lx, err := net.Listen("tcp", *xnet)
	if err != nil {
		log.Fatal(err)
	}
	h2 := &http2.Server{MaxConcurrentStreams: 100}
	go func() {
		for {
			c, err := lx.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go h2.ServeConn(c, &http2.ServeConnOpts{Handler: h, BaseConfig: &http.Server{}})
		}
	}()

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	s := &http.Server{Addr: *std, Handler: h, Protocols: &p, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 100}}
	log.Fatal(s.ListenAndServe())
}
