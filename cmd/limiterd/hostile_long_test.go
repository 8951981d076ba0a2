package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The long variants of the hostile-client and upstream-fault tests, run by
// internal/chaos/hostile.sh (HOSTILE_LONG=1): the built binary in a
// process of its own, so that its resident memory and open files are its
// alone, read from /proc. They print their figures (t.Log) for
// docs/reliability.md.

// longDaemon is the limiterd binary serving on loopback.
type longDaemon struct {
	cmd           *exec.Cmd
	public, admin string // host:port
	stderr        *syncBuffer
}

// freePort returns a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBinary starts limiterd (HOSTILE_BIN, built here if unset) on a
// config of loopback ports with the [server] keys server and the group
// keys extra, waiting for /healthz. (Not LIMITERD_*: those are config.)
func startBinary(t *testing.T, upstream, server, extra string) *longDaemon {
	t.Helper()
	dir := t.TempDir()
	bin := os.Getenv("HOSTILE_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "limiterd")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	d := &longDaemon{public: freePort(t), admin: freePort(t), stderr: &syncBuffer{}}
	cfg := fmt.Sprintf(`
[server]
listen = %q
upstream = %q
data_dir = %q
%s

[admin]
listen = %q
token = "test-token"

[peers]
exempt = []

[http_api.limiter.general]
leaky_limit = 10000000
leaky_tick_reduction = 10000000
concurrency_limit = 100000
%s
`, d.public, upstream, filepath.Join(dir, "data"), server, d.admin, extra)
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "serve", "-config", path)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.cmd.Process.Signal(os.Interrupt)
		d.cmd.Wait()
		if strings.Contains(strings.ToLower(d.stderr.String()), "panic") {
			t.Errorf("limiterd logged a panic:\n%s", d.stderr)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + d.admin + "/healthz"); err == nil {
			resp.Body.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("limiterd did not start:\n%s", d.stderr)
		}
	}
}

// usage is the process's resident memory (MiB), open files and
// goroutines (go_goroutines, from its /metrics).
type usage struct {
	rssMiB     float64
	fds        int
	goroutines int
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %.1f MiB, %d fds, %d goroutines", u.rssMiB, u.fds, u.goroutines)
}

func (d *longDaemon) usage(t *testing.T) usage {
	var u usage
	pid := d.cmd.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				u.rssMiB = float64(kb) / 1024
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = len(fds)
	}
	if resp, err := adminClient.Get("http://" + d.admin + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
				u.goroutines, _ = strconv.Atoi(v)
			}
		}
	}
	return u
}

// settle waits until the daemon's goroutines are back to at most base
// (plus the scrape's own), up to a minute, and returns its usage.
func (d *longDaemon) settle(t *testing.T, base usage) usage {
	var u usage
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if u = d.usage(t); u.goroutines <= base.goroutines && u.fds <= base.fds {
			break
		}
	}
	return u
}

