package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// RestartOptions configure Restarts.
type RestartOptions struct {
	Bin, Dir string
	// Restarts is how many times the daemon is restarted (default 10).
	Restarts int
	// Rate is the load's requests per second (default 1000), over Conns
	// connections (default 16): half of them keep-alive, half a new
	// connection per request.
	Rate  float64
	Conns int
	// Up is how long each daemon serves before its restart (default
	// 500 ms).
	Up time.Duration
	// Wrk, when set, is the path of wrk: the load is wrk's, paced by a
	// script (wrk's delay), its ids recorded by the node, its errors
	// wrk's own count (connect: refused; read and write: reset or closed;
	// timeout).
	Wrk string
	// Log receives the daemons' log, Progress a line a restart.
	Log, Progress io.Writer
}

func (o *RestartOptions) defaults() {
	orDefault(&o.Restarts, 10)
	orDefault(&o.Rate, 1000)
	orDefault(&o.Conns, 16)
	orDefault(&o.Up, 500*time.Millisecond)
}

// RestartResult is what Restarts found.
type RestartResult struct {
	Restarts int
	Sent     int64
	Codes    map[int]int64
	// The requests that got no answer, by what the client saw: the
	// connection refused, reset, closed before the answer, or no answer
	// within 10 s; the first of them.
	Refused, Reset, Closed, Timeouts, Other int64
	FirstErr                                string
	// Doubled counts the requests the node saw more than once, Unseen
	// those answered 200 that it never saw, Unanswered those it saw whose
	// client got no answer.
	Doubled, Unseen, Unanswered int64
	// Latency is the slowest answer's time, Latencies the 50th, 99th and
	// 99.9th percentiles (the driver's own load); WrkLatency is wrk's
	// line (average, deviation, max).
	Latency    time.Duration
	Latencies  [3]time.Duration
	WrkLatency string
	// Probe is what the exhausted probe peer got right after each restart:
	// 429 each time (its state restored before the new process accepted).
	Probe []int
	// Term is SIGTERM to the process's exit, Linger the "limiterd stopped"
	// line to the exit, Start the start to the "limiterd serving" line: the
	// longest of each.
	Term, Linger, Start time.Duration
}

// Lost returns the requests sent that got no answer.
func (r *RestartResult) Lost() int64 { return r.Refused + r.Reset + r.Closed + r.Timeouts + r.Other }

// OK reports whether every request was answered once and the probe
// stayed limited.
func (r *RestartResult) OK() bool {
	return r.Lost()+r.Doubled+r.Unseen+r.Unanswered == 0 && r.Restarts > 0 &&
		!slices.ContainsFunc(r.Probe, func(s int) bool { return s != http.StatusTooManyRequests })
}

