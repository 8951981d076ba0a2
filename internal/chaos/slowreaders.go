package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// SlowReadersOptions configure SlowReaders.
type SlowReadersOptions struct {
	Bin, Dir string
	// Duration is how long the phases alternate (default 3 min); Phase is
	// one phase's length (default 6 s).
	Duration, Phase time.Duration
	// Pool is server.upstream_max_conns (default 4); Readers the slow
	// readers, each a peer of its own (default twice Pool); Size their
	// answer's (default 8 MiB).
	Pool, Readers, Size int
	// Unbuffered turns the answers' buffers off (answer_memory and
	// answer_disk 0): the attack as it was, for a baseline.
	Unbuffered    bool
	Log, Progress io.Writer
}

// SlowReadersResult is what SlowReaders measured.
type SlowReadersResult struct {
	Duration                      time.Duration
	Pool, Readers                 int
	Rounds                        int   // held phases
	Held                          int64 // answers the readers held (their head read, the rest not)
	Idle, Loaded                  []time.Duration
	Codes                         map[int]int
	Errors                        int
	Spilled, MemoryPeak, DiskPeak float64
	BuffersAfter                  float64 // bytes held once the readers went
	Failures                      []string
}

// OK reports whether the victim was answered within 2× its unloaded
// latency (medians) and never 504, every round holding the readers'
// answers.
func (r *SlowReadersResult) OK() bool { return len(r.Failures) == 0 }

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Ratio is the victim's median while the answers are held over its
// median unloaded.
func (r *SlowReadersResult) Ratio() float64 {
	if median(r.Idle) == 0 {
		return 0
	}
	return float64(median(r.Loaded)) / float64(median(r.Idle))
}

func (r *SlowReadersResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "slow readers: %d rounds in %v, each %d readers holding %d answers against upstream_max_conns %d (%d held in all)\n",
		r.Rounds, r.Duration.Round(time.Millisecond), r.Readers, r.Readers, r.Pool, r.Held)
	fmt.Fprintf(&b, "victim unloaded: %d requests, median %v, p99 %v\n", len(r.Idle), median(r.Idle).Round(time.Microsecond), pct(r.Idle, .99).Round(time.Microsecond))
	fmt.Fprintf(&b, "victim while held: %d requests, median %v, p99 %v, slowest %v; ratio of medians %.2f\n", len(r.Loaded),
		median(r.Loaded).Round(time.Microsecond), pct(r.Loaded, .99).Round(time.Microsecond), pct(r.Loaded, 1).Round(time.Microsecond), r.Ratio())
	fmt.Fprintf(&b, "victim's answers %v, errors %d; answers spilled to disk %.0f, buffers at most %s in memory, %s on disk (sampled)\n",
		r.Codes, r.Errors, r.Spilled, MiB(int64(r.MemoryPeak)), MiB(int64(r.DiskPeak)))
	fmt.Fprintf(&b, "once the readers went: %.0f bytes held\n", r.BuffersAfter)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	return b.String()
}

