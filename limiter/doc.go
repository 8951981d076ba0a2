// Package limiter decides, for each request a node's HTTP API receives,
// whether its peer may have it now: the Arweave node's hybrid limiter —
// per-peer concurrency, then a sliding window, then leaky-bucket tokens —
// per route group, exactly as the node computes it, or one of the other
// algorithms a group may choose (package algo).
//
// A Limiter is built from a Config (the groups and their settings, the
// routes that map a path to a group, exempt and denied addresses, the
// trusted proxies) and a Backend, where the state of every (peer, group)
// lives: package memory keeps it in this process; limiterd's cluster mode
// keeps it in Redis. The way of a request:
//
//	lim, err := limiter.New(memory.New(), time.Now(), limiter.DefaultConfig())
//	...
//	p := lim.PeerOf(r.RemoteAddr, r.Header)                       // who asks
//	d := lim.Check(time.Now(), limiter.Request{Method: r.Method, Path: r.URL.Path, Peer: p})
//	if !d.Allowed {                                                 // 429, or 403 for a denied peer
//		w.Header().Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
//		...
//	}
//	defer d.Release()                                              // once the node has answered
//
// and, about once a second, lim.Tick(time.Now()) applies the leaky and
// cleanup ticks to the entries no request touched.
//
// The package is the pure core of limiterd: it imports the standard
// library and its own sub-packages only, starts no goroutine, and never
// reads the clock — every call that depends on time takes it as an
// argument, so a program, its tests and its benchmarks drive the same code
// on a real or a fake timeline. The behaviour it implements is written
// down in limiterd's docs/limiting.md.
package limiter
