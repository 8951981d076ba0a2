package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queueNode is a stand-in node of fixed capacity: Servers requests served
// at a time for Service each, the others queued without bound, first come
// first served (a channel's waiters). It keeps how many requests it holds
// (served and queued) and the most at once.
type queueNode struct {
	URL     string
	Service time.Duration
	slots   chan struct{}
	srv     *http.Server
	now     atomic.Int64
	most    atomic.Int64
	served  atomic.Int64
}

func startQueueNode(servers int, service time.Duration) (*queueNode, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &queueNode{URL: "http://" + ln.Addr().String(), Service: service, slots: make(chan struct{}, servers)}
	n.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.srv.Serve(ln) }()
	return n, nil
}

func (n *queueNode) serve(w http.ResponseWriter, _ *http.Request) {
	held := n.now.Add(1)
	for m := n.most.Load(); held > m && !n.most.CompareAndSwap(m, held); m = n.most.Load() {
	}
	n.slots <- struct{}{}
	time.Sleep(n.Service)
	<-n.slots
	n.now.Add(-1)
	n.served.Add(1)
	_, _ = io.WriteString(w, "served")
}

// Capacity returns the node's answers per second.
func (n *queueNode) Capacity() float64 { return float64(cap(n.slots)) / n.Service.Seconds() }

func (n *queueNode) Close() { _ = n.srv.Close() }

// CrowdOptions configure Crowd.
type CrowdOptions struct {
	Bin, Dir string
	// Duration is how long the crowd sends (default 3 min), after a
	// Warmup (default 5 s: the adaptive limit's first measurement and the
	// fair pace's first busy seconds) that the polite peer's figures and
	// each crowd peer's admissions leave out.
	Duration, Warmup time.Duration
	// Servers and Service are the node's (default 8 at a time, 40 ms
	// each: 200 answers a second).
	Servers int
	Service time.Duration
	// Peers crowd peers (default 16: more than the adaptive limit, so
	// that every share is one slot and the fair pace decides), each with
	// Clients clients at once (default 3, inside concurrency_limit 4),
	// each client sending one request every Pace (default 80 ms: with the
	// defaults, 3× the node's capacity while it answers at once).
	Peers, Clients int
	Pace           time.Duration
	// MaxLimit is adaptive_max_limit (default 16: the node holds at most
	// twice the limit, the fair share's ceiling).
	MaxLimit      int
	Log, Progress io.Writer
}

// CrowdResult is what Crowd measured.
type CrowdResult struct {
	Duration      time.Duration
	Capacity      float64
	MaxLimit      int
	Codes         map[int]int64 // the crowd's answers
	Errors        int64         // the crowd's requests without an answer
	PerPeer       []int64       // each crowd peer's admitted (200) requests
	PoliteSent    int64         // after the warm-up
	PoliteOK      int64
	PoliteCodes   map[int]int64
	NodeMost      int64 // the most requests the node held at once, queued included
	NodeServed    int64
	Shed          float64 // ar_limiter_rejected_total{reason="adaptive"}, all peers
	Limit         []float64
	InflightAfter float64 // limiterd_adaptive_inflight once the crowd went
	Failures      []string
}

// OK reports whether no rule was broken.
func (r *CrowdResult) OK() bool { return len(r.Failures) == 0 }

func (r *CrowdResult) fairness() (lo, mean float64) {
	if len(r.PerPeer) == 0 {
		return 0, 0
	}
	var sum int64
	lo = float64(r.PerPeer[0])
	for _, v := range r.PerPeer {
		sum += v
		lo = min(lo, float64(v))
	}
	return lo, float64(sum) / float64(len(r.PerPeer))
}

