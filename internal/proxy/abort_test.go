package proxy_test

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
)

// busyNode is a stand-in node that does not notice a client's disconnect
// while it works: each request takes work, whatever happens to its
// connection, and it keeps the most it was ever working on at once.
type busyNode struct {
	work     time.Duration
	now, max atomic.Int64
}

func (n *busyNode) serve(w http.ResponseWriter, r *http.Request) {
	cur := n.now.Add(1)
	for {
		m := n.max.Load()
		if cur <= m || n.max.CompareAndSwap(m, cur) {
			break
		}
	}
	time.Sleep(n.work)
	n.now.Add(-1)
	io.WriteString(w, "worked")
}

// TestAbortingClientsBoundedOnTheNode: a peer with concurrency_limit 3
// that sends a wave of requests to a slow node every 400 ms, and hangs up
// on each after 200 ms, never has more than 3 of them on the node: a slot is held until
// the node has answered, not until the client goes (docs/limiting.md,
// "In-flight release"). The long variant is internal/chaos's abort run.
func TestAbortingClientsBoundedOnTheNode(t *testing.T) {
	const limit, waves, perWave = 3, 4, 6
	node := &busyNode{work: 1500 * time.Millisecond}
	p := newPlane(t, node.serve, func(o *proxy.Options) { o.UpstreamMaxConns = 64 }, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.ConcurrencyLimit = limit
		c.Groups["general"] = g
	})
	var refused atomic.Int64
	for i := range waves {
		if i > 0 {
			time.Sleep(200 * time.Millisecond) // a wave every 400 ms
		}
		var wg sync.WaitGroup
		for range perWave {
			wg.Go(func() {
				c, err := net.Dial("tcp", p.addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				io.WriteString(c, "GET /info HTTP/1.1\r\nHost: a\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				var b [12]byte
				if n, _ := io.ReadFull(c, b[:]); n == 12 && string(b[9:]) == "429" {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
	}
	p.settled()
	if m := node.max.Load(); m > limit {
		t.Errorf("the node worked on %d of the peer's requests at once, concurrency_limit is %d", m, limit)
	}
	if refused.Load() == 0 {
		t.Error("no request was refused: the waves never reached the limit")
	}
}
