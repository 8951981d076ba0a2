package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// slowReader asks for a large answer as the peer xff and reads its head
// and a few bytes, then reads no more until closed: its answer can only
// wait, in limiterd or in the socket's buffers (kept small).
func slowReader(t *testing.T, addr, path, xff string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: %s\r\n\r\n", path, xff)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 1024)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("slow reader %s: %q %v", xff, line, err)
	}
	return c
}

// slowReadersPlane is a plane whose node answers /chunk/big with big bytes
// at once and /info with a few, its pool upstream_max_conns = pool, peers
// named by X-Forwarded-For from 127.0.0.1.
func slowReadersPlane(t *testing.T, big, pool int, opts func(*proxy.Options)) *plane {
	body := make([]byte, big)
	return newPlane(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunk/big" {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.Write(body)
			return
		}
		io.WriteString(w, "from the node")
	}, func(o *proxy.Options) {
		o.UpstreamMaxConns = pool
		o.UpstreamConnectTimeout = time.Second
		o.SendTimeout = time.Minute
		if opts != nil {
			opts(o)
		}
	}, func(c *limiter.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.ForwardedHeader = peer.ForwardedXFF
	})
}

// victimGets times n requests of GET /info from the peer xff, one at a
// time, and returns their latencies and statuses.
func victimGets(t *testing.T, p *plane, xff string, n int) ([]time.Duration, []int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var took []time.Duration
	var codes []int
	for range n {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/info", nil)
		req.Header.Set("X-Forwarded-For", xff)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
		codes = append(codes, resp.StatusCode)
	}
	return took, codes
}

// TestSlowReadersDoNotHoldThePool: slow readers, each a peer of its own
// within its limits, hold twice the node's pool size in 8 MiB answers
// they do not read; another peer is still answered, never 504, because
// the answers wait in limiterd's buffers (memory, then temporary files,
// within their bounds) and the node's connections went back to the pool.
// With the buffers off the same readers hold the whole pool, and the
// victim gets 504 after upstream_connect_timeout. The latency figure is
// internal/chaos's slow-readers run.
func TestSlowReadersDoNotHoldThePool(t *testing.T) {
	const pool, big = 4, 8 << 20
	const memPer, memTotal, diskPer, diskTotal = 256 << 10, 1 << 20, 16 << 20, 64 << 20
	dir := t.TempDir()
	p := slowReadersPlane(t, big, pool, func(o *proxy.Options) {
		o.AnswerMemory, o.AnswerMemoryTotal = memPer, memTotal
		o.AnswerDisk, o.AnswerDiskTotal, o.AnswerTempDir = diskPer, diskTotal, dir
	})
	before, _ := victimGets(t, p, "198.51.100.1", 20)
	var readers []net.Conn
	for i := range 2 * pool {
		readers = append(readers, slowReader(t, p.addr, "/chunk/big", fmt.Sprintf("203.0.113.%d", i+1)))
	}
	// Every answer is in, in limiterd's buffers or the sockets'.
	eventually(t, "the answers buffered", func() bool {
		mem, disk := proxy.AnswerBytes(p.h)
		return mem+disk > int64(2*pool)*(big-8<<20/2)
	})
	took, codes := victimGets(t, p, "198.51.100.1", 20)
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("the victim's request %d while the readers held their answers: %d", i+1, c)
		}
	}
	mem, disk := proxy.AnswerBytes(p.h)
	if max := int64(memTotal + 2*pool*proxy.AnswerChunk); mem > max {
		t.Errorf("%d bytes of answers in memory, over the bound %d", mem, max)
	}
	if disk > diskTotal {
		t.Errorf("%d bytes of answers on disk, over the bound %d", disk, diskTotal)
	}
	if n := p.h.Counts.AnswerSpills.Load(); n < uint64(2*pool) {
		t.Errorf("%d answers spilled to a file, want %d", n, 2*pool)
	}
	slices.Sort(before)
	slices.Sort(took)
	t.Logf("victim: median %v unloaded, %v with %d answers held (max %v)", before[len(before)/2], took[len(took)/2], 2*pool, took[len(took)-1])

	for _, c := range readers {
		c.Close()
	}
	p.settled()
	eventually(t, "the buffers given back", func() bool { mem, disk := proxy.AnswerBytes(p.h); return mem == 0 && disk == 0 })
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	t.Run("buffers off", func(t *testing.T) {
		q := slowReadersPlane(t, big, pool, func(o *proxy.Options) {
			o.AnswerMemory, o.AnswerDisk = -1, -1
		})
		for i := range pool {
			slowReader(t, q.addr, "/chunk/big", fmt.Sprintf("203.0.113.%d", i+1))
		}
		if _, codes := victimGets(t, q, "198.51.100.1", 1); codes[0] != http.StatusGatewayTimeout {
			t.Errorf("the victim with the pool held by slow readers: %d, want 504 (the attack this guards against)", codes[0])
		}
	})
}
