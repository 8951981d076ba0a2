package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
)

// nodeClient behaves as the Arweave node's HTTP client does toward a peer
// (docs/http2.md): over HTTP/2, a pool of eight prior-knowledge
// connections, requests multiplexed on them round-robin; over HTTP/1.1,
// eight keep-alive connections, one request each at a time. It reads the
// rate-limit fields of every reply.
type nodeClient struct {
	clients []*http.Client
	next    atomic.Uint32
}

func newNodeClient(t *testing.T, h2 bool) *nodeClient {
	n := &nodeClient{}
	for i := 0; i < 8; i++ {
		tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
		if h2 {
			var protos http.Protocols
			protos.SetUnencryptedHTTP2(true)
			tr.Protocols = &protos
		}
		t.Cleanup(tr.CloseIdleConnections)
		n.clients = append(n.clients, &http.Client{Transport: tr, Timeout: 30 * time.Second})
	}
	return n
}

// reply is what the node's client keeps of an answer.
type reply struct {
	status                     int
	remaining, limit, retry    string
	proto                      string
	resetAmount, resetRemained string
}

func (n *nodeClient) get(t *testing.T, url string) reply {
	c := n.clients[n.next.Add(1)%uint32(len(n.clients))]
	resp, err := c.Get(url)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h := resp.Header
	return reply{status: resp.StatusCode, remaining: h.Get("ratelimit-remaining"), limit: h.Get("ratelimit-limit"),
		retry: h.Get("retry-after"), proto: resp.Proto, resetAmount: h.Get("ratelimit-reset-amount"), resetRemained: h.Get("ratelimit-reset")}
}

// TestHTTP2SameDecisionsAsHTTP1: a client that behaves as the node's gets
// the same decisions, statuses and rate-limit fields over HTTP/2 as over
// HTTP/1.1, request for request.
func TestHTTP2SameDecisionsAsHTTP1(t *testing.T) {
	limits := func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction = 20, 20
		c.Groups["general"] = g
	}
	run := func(h2 bool) []reply {
		p := newPlane(t, nil, nil, limits)
		n := newNodeClient(t, h2)
		var got []reply
		for i := 0; i < 30; i++ {
			r := n.get(t, p.base+"/info")
			if h2 != strings.HasPrefix(r.proto, "HTTP/2") {
				t.Fatalf("h2 %v: the answer came over %s", h2, r.proto)
			}
			r.proto = ""
			got = append(got, r)
		}
		p.settled()
		return got
	}
	h1, h2 := run(false), run(true)
	admitted := 0
	for i := range h1 {
		// The seconds to the next tick may differ by one: the two runs are
		// on the real clock, one after the other.
		a, b := h1[i], h2[i]
		ra, _ := strconv.Atoi(a.resetRemained)
		rb, _ := strconv.Atoi(b.resetRemained)
		if ra-rb == 1 || rb-ra == 1 {
			a.resetRemained = b.resetRemained
		}
		if a != b {
			t.Errorf("request %d: HTTP/1.1 %#v, HTTP/2 %#v", i, h1[i], h2[i])
		}
		if h1[i].status == 200 {
			admitted++
		}
		if h2[i].remaining == "" || h2[i].limit == "" {
			t.Errorf("request %d over HTTP/2: no rate-limit fields: %+v", i, h2[i])
		}
	}
	if admitted != 20 || h2[29].status != 429 || h2[29].retry == "" {
		t.Fatalf("%d admitted, the last %+v", admitted, h2[29])
	}
}

// TestHTTP2InFlightPerPeer: to a slow node, such a client gets 64
// requests in flight over HTTP/2 (within its concurrency limit), where
// over HTTP/1.1 it gets 8; every slot is released after.
func TestHTTP2InFlightPerPeer(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2=", h2), func(t *testing.T) {
			var mu sync.Mutex
			held, most := 0, 0
			release := make(chan struct{})
			p := newPlane(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				select {
				case <-release:
				case <-time.After(2 * time.Second):
				}
				mu.Lock()
				held--
				mu.Unlock()
				io.WriteString(w, "slow")
			}, nil)
			n := newNodeClient(t, h2)
			var wg sync.WaitGroup
			for i := 0; i < 64; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r := n.get(t, p.base+"/info"); r.status != 200 {
						t.Errorf("status %d", r.status)
					}
				}()
			}
			want := 8
			if h2 {
				want = 64
			}
			eventually(t, fmt.Sprintf("%d in flight at the node", want), func() bool {
				mu.Lock()
				defer mu.Unlock()
				return most >= want
			})
			if got := p.inflight(); got != int64(want) {
				t.Errorf("the limiter counts %d in flight, the node holds %d", got, want)
			}
			close(release)
			wg.Wait()
			p.settled()
			if !h2 && most > 8 {
				t.Fatalf("HTTP/1.1: %d in flight", most)
			}
		})
	}
}

// TestHTTP2ResetHoldsSlot: a stream the client resets while the node
// thinks keeps its slot until the node has answered (docs/limiting.md,
// "In-flight release"), then releases it once.
func TestHTTP2ResetHoldsSlot(t *testing.T) {
	release := make(chan struct{})
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "late") }, nil)
	r := dialH2(t, p)
	r.get(1, "/info")
	eventually(t, "the request at the node", func() bool { return p.hits.Load() == 1 })
	if err := r.fr.WriteRSTStream(1, 0x8); err != nil { // CANCEL
		t.Fatal(err)
	}
	r.c.Close() // and the connection, too
	time.Sleep(300 * time.Millisecond)
	if n := p.inflight(); n != 1 {
		t.Fatalf("%d in flight after the reset, before the node answered", n)
	}
	close(release)
	p.idle()
}

// TestHTTP2StreamsCountTowardConnsPerIP: a stream beyond the first of a
// connection counts toward server.max_conns_per_ip.
func TestHTTP2StreamsCountTowardConnsPerIP(t *testing.T) {
	release := make(chan struct{})
	p := newPlane(t, func(w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "late") },
		func(o *proxy.Options) { o.MaxConnsPerIP = 3 })
	r := dialH2(t, p)
	for id := uint32(1); id <= 5; id += 2 { // the connection and two more streams: 3
		r.get(id, "/info")
	}
	eventually(t, "three at the node", func() bool { return p.hits.Load() == 3 })
	r.get(7, "/info")
	if st, _ := r.answer(7); st != "429" {
		t.Fatalf("a fourth stream: %q", st)
	}
	close(release)
	// The three answers, in whatever order they come.
	got := map[uint32]string{}
	for len(got) < 3 {
		f, ok := r.next(func(f http2.Frame) bool { _, ok := f.(*http2.MetaHeadersFrame); return ok }).(*http2.MetaHeadersFrame)
		if !ok {
			t.Fatal("the connection ended before the three answers")
		}
		got[f.StreamID] = f.PseudoValue("status")
	}
	for id := uint32(1); id <= 5; id += 2 {
		if got[id] != "200" {
			t.Fatalf("stream %d: %q", id, got[id])
		}
	}
	r.get(9, "/info")
	if st, _ := r.answer(9); st != "200" {
		t.Fatalf("after the others ended: %q", st)
	}
	r.c.Close()
	p.idle()
}
