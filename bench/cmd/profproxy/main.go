// Command profproxy serves limiterd's public listener as the daemon wires
// it (the config file loaded and validated, the limiter built from it, the
// proxy.Handler with the [server] table's options), without the admin
// listener and the database, and writes a CPU profile of a given span:
// bench/proxy.sh runs it under the same load as limiterd to show where the
// data plane's time goes.
//
//	profproxy -config limiterd.toml -after 2s -for 8s -o cpu.pprof
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

func main() {
	path := flag.String("config", "limiterd.toml", "config file")
	after := flag.Duration("after", 2*time.Second, "start profiling this long after listening")
	span := flag.Duration("for", 8*time.Second, "profile this long")
	out := flag.String("o", "cpu.pprof", "profile file")
	flag.Parse()
	cfg, _, err := config.Load(config.Source{Path: *path, Required: true})
	if err != nil {
		log.Fatal(err)
	}
	lc, err := cfg.Limiter()
	if err != nil {
		log.Fatal(err)
	}
	lim, err := limiter.New(memory.New(), time.Now(), lc)
	if err != nil {
		log.Fatal(err)
	}
	up, _ := url.Parse(cfg.Server.Upstream)
	s := cfg.Server
	if s.MaxConnsPerIP == 0 {
		s.MaxConnsPerIP = -1 // no cap, as the daemon reads 0
	}
	h := proxy.New(lim, proxy.Options{
		Upstream: up, MaxRequestBody: s.MaxRequestBody, ReadHeaderTimeout: s.ReadHeaderTimeout,
		IdleTimeout: s.IdleTimeout, ClientBodyTimeout: s.ClientBodyTimeout, SendTimeout: s.SendTimeout,
		UpstreamConnectTimeout: s.UpstreamConnectTimeout, UpstreamHeaderTimeout: s.UpstreamHeaderTimeout,
		UpstreamReadTimeout: s.UpstreamReadTimeout, UpstreamMaxConns: s.UpstreamMaxConns,
		MaxConns: s.MaxConns, MaxConnsPerIP: s.MaxConnsPerIP,
	})
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go ticker.Every(ctx, time.Second, func() { lim.Tick(time.Now()) })
	go func() {
		time.Sleep(*after)
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		time.Sleep(*span)
		runtime.ReadMemStats(&m1)
		pprof.StopCPUProfile()
		f.Close()
		if mf, err := os.Create(*out + ".allocs"); err == nil {
			pprof.Lookup("allocs").WriteTo(mf, 0)
			mf.Close()
		}
		log.Printf("during the profile: %d mallocs, %d bytes allocated, %d GCs",
			m1.Mallocs-m0.Mallocs, m1.TotalAlloc-m0.TotalAlloc, m1.NumGC-m0.NumGC)
		cancel()
		h.Shutdown(context.Background())
	}()
	if err := h.Serve(ln); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
}