func (r *CrowdResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crowd: %d peers for %v against a node of %.0f answers/s (adaptive_max_limit %d)\n",
		len(r.PerPeer), r.Duration.Round(time.Millisecond), r.Capacity, r.MaxLimit)
	fmt.Fprintf(&b, "crowd's answers %v, errors %d; shed (metric) %.0f\n", r.Codes, r.Errors, r.Shed)
	lo, mean := r.fairness()
	fmt.Fprintf(&b, "admitted per crowd peer after the warm-up: mean %.0f, least %.0f (%.0f %% of the mean)\n", mean, lo, 100*lo/max(mean, 1))
	fmt.Fprintf(&b, "polite peer after the warm-up: %d of %d answered 200 (%.1f %%), %v\n",
		r.PoliteOK, r.PoliteSent, 100*float64(r.PoliteOK)/float64(max(r.PoliteSent, 1)), r.PoliteCodes)
	fmt.Fprintf(&b, "node: %d served (%.0f/s, %.0f %% of its capacity), at most %d held at once\n", r.NodeServed,
		float64(r.NodeServed)/r.Duration.Seconds(), 100*float64(r.NodeServed)/r.Duration.Seconds()/r.Capacity, r.NodeMost)
	if len(r.Limit) > 0 {
		lo, hi := r.Limit[0], r.Limit[0]
		for _, v := range r.Limit {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Fprintf(&b, "adaptive limit sampled each second: %.0f to %.0f; in flight once the crowd went: %.0f\n", lo, hi, r.InflightAfter)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	return b.String()
}

// sumMetric sums the series of m named name whose labels contain every
// one of labels.
func sumMetric(m map[string]float64, name string, labels ...string) float64 {
	var s float64
next:
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(k, l) {
				continue next
			}
		}
		s += v
	}
	return s
}

