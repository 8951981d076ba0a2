package limiter_test

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// A limiter in front of an HTTP handler: every request is checked against
// its peer's limits in its route's group, and an admitted one holds its
// slot until the handler has answered.
func Example() {
	lim, err := limiter.New(memory.New(), time.Now(), limiter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	node := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	http.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := lim.PeerOf(r.RemoteAddr, r.Header)
		d := lim.Check(time.Now(), limiter.Request{Method: r.Method, Path: r.URL.Path, Peer: p})
		if !d.Allowed {
			w.Header().Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return
		}
		defer d.Release()
		node.ServeHTTP(w, r)
	}))
	go func() { // the ticks of the entries no request touches
		for now := range time.Tick(time.Second) {
			lim.Tick(now)
		}
	}()
	// http.ListenAndServe(":1985", nil)
}

// The Arweave node's general group admits 450 requests of one peer per
// 30-second tick (leaky_limit 450), then rejects until the next tick.
func ExampleLimiter_Check() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim, err := limiter.New(memory.New(), t0, limiter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	p, _ := lim.ParsePeer("203.0.113.7")
	req := limiter.Request{Method: "GET", Path: "/info", Peer: p}
	admitted := 0
	for i := range 500 {
		d := lim.Check(t0.Add(time.Duration(i)*time.Millisecond), req)
		if d.Allowed {
			admitted++
			d.Release()
		} else if admitted == 450 && i == 450 {
			fmt.Println("rejected:", d.Reason, "in group", lim.GroupName(d.Group), "retry after", d.RetryAfter, "s")
		}
	}
	fmt.Println("admitted:", admitted)
	d := lim.Check(t0.Add(30*time.Second), req) // the next leaky tick
	fmt.Println("after the tick:", d.Allowed)
	// Output:
	// rejected: rate_limit in group general retry after 30 s
	// admitted: 450
	// after the tick: true
}

// A Config built in code: a group of its own for the chunk routes, with
// 2 requests in flight and 100 tokens a minute per peer; every other path
// falls in general, which takes the Arweave node's defaults.
func ExampleConfig() {
	chunk := limiter.ArweaveGroups()[limiter.GroupGeneral]
	chunk.ConcurrencyLimit = 2
	chunk.LeakyLimit, chunk.LeakyTickReduction, chunk.LeakyTickInterval = 100, 100, 60_000
	cfg := limiter.Config{
		Groups: map[string]limiter.GroupSettings{"chunk": chunk},
		Routes: []limiter.RouteRule{{Group: "chunk", Paths: []string{"/chunk/**"}}},
	}
	lim, err := limiter.New(memory.New(), time.Now(), cfg)
	if err != nil {
		panic(err)
	}
	p, _ := lim.ParsePeer("2001:db8::1")
	a := lim.Check(time.Now(), limiter.Request{Method: "GET", Path: "/chunk/42", Peer: p})
	b := lim.Check(time.Now(), limiter.Request{Method: "GET", Path: "/chunk/43", Peer: p})
	c := lim.Check(time.Now(), limiter.Request{Method: "GET", Path: "/chunk/44", Peer: p})
	fmt.Println(lim.GroupName(a.Group), a.Allowed, b.Allowed, c.Allowed, c.Reason)
	a.Release()
	b.Release()
	// Output: chunk true true false concurrency
}
