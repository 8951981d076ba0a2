// Command rategen is bench/proxy.sh's fixed-rate load generator (wrk -R is
// not in Debian's wrk): it sends GET requests at a constant rate, whatever
// the answers' latency, over a pool of keep-alive connections, each
// request naming one of 10 000 peers in X-Forwarded-For (as bench/xff.lua),
// and reports the latency percentiles measured from when each request was
// due, not from when it could be sent, so that a server that stalls is
// charged for the requests queued behind the stall (no coordinated
// omission).
//
//	rategen -url http://127.0.0.1:18081/info -rate 10000 -duration 10s
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	target := flag.String("url", "http://127.0.0.1:18081/info", "URL to GET")
	rate := flag.Float64("rate", 1000, "requests per second")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	conns := flag.Int("conns", 64, "keep-alive connections (and senders)")
	peers := flag.Int("peers", 10000, "distinct X-Forwarded-For addresses (0: none)")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil {
		log.Fatal(err)
	}
	hc := &fasthttp.HostClient{Addr: u.Host, MaxConns: *conns, MaxConnWaitTimeout: time.Minute,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}

	total := int(*rate * duration.Seconds())
	type ticket struct {
		i   int
		due time.Time
	}
	tickets := make(chan ticket, total)
	lat := make([][]time.Duration, *conns)
	var errs, non2xx atomic.Int64
	var wg sync.WaitGroup
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			for t := range tickets {
				req.Reset()
				req.SetRequestURI(*target)
				if *peers > 0 {
					p := t.i % *peers
					req.Header.Set("X-Forwarded-For", fmt.Sprintf("11.%d.%d.1", p/256, p%256))
				}
				if err := hc.Do(req, resp); err != nil {
					errs.Add(1)
				} else if resp.StatusCode() < 200 || resp.StatusCode() > 299 {
					non2xx.Add(1)
				}
				lat[w] = append(lat[w], time.Since(t.due))
			}
		}()
	}
	start := time.Now().Add(10 * time.Millisecond)
	for i := 0; i < total; {
		now := time.Now()
		due := min(total, int(now.Sub(start).Seconds()**rate)+1)
		for ; i < due; i++ {
			tickets <- ticket{i: i, due: start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))}
		}
		time.Sleep(500 * time.Microsecond)
	}
	close(tickets)
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	fmt.Fprintf(os.Stdout, "rate %.0f/s for %s: %d requests in %.2fs (%.0f/s), %d errors, %d non-2xx; latency p50 %s p90 %s p99 %s p99.9 %s max %s\n",
		*rate, *duration, len(all), elapsed.Seconds(), float64(len(all))/elapsed.Seconds(), errs.Load(), non2xx.Load(),
		pct(0.5), pct(0.9), pct(0.99), pct(0.999), pct(1))
}
