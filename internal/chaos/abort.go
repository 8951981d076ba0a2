package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// peerHeader names the peer a stand-in node counts a request for: the
// drivers set it as well as X-Forwarded-For, and limiterd passes it on.
const peerHeader = "X-Chaos-Peer"

// busyNode is a stand-in node that does not notice a client's disconnect:
// each request on /work takes Work whatever happens to its connection, and
// it keeps, per peer, how many it works on now and the most at once.
type busyNode struct {
	URL  string
	Work time.Duration
	mu   sync.Mutex
	now  map[string]int
	max  map[string]int
	srv  *http.Server
	done atomic.Int64
}

func startBusyNode(work time.Duration) (*busyNode, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &busyNode{URL: "http://" + ln.Addr().String(), Work: work, now: map[string]int{}, max: map[string]int{}}
	n.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.srv.Serve(ln) }()
	return n, nil
}

func (n *busyNode) serve(w http.ResponseWriter, r *http.Request) {
	p := r.Header.Get(peerHeader)
	n.mu.Lock()
	n.now[p]++
	n.max[p] = max(n.max[p], n.now[p])
	n.mu.Unlock()
	time.Sleep(n.Work) // r.Context() is not looked at: the node does not notice
	n.mu.Lock()
	n.now[p]--
	n.mu.Unlock()
	n.done.Add(1)
	_, _ = io.WriteString(w, "worked")
}

// most returns the most requests of one peer the node worked on at once,
// and that peer.
func (n *busyNode) most() (int, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, who := 0, ""
	for p, v := range n.max {
		if v > m {
			m, who = v, p
		}
	}
	return m, who
}

func (n *busyNode) Close() { _ = n.srv.Close() }

// editConfig rewrites s's config: server lines after the [server] table's
// first line, admin lines after the [admin] table's, and general's
// concurrency_limit (0: left at 1000).
func editConfig(s *Setup, server, admin []string, concurrency int) error {
	b, err := os.ReadFile(s.Config)
	if err != nil {
		return err
	}
	c := string(b)
	if len(server) > 0 {
		c = strings.Replace(c, "[server]\n", "[server]\n"+strings.Join(server, "\n")+"\n", 1)
	}
	if len(admin) > 0 {
		c = strings.Replace(c, "[admin]\n", "[admin]\n"+strings.Join(admin, "\n")+"\n", 1)
	}
	if concurrency > 0 {
		c = strings.Replace(c, "concurrency_limit = 1000\n", fmt.Sprintf("concurrency_limit = %d\n", concurrency), 1)
	}
	return os.WriteFile(s.Config, []byte(c), 0o600)
}

// orDefault sets an option left at its zero value to v.
func orDefault[T comparable](o *T, v T) {
	var zero T
	if *o == zero {
		*o = v
	}
}

// AbortOptions configure Aborts.
type AbortOptions struct {
	Bin, Dir string
	// Duration is how long the waves come (default 3 min).
	Duration time.Duration
	// Peers is the number of aborting peers (default 4), each with
	// concurrency_limit Limit (default 3); each sends PerWave requests
	// (default 6) a wave, one wave every Every (default 400 ms), and hangs
	// up on each after Patience (default 200 ms); the node works Work
	// (default 1.5 s) on each.
	Peers, Limit, PerWave int
	Every, Patience, Work time.Duration
	Log, Progress         io.Writer
}

// AbortResult is what Aborts measured.
type AbortResult struct {
	Duration             time.Duration
	Limit                int
	Waves, Sent, Refused int64
	Aborted, Answered    int64 // hung up on before an answer; answered in time
	NodeWorked           int64 // requests the node finished
	NodeMost             int   // the most of one peer's requests on the node at once
	NodeMostPeer         string
	Failures             []string
}

// OK reports whether the node never worked on more than the limit of one
// peer's requests, and the waves did reach the limit.
func (r *AbortResult) OK() bool { return len(r.Failures) == 0 }