// String is the report.
func (r *RestartResult) String() string {
	var b strings.Builder
	codes := make([]int, 0, len(r.Codes))
	for c := range r.Codes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	fmt.Fprintf(&b, "restarts under load: %d restarts (socket activation), %d requests sent; answers", r.Restarts, r.Sent)
	for _, c := range codes {
		fmt.Fprintf(&b, " %d:%d", c, r.Codes[c])
	}
	fmt.Fprintf(&b, "\nno answer: %d (refused %d, reset %d, closed %d, timed out %d, other %d)", r.Lost(), r.Refused, r.Reset, r.Closed, r.Timeouts, r.Other)
	if r.FirstErr != "" {
		fmt.Fprintf(&b, "; the first: %s", r.FirstErr)
	}
	fmt.Fprintf(&b, "\nthe node saw a request twice: %d; answered 200 unseen: %d; seen unanswered: %d\n", r.Doubled, r.Unseen, r.Unanswered)
	if r.WrkLatency != "" {
		fmt.Fprintf(&b, "wrk's latency (avg, stdev, max): %s\n", r.WrkLatency)
	} else {
		fmt.Fprintf(&b, "latency p50 %v, p99 %v, p99.9 %v, max %v\n", r.Latencies[0].Round(time.Microsecond), r.Latencies[1].Round(time.Microsecond),
			r.Latencies[2].Round(time.Microsecond), r.Latency.Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "the exhausted probe after each restart: %v\n", r.Probe)
	fmt.Fprintf(&b, "longest: SIGTERM to exit %v, \"limiterd stopped\" to exit %v, start to serving %v\n",
		r.Term.Round(time.Millisecond), r.Linger.Round(time.Millisecond), r.Start.Round(time.Millisecond))
	return b.String()
}

// The probe peer of Restarts, and its path: a group of one request.
const (
	restartProbe     = "198.51.100.7"
	restartProbePath = "/probe"
)

// Restarts runs limiterd on sockets it holds, as systemd's limiterd.socket
// does, under a steady load, and restarts it Restarts times as `systemctl
// restart limiterd` would (SIGTERM, the exit, a new process on the same
// sockets). Every request carries an id the node records: the result
// counts the requests that got no answer, by how, and those the node saw
// twice. A probe peer exhausted before the first restart must be refused
// by each new process's first decision about it.
func Restarts(ctx context.Context, o RestartOptions) (*RestartResult, error) {
	o.defaults()
	up, err := startIDUpstream()
	if err != nil {
		return nil, err
	}
	defer up.close()
	var files []*os.File
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		f, err := ln.(*net.TCPListener).File()
		addrs = append(addrs, ln.Addr().String())
		ln.Close() // the file holds the socket
		if err != nil {
			return nil, err
		}
		defer f.Close()
		files = append(files, f)
	}
	cfg := fmt.Sprintf(`
[server]
listen = %q
upstream = %q
data_dir = %q
shutdown_timeout = "5s"

[log]
rejections = "off"

[admin]
listen = %q
token = %q

[peers]
exempt = []
trusted_proxies = ["127.0.0.1/32"]
forwarded_header = "x-forwarded-for"

[snapshot]
interval = "1h"

[http_api.limiter.general]
sliding_window_limit = 0
leaky_limit = 1000000
leaky_tick_reduction = 1000000
concurrency_limit = 1000

[http_api.limiter.probe]
sliding_window_limit = 0
leaky_limit = 1
leaky_tick_reduction = 1
leaky_tick_interval = 2147483647

[[routes.rule]]
group = "probe"
paths = [%q]
`, addrs[0], up.url, o.Dir+"/data", addrs[1], Token, restartProbePath)
	cfgPath := o.Dir + "/config.toml"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	lines := &lineWatch{w: o.Log}
	d := &Daemon{Bin: o.Bin, Config: cfgPath, Log: lines, Sockets: files}
	res := &RestartResult{}
	started := time.Now()
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res.Start = time.Since(started)
	public := addrs[0]
	for i, want := range []int{200, 429} {
		if s, err := probe(public); err != nil || s != want {
			return nil, fmt.Errorf("the probe's request %d before the restarts: %d, %v; want %d", i+1, s, err, want)
		}
	}

	l := &idLoad{addr: public, conns: o.Conns, rate: o.Rate}
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var wrk wrkRun
	if o.Wrk != "" {
		total := time.Duration(o.Restarts+1)*o.Up + 2*time.Second
		wg.Go(func() { wrk = runWrk(lctx, o.Wrk, o.Dir, public, o.Conns, o.Rate, total) })
	} else {
		wg.Go(func() { l.run(lctx) })
	}
	defer func() { stopLoad(); wg.Wait() }()
	for i := range o.Restarts {
		select {
		case <-time.After(o.Up):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pid := d.Pid()
		term := time.Now()
		if err := d.Stop(); err != nil {
			return nil, fmt.Errorf("restart %d: %w", i+1, err)
		}
		exited := time.Now()
		res.Term = max(res.Term, exited.Sub(term))
		if at, ok := lines.stopped(pid); ok {
			res.Linger = max(res.Linger, exited.Sub(at))
		}
		if err := d.Start(); err != nil {
			return nil, fmt.Errorf("restart %d: %w", i+1, err)
		}
		res.Start = max(res.Start, time.Since(exited))
		s, err := probe(public)
		if err != nil {
			return nil, fmt.Errorf("restart %d: the probe: %w", i+1, err)
		}
		res.Probe = append(res.Probe, s)
		res.Restarts++
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  restart %d: SIGTERM to exit %v", i+1, exited.Sub(term).Round(time.Millisecond))
			if o.Wrk == "" {
				fmt.Fprintf(o.Progress, "; %d requests so far, %d without an answer", l.sent.Load(), l.failed())
			}
			fmt.Fprintln(o.Progress)
		}
	}
	if o.Wrk != "" {
		wg.Wait() // wrk runs for its duration
		if wrk.err != nil {
			return nil, wrk.err
		}
		wrk.report(res, up, o.Conns)
		return res, nil
	}
	time.Sleep(o.Up)
	stopLoad()
	wg.Wait()
	l.report(res, up)
	return res, nil
}

