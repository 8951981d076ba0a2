package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limiterd/limiterd/internal/redistest"
)

// clusterConfig is a config of cluster mode on redisAddr: general admits
// 20 per peer (ticks far away), peers named by X-Forwarded-For from
// loopback, and extra [cluster] keys.
func clusterConfig(upstream, redisAddr, cluster string) func(dataDir string) string {
	return func(dataDir string) string {
		return fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
upstream = %q
data_dir = %q
shutdown_timeout = "5s"

[admin]
listen = "127.0.0.1:0"
token = "test-token"

[peers]
exempt = []
trusted_proxies = ["127.0.0.1/32"]
forwarded_header = "x-forwarded-for"

[http_api.limiter.general]
leaky_limit = 20
leaky_tick_reduction = 20
leaky_tick_interval = 3600000
concurrency_limit = 100

[cluster]
backend = "redis"
%s

[cluster.redis]
addrs = [%q]
`, upstream, dataDir, cluster, redisAddr)
	}
}

// as sends a request of peer to d and returns the status.
func (d *daemon) as(peer, path string) int {
	return d.get(path, "X-Forwarded-For", peer).StatusCode
}

// TestClusterStrictOneLimit: two instances on one Redis admit exactly
// leaky_limit (20) requests of one peer, however its requests are split
// between them, one at a time or concurrently.
func TestClusterStrictOneLimit(t *testing.T) {
	srv := redistest.Start(t)
	up, seen := countingUpstream(t, nil)
	cfg := clusterConfig(up.URL, srv.Addr(), "mode = \"strict\"\non_failure = \"closed\"\ntimeout = \"1s\"")
	a, b := startDaemonWith(t, cfg), startDaemonWith(t, cfg)
	both := []*daemon{a, b}
	rng := rand.New(rand.NewPCG(7, 7))
	splits := map[string]func(i int) *daemon{
		"all on one":  func(int) *daemon { return a },
		"alternating": func(i int) *daemon { return both[i%2] },
		"random":      func(int) *daemon { return both[rng.IntN(2)] },
		"3 to 1":      func(i int) *daemon { return both[min(1, i%4/3)] },
	}
	n := 0
	for name, pick := range splits {
		n++
		peer := fmt.Sprintf("198.51.100.%d", n)
		codes := map[int]int{}
		for i := range 50 {
			codes[pick(i).as(peer, "/info")]++
		}
		if codes[200] != 20 || codes[429] != 30 {
			t.Errorf("%s: %v, want 20×200 and 30×429", name, codes)
		}
	}
	// Concurrently: 16 callers, 100 requests, both instances.
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 7 {
				switch both[(w+i)%2].as("203.0.113.1", "/info") {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 20 || limited.Load() != 112-20 {
		t.Errorf("concurrently: %d admitted, %d limited, want 20 and 92", ok.Load(), limited.Load())
	}
	if want := int64(20 * (len(splits) + 1)); seen.Load() != want {
		t.Errorf("upstream saw %d requests, want %d", seen.Load(), want)
	}
	for _, d := range both {
		if v := d.metric("limiterd_cluster_redis_up"); v != "1" {
			t.Errorf("limiterd_cluster_redis_up %q", v)
		}
	}
}

// TestClusterLiveEdit: a live edit on one instance reaches the other
// within a second, stored in its own database (its audit log has it); an
// instance started later catches up with the edits made meanwhile.
func TestClusterLiveEdit(t *testing.T) {
	srv := redistest.Start(t)
	up, _ := countingUpstream(t, nil)
	cfg := clusterConfig(up.URL, srv.Addr(), "timeout = \"1s\"")
	a, b := startDaemonWith(t, cfg), startDaemonWith(t, cfg)
	leaky := func(d *daemon) float64 {
		_, v := d.admin("GET", "/api/v1/groups/general", "")
		eff, _ := v["effective"].(map[string]any)
		n, _ := eff["leaky_limit"].(float64)
		return n
	}
	start := time.Now()
	if code, v := a.admin("PATCH", "/api/v1/groups/general", `{"leaky_limit": 7}`); code != 200 {
		t.Fatalf("PATCH: %d %v", code, v)
	}
	eventually(t, "the edit on b", func() bool { return leaky(b) == 7 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the edit reached the other instance after %s", took)
	}
	_, audit := b.admin("GET", "/api/v1/audit", "")
	if !strings.Contains(fmt.Sprint(audit), "cluster:redis") {
		t.Errorf("b's audit log lacks the replicated edit: %v", audit)
	}
	// An exemption made on b reaches a: the peer is let through there.
	if code, v := b.admin("POST", "/api/v1/exemptions", `{"kind": "exempt_peer", "value": "192.0.2.200"}`); code != 201 && code != 200 {
		t.Fatalf("POST exemption: %d %v", code, v)
	}
	eventually(t, "the exemption on a", func() bool {
		for range 10 {
			if a.as("192.0.2.200", "/info") != 200 {
				return false
			}
		}
		return true
	})

	// c starts after another edit: it takes the shared state at once.
	if code, _ := a.admin("PATCH", "/api/v1/groups/general", `{"leaky_limit": 9}`); code != 200 {
		t.Fatal(code)
	}
	c := startDaemonWith(t, cfg)
	eventually(t, "the edits on a new instance", func() bool { return leaky(c) == 9 })
}

// TestClusterRedisDown: Redis stopped under load — each on_failure answers
// as configured (open admits, closed answers 503, local limits on this
// instance's own state), limiterd_cluster_redis_up says 0, nothing waits
// long, the goroutines do not pile up; Redis started again — limiting
// through Redis resumes within 5 s.
func TestClusterRedisDown(t *testing.T) {
	for _, onFailure := range []string{"open", "closed", "local"} {
		t.Run(onFailure, func(t *testing.T) {
			srv := redistest.Start(t)
			up, _ := countingUpstream(t, nil)
			d := startDaemonWith(t, clusterConfig(up.URL, srv.Addr(), fmt.Sprintf("on_failure = %q\ntimeout = \"100ms\"", onFailure)))
			if code := d.as("198.51.100.1", "/info"); code != 200 {
				t.Fatalf("with redis: %d", code)
			}
			// Load while Redis goes away.
			var mu sync.Mutex
			codes := map[int]int{}
			var slowest time.Duration
			stop := make(chan struct{})
			var wg sync.WaitGroup
			peak := runtime.NumGoroutine()
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						t0 := time.Now()
						code := d.as(fmt.Sprintf("198.51.%d.%d", 101+w, i%250), "/info")
						mu.Lock()
						codes[code]++
						slowest = max(slowest, time.Since(t0))
						mu.Unlock()
					}
				}()
			}
			time.Sleep(200 * time.Millisecond)
			base := runtime.NumGoroutine()
			srv.Stop()
			eventually(t, "redis_up 0", func() bool { return d.metric("limiterd_cluster_redis_up") == "0" })
			// Requests decided before the breaker went down may still be
			// answering (a loaded host under -race): let them finish.
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			codes = map[int]int{}
			slowest = 0
			mu.Unlock()
			for range 20 {
				time.Sleep(50 * time.Millisecond)
				peak = max(peak, runtime.NumGoroutine())
			}
			close(stop)
			wg.Wait()
			t.Logf("redis down: %v, slowest %s, goroutines %d under load, at most %d", codes, slowest, base, peak)
			if peak > base+20 {
				t.Errorf("goroutines: %d under load with redis up, %d with it down", base, peak)
			}
			// cluster.timeout is 100 ms: a request that waited for Redis
			// (a dial: 5 s by default) would take seconds. 3 s leaves room
			// for a host loaded by the whole suite under -race, where
			// one request took over 1 s without waiting for Redis.
			if slowest > 3*time.Second {
				t.Errorf("a request took %s with redis down", slowest)
			}
			// /readyz follows the backend: not ready with closed (every
			// request is refused), ready but degraded otherwise.
			code, body := d.admin("GET", "/readyz", "")
			backend, _ := body["checks"].(map[string]any)["backend"].(string)
			if onFailure == "closed" {
				if code != 503 || !strings.Contains(backend, "on_failure = closed") {
					t.Errorf("readyz with redis down, closed: %d %v", code, body)
				}
			} else if code != 200 || !strings.HasPrefix(backend, "degraded: redis unavailable") {
				t.Errorf("readyz with redis down, %s: %d %v", onFailure, code, body)
			}
			switch onFailure {
			case "open":
				if codes[200] == 0 || len(codes) != 1 {
					t.Errorf("open: %v, want only 200", codes)
				}
			case "closed":
				if codes[503] == 0 || len(codes) != 1 {
					t.Errorf("closed: %v, want only 503", codes)
				}
			case "local":
				if codes[200] == 0 || codes[503] != 0 {
					t.Errorf("local: %v, want 200s and no 503", codes)
				}
				// One peer over the limit on this instance's own state.
				var n429 int
				for range 25 {
					if d.as("192.0.2.99", "/info") == 429 {
						n429++
					}
				}
				if n429 != 5 {
					t.Errorf("local: %d of 25 limited, want 5", n429)
				}
			}
			srv.Restart()
			start := time.Now()
			eventually(t, "redis_up 1", func() bool { return d.metric("limiterd_cluster_redis_up") == "1" })
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("limiting resumed %s after the restart", took)
			}
			if code, body := d.admin("GET", "/readyz", ""); code != 200 {
				t.Errorf("readyz with redis back: %d %v", code, body)
			}
			// Limits come from Redis again: a new peer gets exactly 20.
			var ok int
			for range 30 {
				if d.as("203.0.113.9", "/info") == 200 {
					ok++
				}
			}
			if ok != 20 {
				t.Errorf("after the restart %d of 30 admitted, want 20", ok)
			}
		})
	}
}

// TestClusterKilledInstanceSlots: an instance killed (SIGKILL) with
// requests in flight holds its peer's concurrency only until its lease
// ends.
func TestClusterKilledInstanceSlots(t *testing.T) {
	srv := redistest.Start(t)
	release := make(chan struct{})
	var slow atomic.Int64
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			slow.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Write([]byte("ok"))
	})
	defer close(release)
	cfg := clusterConfig(up.URL, srv.Addr(), "lease = \"2s\"\ntimeout = \"500ms\"\non_failure = \"closed\"")
	// concurrency_limit 2, and a bucket that does not run out while the
	// test polls.
	write := func(dataDir string) string {
		c := strings.Replace(cfg(dataDir), "concurrency_limit = 100", "concurrency_limit = 2", 1)
		return strings.Replace(c, "leaky_limit = 20", "leaky_limit = 100000", 1)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(write(filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, path)
	other := startDaemonWith(t, write)
	for range 2 {
		go func() {
			req, _ := http.NewRequest("GET", p.public+"/slow", nil)
			req.Header.Set("X-Forwarded-For", "198.51.100.50")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// (Polling the other instance meanwhile would hold slots of its own.)
	eventually(t, "two requests in flight", func() bool { return slow.Load() == 2 })
	if code := other.as("198.51.100.50", "/info"); code != 429 {
		t.Fatalf("with two requests in flight on the other instance: %d, want 429", code)
	}
	p.cmd.Process.Kill()
	<-p.exited
	killed := time.Now()
	if code := other.as("198.51.100.50", "/info"); code != 429 {
		t.Fatalf("right after the kill: %d, want 429 (the dead instance's slots)", code)
	}
	eventually(t, "the dead instance's slots freed", func() bool { return other.as("198.51.100.50", "/info") == 200 })
	if took := time.Since(killed); took > 3*time.Second {
		t.Errorf("slots freed %s after the kill, lease 2s", took)
	}
}

// TestClusterRefusesInexactLimits: in cluster mode, a group whose limits
// the scripts cannot compute exactly is a config error naming it, at
// check-config and at start.
func TestClusterRefusesInexactLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte(`
[cluster]
backend = "redis"
[http_api.limiter.big]
algorithm = "gcra"
limit = 10
period = 2147483647
burst = 2147483647
[[routes.rule]]
group = "big"
paths = ["/big"]
`), 0o600)
	for _, cmd := range []string{"check-config", "serve"} {
		var stderr bytes.Buffer
		m := &Main{Stdout: io.Discard, Stderr: &stderr, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
		if code := m.Run(context.Background(), []string{cmd, "-config", path}); code != 2 {
			t.Fatalf("%s: exit %d, want 2:\n%s", cmd, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "config: http_api.limiter.big: burst × period") {
			t.Fatalf("%s: stderr lacks the refusal:\n%s", cmd, stderr.String())
		}
	}
}

// TestClusterSlotsDown: on a Redis Cluster whose one master of three
// stops, the daemon keeps sharing the other masters' peers and answers
// the stopped master's peers as on_failure says (closed: 503); the gauge,
// /readyz (ready, degraded), the overview's line, the health strip and
// the banner say how many slots are down.
func TestClusterSlotsDown(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	c := redistest.StartPartialCluster(t)
	var addrs []string
	for _, a := range c.Addrs() {
		addrs = append(addrs, fmt.Sprintf("%q", a))
	}
	up, _ := countingUpstream(t, nil)
	cfg := clusterConfig(up.URL, c.Nodes[0].Addr(), "on_failure = \"closed\"")
	d := startDaemonWith(t, func(dir string) string {
		return strings.Replace(cfg(dir), fmt.Sprintf("addrs = [%q]", c.Nodes[0].Addr()), "addrs = ["+strings.Join(addrs, ", ")+"]", 1)
	})
	key := func(peer string) string { return "ld:{" + peer + "|general}:pt" }
	// the master of the groups' shared schedules: its failure, too, is its
	// slots' alone
	victim := c.MasterOf("ld:sched")
	var onVictim, elsewhere []string
	for i := 1; len(onVictim) < 2 || len(elsewhere) < 4; i++ {
		p := fmt.Sprintf("198.51.100.%d", i)
		if c.MasterOf(key(p)) == victim {
			onVictim = append(onVictim, p)
		} else {
			elsewhere = append(elsewhere, p)
		}
	}
	for _, p := range append(onVictim, elsewhere...) {
		if code := d.as(p, "/info"); code != 200 {
			t.Fatalf("peer %s with the cluster up: %d", p, code)
		}
	}
	victim.Stop()
	eventually(t, "a third of the slots down", func() bool {
		d.as(onVictim[0], "/info")
		n := d.metric("limiterd_cluster_redis_slots_down")
		return n == "5461" || n == "5462"
	})
	// over two seconds (the schedules are read again each second)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if up := d.metric("limiterd_cluster_redis_up"); up != "1" {
			t.Fatalf("limiterd_cluster_redis_up %s with two masters of three answering", up)
		}
	}
	for _, p := range elsewhere {
		if code := d.as(p, "/info"); code != 200 {
			t.Errorf("peer %s on a running master: %d, want 200", p, code)
		}
	}
	if code := d.as(onVictim[1], "/info"); code != 503 {
		t.Errorf("peer %s on the stopped master: %d, want 503 (on_failure = closed)", onVictim[1], code)
	}
	code, body := d.admin("GET", "/readyz", "")
	backend, _ := body["checks"].(map[string]any)["backend"].(string)
	if code != 200 || !strings.HasPrefix(backend, "degraded: ") || !strings.Contains(backend, "hash slots unavailable") {
		t.Errorf("readyz with a master down: %d %v", code, body)
	}

	ctx := browser(t)
	login(t, ctx, d)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.AdminURL()+"/"), chromedp.WaitVisible(chromedp.ID("cluster"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the overview's cluster line", "#cluster", func(s string) bool {
		return strings.Contains(s, "of 16384 hash slots have been unavailable") && strings.Contains(s, "answering 503")
	})
	waitText(t, ctx, "the health strip's backend", `[data-health="backend"]`, func(s string) bool { return strings.Contains(s, "slots down") })
	waitText(t, ctx, "the banner", "#banners", func(s string) bool { return strings.Contains(s, "cluster: Redis slots down") })
	shot(t, ctx, "cluster-slots-down")
}