// Crowd starts limiterd with adaptive concurrency on in front of a node of
// fixed capacity that queues what it cannot serve, and sends a crowd of
// peers, each inside its per-peer limits, offering about 3× the node's
// capacity, with one polite peer asking once every 100 ms. The rules: the
// polite peer is answered 200 at least 95 % of the time after the
// warm-up; the node never holds more than twice adaptive_max_limit
// requests (queued ones included: the fair share's ceiling); every shed request is a 503 the metric counts;
// no crowd peer gets less than half the mean admissions (the fair share);
// and once the crowd went nothing is left in flight.
func Crowd(ctx context.Context, o CrowdOptions) (*CrowdResult, error) {
	orDefault(&o.Duration, 3*time.Minute)
	orDefault(&o.Warmup, 5*time.Second)
	orDefault(&o.Service, 40*time.Millisecond)
	orDefault(&o.Pace, 80*time.Millisecond)
	orDefault(&o.Servers, 8)
	orDefault(&o.Peers, 16)
	orDefault(&o.Clients, 3)
	orDefault(&o.MaxLimit, 16)
	node, err := startQueueNode(o.Servers, o.Service)
	if err != nil {
		return nil, err
	}
	defer node.Close()
	// No rate limit is reached: the node's capacity is the subject.
	extra := fmt.Sprintf("adaptive_concurrency = true\nadaptive_min_limit = 2\nadaptive_max_limit = %d\nadaptive_window = 100\n", o.MaxLimit)
	s, err := NewSetup(o.Dir, node.URL, 1<<30, 0, "", extra)
	if err != nil {
		return nil, err
	}
	if err := editConfig(s, []string{`upstream_max_conns = 256`}, nil, o.Clients+1); err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res := &CrowdResult{Capacity: node.Capacity(), MaxLimit: o.MaxLimit, Codes: map[int]int64{}, PoliteCodes: map[int]int64{},
		PerPeer: make([]int64, o.Peers)}
	fail := func(f string, a ...any) { res.Failures = append(res.Failures, fmt.Sprintf(f, a...)) }
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Peers*o.Clients + 4}}
	defer client.CloseIdleConnections()
	get := func(peer string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.Public()+"/info", nil)
		req.Header.Set("X-Forwarded-For", peer)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			return resp.StatusCode, fmt.Errorf("a 503 without Retry-After")
		}
		return resp.StatusCode, nil
	}

	start := time.Now()
	until := start.Add(o.Duration)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range o.Peers {
		peer := fmt.Sprintf("198.51.100.%d", 10+p)
		for range o.Clients {
			wg.Go(func() {
				for next := time.Now(); time.Now().Before(until) && ctx.Err() == nil; {
					t := time.Now()
					code, err := get(peer)
					mu.Lock()
					if err != nil {
						res.Errors++
					} else {
						res.Codes[code]++
						if code == http.StatusOK && t.Sub(start) >= o.Warmup {
							res.PerPeer[p]++
						}
					}
					mu.Unlock()
					next = next.Add(o.Pace)
					if w := time.Until(next); w > 0 {
						time.Sleep(w)
					} else {
						next = time.Now()
					}
				}
			})
		}
	}
	wg.Go(func() {
		for time.Now().Before(until) && ctx.Err() == nil {
			t := time.Now()
			code, err := get("203.0.113.7")
			if t.Sub(start) >= o.Warmup {
				mu.Lock()
				res.PoliteSent++
				if err == nil {
					res.PoliteCodes[code]++
					if code == http.StatusOK {
						res.PoliteOK++
					}
				} else {
					res.PoliteCodes[0]++
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for tick := time.NewTicker(time.Second); time.Now().Before(until) && ctx.Err() == nil; <-tick.C {
			if m, err := Metrics(d.Admin()); err == nil {
				l := sumMetric(m, "limiterd_adaptive_limit", `"general"`)
				mu.Lock()
				res.Limit = append(res.Limit, l)
				mu.Unlock()
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "  %v: adaptive limit %.0f, node holds %d, served %d\n", time.Since(start).Round(time.Second),
						l, node.now.Load(), node.served.Load())
				}
			}
		}
	})
	wg.Wait()
	res.Duration = time.Since(start)
	res.NodeMost, res.NodeServed = node.most.Load(), node.served.Load()

	// The crowd gone, its slots are given back.
	left := -1.0
	for deadline := time.Now().Add(5 * time.Second); left != 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m, err := Metrics(d.Admin())
		if err != nil {
			return nil, err
		}
		left = sumMetric(m, "limiterd_adaptive_inflight", `"general"`)
		res.Shed = sumMetric(m, "ar_limiter_rejected_total", `reason="adaptive"`)
	}
	res.InflightAfter = left
	if left != 0 {
		fail("%.0f requests still in flight by the adaptive count 5 s after the crowd went", left)
	}
	if res.NodeMost > int64(2*o.MaxLimit) {
		fail("the node held %d requests at once, over twice adaptive_max_limit %d (the ceiling)", res.NodeMost, o.MaxLimit)
	}
	if sent := res.Codes[http.StatusServiceUnavailable] + res.PoliteCodes[http.StatusServiceUnavailable]; res.Shed < float64(sent) {
		fail("%d answers 503 but ar_limiter_rejected_total{reason=\"adaptive\"} counts %.0f", sent, res.Shed)
	}
	if res.Codes[http.StatusServiceUnavailable] == 0 {
		fail("nothing shed: the crowd did not overload the node (%v)", res.Codes)
	}
	for code, n := range res.Codes {
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			fail("the crowd got %d answers %d (only 200 and the adaptive 503 expected)", n, code)
		}
	}
	if res.Errors > 0 {
		fail("%d of the crowd's requests got no answer", res.Errors)
	}
	if lo, mean := res.fairness(); lo < mean/2 {
		fail("a crowd peer got %.0f admissions, under half the mean %.0f: the fair share did not hold", lo, mean)
	}
	if res.PoliteSent == 0 {
		fail("the polite peer sent nothing after the warm-up")
	} else if ok := float64(res.PoliteOK) / float64(res.PoliteSent); ok < 0.95 {
		fail("the polite peer got 200 for %.1f %% of its requests (%v), under 95 %%", 100*ok, res.PoliteCodes)
	}
	return res, nil
}
