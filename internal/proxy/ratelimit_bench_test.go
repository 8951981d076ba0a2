package proxy

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// BenchmarkRateLimitFields is what writing the rate-limit fields of one
// admitted general request (2.9.7's groups: a window and a bucket) costs
// on the public listener, per server.ratelimit_headers set, into the
// header of a small answer of the node.
// go test -run '^$' -bench RateLimitFields -benchmem ./proxy
func BenchmarkRateLimitFields(b *testing.B) {
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(memory.New(), t0, limiter.Config{Groups: limiter.ArweaveGroups297(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		b.Fatal(err)
	}
	p, err := lim.ParsePeer("192.0.2.1")
	if err != nil {
		b.Fatal(err)
	}
	general, _ := lim.GroupID("general")
	d := lim.Decide(t0.Add(10*time.Second), p, general)
	d.Release()
	for _, set := range []ratelimit.Set{ratelimit.SetNone, ratelimit.SetIETF, ratelimit.SetArweave, ratelimit.SetBoth} {
		b.Run(set.String(), func(b *testing.B) {
			h := New(lim, Options{RateLimitHeaders: set})
			var resp fasthttp.Response
			var scratch []byte
			b.ReportAllocs()
			for b.Loop() {
				resp.Header.Reset()
				resp.Header.Set("Content-Type", "application/json")
				resp.Header.Set("Content-Length", "11")
				scratch = h.setPublicFields(&resp.Header, &d, scratch, false)
			}
		})
	}
}