// probe sends the probe peer's request and returns the status.
func probe(addr string) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + restartProbePath)
	req.Header.Set("X-Forwarded-For", restartProbe)
	req.SetConnectionClose()
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}

// lineWatch passes the daemons' log on and notes, per process, when it
// said "limiterd stopped" (the log has one line per write).
type lineWatch struct {
	w  io.Writer
	mu sync.Mutex
	at []time.Time
}

func (l *lineWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), `msg="limiterd stopped"`) {
		l.mu.Lock()
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
	}
	if l.w != nil {
		return l.w.Write(p)
	}
	return len(p), nil
}

// stopped returns when the last process said it stopped. (pid names the
// process for the reader; the daemons run one at a time.)
func (l *lineWatch) stopped(int) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.at) == 0 {
		return time.Time{}, false
	}
	return l.at[len(l.at)-1], true
}

// idUpstream is a node that counts the requests it sees by their
// X-Load-Id.
type idUpstream struct {
	url string
	ln  net.Listener
	mu  sync.Mutex
	ids map[string]int
}

func startIDUpstream() (*idUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &idUpstream{url: "http://" + ln.Addr().String(), ln: ln, ids: map[string]int{}}
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if id := ctx.Request.Header.Peek("X-Load-Id"); len(id) > 0 {
				u.mu.Lock()
				u.ids[string(id)]++
				u.mu.Unlock()
			}
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"ok":true}`)
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
	}
	go func() { _ = s.Serve(ln) }()
	return u, nil
}

func (u *idUpstream) close() { _ = u.ln.Close() }

// idLoad sends GET /info at a steady rate over conns connections, each
// request with an id, without ever retrying: half the senders keep their
// connection alive (reconnecting when an answer says Connection: close),
// half open one per request. Each sender is its own peer.
type idLoad struct {
	addr  string
	conns int
	rate  float64
	sent  atomic.Int64

	mu       sync.Mutex
	answered map[string]int // id → status
	failures map[string]error
	lat      []time.Duration
}

func (l *idLoad) failed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.failures)
}

func (l *idLoad) run(ctx context.Context) {
	l.answered, l.failures = map[string]int{}, map[string]error{}
	var wg sync.WaitGroup
	for w := range l.conns {
		wg.Go(func() { l.sender(ctx, w) })
	}
	wg.Wait()
}

func (l *idLoad) sender(ctx context.Context, w int) {
	keepAlive := w%2 == 0
	gap := time.Duration(float64(l.conns) / l.rate * float64(time.Second))
	due := time.Now().Add(time.Duration(w) * gap / time.Duration(l.conns))
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	peer := IPv4(int64(w))
	for n := 0; ; n++ {
		due = due.Add(gap)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(due)):
		}
		id := fmt.Sprintf("%d-%d", w, n)
		l.sent.Add(1)
		start := time.Now()
		status, err := func() (int, error) {
			if c == nil {
				var err error
				if c, err = net.DialTimeout("tcp", l.addr, 10*time.Second); err != nil {
					return 0, err
				}
				br = bufio.NewReader(c)
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			closing := ""
			if !keepAlive {
				closing = "Connection: close\r\n"
			}
			if _, err := fmt.Fprintf(c, "GET /info HTTP/1.1\r\nHost: node\r\nX-Forwarded-For: %s\r\nX-Load-Id: %s\r\n%s\r\n", peer, id, closing); err != nil {
				return 0, err
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return 0, err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				return 0, err
			}
			if resp.Close || !keepAlive {
				c.Close()
				c = nil
			}
			return resp.StatusCode, nil
		}()
		l.mu.Lock()
		if err != nil {
			l.failures[id] = err
			if c != nil {
				c.Close()
				c = nil
			}
		} else {
			l.answered[id] = status
			l.lat = append(l.lat, time.Since(start))
		}
		l.mu.Unlock()
	}
}

// report fills res from the load's records and the node's.
func (l *idLoad) report(res *RestartResult, up *idUpstream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	up.mu.Lock()
	defer up.mu.Unlock()
	res.Sent = l.sent.Load()
	res.Codes = map[int]int64{}
	for _, s := range l.answered {
		res.Codes[s]++
	}
	ids := make([]string, 0, len(l.failures))
	for id := range l.failures {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		err := l.failures[id]
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			res.Refused++
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
			res.Reset++
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			res.Closed++
		case errors.As(err, &ne) && ne.Timeout():
			res.Timeouts++
		default:
			res.Other++
		}
		if res.FirstErr == "" {
			res.FirstErr = fmt.Sprintf("request %s: %v", id, err)
		}
		if up.ids[id] > 0 {
			res.Unanswered++
		}
	}
	for id, n := range up.ids {
		if n > 1 {
			res.Doubled++
		}
		_ = id
	}
	for id, s := range l.answered {
		if s == http.StatusOK && up.ids[id] == 0 {
			res.Unseen++
		}
	}
	slices.Sort(l.lat)
	if n := len(l.lat); n > 0 {
		res.Latency = l.lat[n-1]
		for i, q := range []float64{0.5, 0.99, 0.999} {
			res.Latencies[i] = l.lat[min(n-1, int(q*float64(n)))]
		}
	}
}

// wrkRun is what wrk said.
type wrkRun struct {
	out                                  string
	requests                             int64
	connect, read, write, timeout, non2x int64
	err                                  error
}

// wrkScript paces each connection (delay, in ms) and gives each request
// an id of its thread's.
const wrkScript = `
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end
local n = 0
function request()
  n = n + 1
  return wrk.format("GET", "/info", {["X-Load-Id"] = "wrk-" .. tid .. "-" .. n, ["X-Forwarded-For"] = "11.0.0." .. tid})