func (r *AbortResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "aborts: %d waves in %v, %d requests sent: %d hung up on by their client, %d answered in time (%d of them 429)\n",
		r.Waves, r.Duration.Round(time.Millisecond), r.Sent, r.Aborted, r.Answered, r.Refused)
	fmt.Fprintf(&b, "node: %d requests worked; the most of one peer's at once %d (%s), concurrency_limit %d\n",
		r.NodeWorked, r.NodeMost, r.NodeMostPeer, r.Limit)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	return b.String()
}

// Aborts starts limiterd in front of a node that works on every request
// for a while and does not notice a closed connection, and sends waves of
// requests from peers with a small concurrency_limit whose clients hang up
// before the node answers: limiterd holds each slot until the node has
// answered, so the node never works on more than concurrency_limit of one
// peer's requests.
func Aborts(ctx context.Context, o AbortOptions) (*AbortResult, error) {
	orDefault(&o.Duration, 3*time.Minute)
	orDefault(&o.Every, 400*time.Millisecond)
	orDefault(&o.Patience, 200*time.Millisecond)
	orDefault(&o.Work, 1500*time.Millisecond)
	orDefault(&o.Peers, 4)
	orDefault(&o.Limit, 3)
	orDefault(&o.PerWave, 6)
	node, err := startBusyNode(o.Work)
	if err != nil {
		return nil, err
	}
	defer node.Close()
	// A leaky limit no wave reaches: the concurrency limit is the subject.
	s, err := NewSetup(o.Dir, node.URL, 1<<30, 0, "", "")
	if err != nil {
		return nil, err
	}
	if err := editConfig(s, []string{`upstream_max_conns = 256`}, nil, o.Limit); err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res := &AbortResult{Limit: o.Limit}
	one := func(peer string) {
		c, err := net.DialTimeout("tcp", s.Public, 5*time.Second)
		if err != nil {
			return
		}
		defer c.Close()
		atomic.AddInt64(&res.Sent, 1)
		fmt.Fprintf(c, "GET /work HTTP/1.1\r\nHost: node\r\nX-Forwarded-For: %s\r\n%s: %s\r\n\r\n", peer, peerHeader, peer)
		_ = c.SetReadDeadline(time.Now().Add(o.Patience))
		var b [12]byte
		if n, _ := io.ReadFull(c, b[:]); n < 12 {
			atomic.AddInt64(&res.Aborted, 1)
			return
		}
		atomic.AddInt64(&res.Answered, 1)
		if string(b[9:]) == "429" {
			atomic.AddInt64(&res.Refused, 1)
		}
	}
	start := time.Now()
	end := start.Add(o.Duration)
	lastProgress := start
	var wg sync.WaitGroup
	for time.Now().Before(end) && ctx.Err() == nil {
		res.Waves++
		for p := range o.Peers {
			peer := fmt.Sprintf("192.0.2.%d", 10+p)
			for range o.PerWave {
				wg.Go(func() { one(peer) })
			}
		}
		if o.Progress != nil && time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			m, who := node.most()
			fmt.Fprintf(o.Progress, "  %v: %d waves, node's most of one peer %d (%s)\n", time.Since(start).Round(time.Second), res.Waves, m, who)
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.Every):
		}
	}
	wg.Wait()
	res.Duration = time.Since(start)
	// Let the node finish what it works on.
	time.Sleep(o.Work + 500*time.Millisecond)
	res.NodeMost, res.NodeMostPeer = node.most()
	res.NodeWorked = node.done.Load()
	if res.NodeMost > o.Limit {
		res.Failures = append(res.Failures, fmt.Sprintf("the node worked on %d of %s's requests at once, concurrency_limit %d", res.NodeMost, res.NodeMostPeer, o.Limit))
	}
	if res.Refused == 0 {
		res.Failures = append(res.Failures, "no request was refused: the waves never reached the limit")
	}
	if res.Aborted == 0 || res.NodeWorked == 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("%d requests hung up on, %d worked: the attack did not run", res.Aborted, res.NodeWorked))
	}
	return res, nil
}