// SlowReaders starts limiterd with a small pool to the node and buffered
// answers, and alternates phases: the victim peer alone, then the victim
// while slow readers (twice the pool) each hold a large answer they read
// the head of and nothing more. The victim's sequential GETs are timed in
// both; its median while the answers are held must stay within 2× its
// median alone, and it must never get 504.
func SlowReaders(ctx context.Context, o SlowReadersOptions) (*SlowReadersResult, error) {
	orDefault(&o.Duration, 3*time.Minute)
	orDefault(&o.Phase, 6*time.Second)
	orDefault(&o.Pool, 4)
	orDefault(&o.Readers, 2*o.Pool)
	orDefault(&o.Size, 8<<20)
	body := make([]byte, o.Size)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	node := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			_, _ = w.Write(body)
			return
		}
		_, _ = io.WriteString(w, "from the node")
	})}
	go func() { _ = node.Serve(ln) }()
	defer node.Close()
	s, err := NewSetup(o.Dir, "http://"+ln.Addr().String(), 1<<30, 0, "", "")
	if err != nil {
		return nil, err
	}
	buffers := []string{`answer_memory = "256KiB"`, `answer_memory_total = "1MiB"`}
	if o.Unbuffered {
		buffers = []string{`answer_memory = "0"`, `answer_disk = "0"`}
	}
	if err := editConfig(s, append([]string{fmt.Sprintf("upstream_max_conns = %d", o.Pool), `upstream_connect_timeout = "1s"`}, buffers...), nil, 0); err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res := &SlowReadersResult{Pool: o.Pool, Readers: o.Readers, Codes: map[int]int{}}
	fail := func(f string, a ...any) { res.Failures = append(res.Failures, fmt.Sprintf(f, a...)) }

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	// victim times sequential GETs of its own peer until the phase ends.
	victim := func(until time.Time, into *[]time.Duration) {
		for time.Now().Before(until) && ctx.Err() == nil {
			req, _ := http.NewRequest(http.MethodGet, d.Public()+"/info", nil)
			req.Header.Set("X-Forwarded-For", "203.0.113.20")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				res.Errors++
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			*into = append(*into, time.Since(start))
			res.Codes[resp.StatusCode]++
			time.Sleep(10 * time.Millisecond)
		}
	}
	// reader asks for the big answer as its own peer and reads its head.
	reader := func(i int) (net.Conn, error) {
		c, err := net.DialTimeout("tcp", s.Public, 5*time.Second)
		if err != nil {
			return nil, err
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: node\r\nX-Forwarded-For: 198.51.100.%d\r\n\r\n", 100+i)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReaderSize(c, 1024).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			c.Close()
			return nil, fmt.Errorf("slow reader %d: %q %v", i, line, err)
		}
		return c, nil
	}
	var peakMu sync.Mutex
	sample := func() {
		if m, err := Metrics(d.Admin()); err == nil {
			peakMu.Lock()
			res.MemoryPeak = max(res.MemoryPeak, m[`limiterd_answer_buffer_bytes{where="memory"}`])
			res.DiskPeak = max(res.DiskPeak, m[`limiterd_answer_buffer_bytes{where="disk"}`])
			res.Spilled = m["limiterd_answers_spilled_total"]
			peakMu.Unlock()
		}
	}

	start := time.Now()
	for time.Since(start) < o.Duration && ctx.Err() == nil {
		// Alone.
		victim(time.Now().Add(o.Phase), &res.Idle)
		// While the readers hold their answers.
		res.Rounds++
		conns := make([]net.Conn, o.Readers)
		errs := make([]error, o.Readers)
		var wg sync.WaitGroup
		for i := range o.Readers {
			wg.Go(func() { conns[i], errs[i] = reader(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				fail("round %d: %v", res.Rounds, err)
			} else {
				res.Held++
			}
		}
		sample()
		victim(time.Now().Add(o.Phase), &res.Loaded)
		sample()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  %v: round %d, victim median %v alone, %v while held\n", time.Since(start).Round(time.Second),
				res.Rounds, median(res.Idle).Round(time.Microsecond), median(res.Loaded).Round(time.Microsecond))
		}
	}
	res.Duration = time.Since(start)
	// The readers gone, their buffers are given back.
	var left float64 = -1
	for deadline := time.Now().Add(5 * time.Second); left != 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m, err := Metrics(d.Admin()); err == nil {
			left = m[`limiterd_answer_buffer_bytes{where="memory"}`] + m[`limiterd_answer_buffer_bytes{where="disk"}`]
		}
	}
	res.BuffersAfter = left
	if left != 0 {
		fail("%.0f bytes of answers still held 5 s after the readers went", left)
	}
	// answer_memory_total, and a 32 KiB piece per answer in passing.
	if bound := float64(1<<20 + o.Readers*32<<10); res.MemoryPeak > bound {
		fail("answers held %s in memory, over answer_memory_total and a piece per answer (%s)", MiB(int64(res.MemoryPeak)), MiB(int64(bound)))
	}
	if res.Codes[504] > 0 || res.Errors > 0 {
		fail("the victim got %d 504s and %d errors", res.Codes[504], res.Errors)
	}
	if n := len(res.Idle) + len(res.Loaded); res.Codes[200] != n {
		fail("the victim's answers %v, %d requests", res.Codes, n)
	}
	if len(res.Loaded) == 0 || len(res.Idle) == 0 {
		fail("the victim was not timed (%d alone, %d while held)", len(res.Idle), len(res.Loaded))
	} else if r := res.Ratio(); r > 2 {
		fail("the victim's median while the answers were held is %.2f× its median alone (%v vs %v)", r, median(res.Loaded), median(res.Idle))
	}
	if res.Spilled == 0 {
		fail("no answer was spilled to disk: the readers held nothing past the memory bound")
	}
	return res, nil
}