// warm serves one request, so that what starts once, at the first
// answer (fasthttp's Date goroutine), is in the idle count.
func (d *longDaemon) warm(t *testing.T) {
	resp, err := http.Get("http://" + d.public + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(time.Second)
}

func longOnly(t *testing.T) {
	if os.Getenv("HOSTILE_LONG") == "" {
		t.Skip("a long variant: internal/chaos/hostile.sh runs it (HOSTILE_LONG=1)")
	}
}

// longEnv is an integer setting of the long variants, with its default.
func longEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestLongSlowloris holds HOSTILE_CONNS connections (5 000) dripping a
// head one byte a second on the public listener for HOSTILE_SECONDS (60),
// opening a new one whenever one is closed, with read_header_timeout 10 s
// and no per-address cap; then the same on the admin listener with a
// fifth of the connections. It reports the daemon's memory and open files
// before, at the peak and after, and fails if the goroutines and open
// files are not back to their idle count.
func TestLongSlowloris(t *testing.T) {
	longOnly(t)
	conns, secs := longEnv("HOSTILE_CONNS", 5000), longEnv("HOSTILE_SECONDS", 60)
	node := newRecordingNode(t)
	d := startBinary(t, node.URL, `read_header_timeout = "10s"
max_conns_per_ip = 0`, "")
	d.warm(t)
	for _, l := range []struct {
		name, addr string
		n          int
	}{{"public", d.public, conns}, {"admin", d.admin, conns / 5}} {
		base := d.usage(t)
		var opened, closed atomic.Int64
		var peak usage
		var mu sync.Mutex
		stop := time.Now().Add(time.Duration(secs) * time.Second)
		var wg sync.WaitGroup
		for range l.n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					c, err := net.Dial("tcp", l.addr)
					if err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					opened.Add(1)
					go func() { io.Copy(io.Discard, c); c.Close() }()
					head := "GET /info HTTP/1.1\r\nHost: a\r\nX-Slow: " + strings.Repeat("s", 200)
					for i := 0; time.Now().Before(stop); i++ {
						if _, err := c.Write([]byte{head[i%len(head)]}); err != nil {
							closed.Add(1)
							break
						}
						time.Sleep(time.Second)
					}
					c.Close()
				}
			}()
		}
		for time.Now().Before(stop) {
			time.Sleep(2 * time.Second)
			u := d.usage(t)
			mu.Lock()
			if u.rssMiB > peak.rssMiB {
				peak.rssMiB = u.rssMiB
			}
			peak.fds, peak.goroutines = max(peak.fds, u.fds), max(peak.goroutines, u.goroutines)
			mu.Unlock()
		}
		wg.Wait()
		after := d.settle(t, base)
		peak.rssMiB = max(peak.rssMiB, after.rssMiB)
		t.Logf("slowloris on the %s listener: %d connections for %d s, %d opened, %d closed by limiterd; before: %v; peak: %v; after: %v",
			l.name, l.n, secs, opened.Load(), closed.Load(), base, peak, after)
		if after.goroutines > base.goroutines || after.fds > base.fds {
			t.Errorf("%s: not back to idle: before %v, after %v", l.name, base, after)
		}
		// A polite request is served once it is over.
		if resp, err := http.Get("http://" + d.public + "/info"); err != nil || resp.StatusCode != 200 {
			t.Errorf("after the slowloris: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}
}

// TestLongUpstreamFaults runs HOSTILE_ROUNDS (500) rounds of every fault
// of the node (TestUpstreamFaultsThroughDaemon's), 8 clients at once,
// and checks in-flight, goroutines and open files are back to idle after.
func TestLongUpstreamFaults(t *testing.T) {
	longOnly(t)
	rounds := longEnv("HOSTILE_ROUNDS", 500)
	n := newFaultNode(t, false)
	go func() { // the endless body's and the others' signals, drained
		for range n.gone {
		}
	}()
	go func() {
		for {
			select {
			case n.cut <- struct{}{}:
			case <-time.After(time.Minute):
				return
			}
		}
	}()
	// 1 s: short enough for many rounds, long enough that a node (this
	// test's, on the same two cores) merely slow under the load of the
	// endless bodies is rarely taken for a fault.
	d := startBinary(t, n.url(), `upstream_connect_timeout = "1s"
upstream_header_timeout = "1s"
upstream_read_timeout = "1s"`, "")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	d.warm(t)
	base := d.usage(t)
	statuses := map[string]map[int]int{}
	var mu sync.Mutex
	paths := []string{"/reset-before", "/reset-after", "/slow-head", "/stall-body", "/huge-header", "/endless", "/ok"}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds / 8 {
				p := paths[(i+w)%len(paths)]
				resp, err := client.Get("http://" + d.public + p)
				code := 0
				if err == nil {
					code = resp.StatusCode
					io.CopyN(io.Discard, resp.Body, 1<<20)
					resp.Body.Close()
				}
				mu.Lock()
				if statuses[p] == nil {
					statuses[p] = map[int]int{}
				}
				statuses[p][code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	after := d.settle(t, base)
	var inflight float64
	if resp, err := adminClient.Get("http://" + d.admin + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "ar_limiter_tracked_items_total{") && strings.Contains(l, `limiting_type="concurrency"`) {
				v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				inflight += v
			}
		}
	}
	t.Logf("upstream faults: %d requests in %v; statuses by path %v; before: %v; after: %v; in flight after: %v",
		rounds/8*8, took.Round(time.Second), statuses, base, after, inflight)
	if b := n.extra.Load(); b != 0 {
		t.Errorf("the node got %d bytes on connections whose exchange had ended", b)
	}
	if inflight != 0 || after.goroutines > base.goroutines || after.fds > base.fds {
		t.Errorf("not back to idle: before %v, after %v, in flight %v", base, after, inflight)
	}
}