end
function delay()
  return %d
end
`

// runWrk runs wrk against addr for d, each of conns connections sending
// one request every conns/rate seconds.
func runWrk(ctx context.Context, wrk, dir, addr string, conns int, rate float64, d time.Duration) wrkRun {
	script := dir + "/restart.lua"
	if err := os.WriteFile(script, fmt.Appendf(nil, wrkScript, int(float64(conns)/rate*1000)), 0o600); err != nil {
		return wrkRun{err: err}
	}
	cmd := exec.CommandContext(ctx, wrk, "-t2", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())),
		"--timeout", "10s", "-s", script, "http://"+addr)
	out, err := cmd.CombinedOutput()
	r := wrkRun{out: string(out)}
	if err != nil {
		r.err = fmt.Errorf("wrk: %v\n%s", err, out)
		return r
	}
	for _, line := range strings.Split(r.out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, " requests in "):
			fmt.Sscanf(line, "%d requests in", &r.requests)
		case strings.HasPrefix(line, "Socket errors:"):
			fmt.Sscanf(line, "Socket errors: connect %d, read %d, write %d, timeout %d", &r.connect, &r.read, &r.write, &r.timeout)
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			fmt.Sscanf(line, "Non-2xx or 3xx responses: %d", &r.non2x)
		}
	}
	if r.requests == 0 {
		r.err = fmt.Errorf("wrk sent nothing:\n%s", out)
	}
	return r
}

// report fills res from wrk's figures and the node's record. wrk stops
// with up to one request in flight per connection, which the node may
// have seen: more than that seen and not counted by wrk is a request
// answered twice or lost.
func (w wrkRun) report(res *RestartResult, up *idUpstream, conns int) {
	up.mu.Lock()
	defer up.mu.Unlock()
	res.Sent = w.requests
	res.Codes = map[int]int64{200: w.requests - w.non2x}
	if w.non2x > 0 {
		res.Codes[0] = w.non2x // wrk does not say which
	}
	res.Refused, res.Reset, res.Timeouts = w.connect, w.read+w.write, w.timeout
	var seen int64
	for id, n := range up.ids {
		if !strings.HasPrefix(id, "wrk-") {
			continue
		}
		seen++
		if n > 1 {
			res.Doubled++
		}
	}
	if extra := seen - w.requests; extra > int64(conns) {
		res.Unanswered = extra - int64(conns)
	} else if extra < 0 {
		res.Unseen = -extra
	}
	for _, line := range strings.Split(w.out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "Latency" {
			res.WrkLatency = strings.Join(f[1:4], " ")
		}
	}
}
