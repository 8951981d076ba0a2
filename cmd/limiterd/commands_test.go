package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBadConfigExit2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[http_api.limiter.chunk]\nleaky_limit = -1\n[server]\nupstrem = \"x\"\n"), 0o600)
	var stderr bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	if code := m.Run(context.Background(), []string{"serve", "-config", path}); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{"config: http_api.limiter.chunk.leaky_limit:", "config: server.upstrem:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	stderr.Reset()
	if code := m.Run(context.Background(), []string{"check-config", "-config", path}); code != 2 || !strings.Contains(stderr.String(), "leaky_limit") {
		t.Fatalf("check-config exit %d:\n%s", code, stderr.String())
	}
	var stdout bytes.Buffer
	m.Stdout = &stdout
	if code := m.Run(context.Background(), []string{"check-config", "-config", filepath.Join(dir, "missing.toml")}); code != 2 {
		t.Fatalf("a missing explicit config: exit %d", code)
	}
}

func TestHangupReload(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	for i := 0; i < 20; i++ {
		d.get("/info")
	}
	// A broken file: the old limits stay.
	os.WriteFile(d.cfg, []byte("[http_api.limiter.general]\nleaky_limit = \"lots\"\n"), 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the refusal logged", func() bool { return strings.Contains(d.stderr.String(), "reload refused") })
	if s := d.get("/info").StatusCode; s != 429 {
		t.Fatalf("after a broken reload: %d, want 429 (old limits)", s)
	}
	// A good file with a higher limit: applied.
	dir := filepath.Dir(d.cfg)
	os.WriteFile(d.cfg, []byte(testConfig(up.URL, filepath.Join(dir, "data"), "")+"\n"), 0o600)
	body := strings.Replace(testConfig(up.URL, filepath.Join(dir, "data"), ""), "leaky_limit = 20", "leaky_limit = 30", 1)
	os.WriteFile(d.cfg, []byte(body), 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the reload", func() bool { return strings.Contains(d.stderr.String(), "config reloaded") })
	if s := d.get("/info").StatusCode; s != 200 {
		t.Fatalf("after a good reload: %d, want 200", s)
	}
	const restartOnly = "change only on restart"
	if strings.Contains(d.stderr.String(), restartOnly) {
		t.Fatalf("a reload that left the restart-only keys alone warns of them:\n%s", d.stderr.String())
	}
	// The public listener's keys are taken at start only: a reload says so.
	body = strings.Replace(body, `shutdown_timeout = "5s"`, "shutdown_timeout = \"5s\"\nmax_conns = 100", 1)
	os.WriteFile(d.cfg, []byte(body), 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the restart-only warning", func() bool {
		return strings.Contains(d.stderr.String(), restartOnly) && strings.Contains(d.stderr.String(), "server.max_conns")
	})
}

func TestGracefulStopDrains(t *testing.T) {
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "finished")
	})
	d := startDaemon(t, up.URL, "")
	type result struct {
		status int
		body   string
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get(d.PublicURL() + "/info")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{status: resp.StatusCode, body: string(b)}
	}()
	eventually(t, "the request in flight", func() bool { return inflight(d) == "1" })
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	r := <-res
	if r.err != nil || r.status != 200 || r.body != "finished" {
		t.Fatalf("%+v", r)
	}
}

func TestOutboundThrottleThroughDaemon(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	// block_index allows C(2) = 1 call per 30 s per peer.
	code, v := d.admin("POST", "/api/v1/throttle", `{"peer":"node-a:1984","path":"/block_index"}`)
	if code != 200 || v["type"] != "block_index" {
		t.Fatalf("first call: %d %v", code, v)
	}
	code, v = d.admin("GET", "/api/v1/throttle?peer=node-a:1984&path=/block_index", "")
	if code != 200 || v["would_wait"] != true {
		t.Fatalf("check: %d %v", code, v)
	}
	code, v = d.admin("POST", "/api/v1/throttle", `{"peer":"node-a:1984","path":"/block_index","timeout":"200ms"}`)
	if code != 408 {
		t.Fatalf("second call: %d %v, want 408", code, v)
	}
	// Another peer is independent.
	if code, _ = d.admin("POST", "/api/v1/throttle", `{"peer":"node-b:1984","path":"/block_index"}`); code != 200 {
		t.Fatalf("other peer: %d", code)
	}
	// The global switch off lets new calls through at once.
	d.admin("POST", "/api/v1/limiter/off", "")
	if code, v = d.admin("POST", "/api/v1/throttle", `{"peer":"node-a:1984","path":"/block_index","timeout":"200ms"}`); code != 200 {
		t.Fatalf("switch off: %d %v", code, v)
	}
	d.admin("POST", "/api/v1/limiter/on", "")
	if v := d.metric(`limiterd_throttle_calls_total{outcome="admitted"}`); v != "2" {
		t.Fatalf("admitted calls %q", v)
	}
}

func TestDataDirFlag(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte(testConfig(up.URL, filepath.Join(dir, "from-file"), "")), 0o600)
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	flagDir := filepath.Join(dir, "from-flag")
	go func() { done <- m.Run(ctx, []string{"serve", "-config", path, "-data-dir", flagDir}) }()
	select {
	case <-m.Ready():
	case code := <-done:
		t.Fatalf("exit %d", code)
	}
	cancel()
	<-done
	if _, err := os.Stat(filepath.Join(flagDir, "limiterd.db")); err != nil {
		t.Fatalf("-data-dir not used: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-file")); err == nil {
		t.Fatal("the file's data_dir was used despite -data-dir")
	}
}

func TestAdminAuth(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	// "test-token" is guessable: said at start.
	if !strings.Contains(d.stderr.String(), "the admin token is short") {
		t.Fatalf("no warning about a short admin token:\n%s", d.stderr.String())
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(d.AdminURL() + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	// Each route from a loopback address of its own: past five wrong tokens a
	// minute from one address, each answer comes after a delay (decision
	// 192), which this test is not about.
	for i, r := range []struct{ method, path string }{
		{"GET", "/api/v1/groups"}, {"GET", "/api/v1/groups/general"}, {"PATCH", "/api/v1/groups/general"},
		{"DELETE", "/api/v1/groups/general/overrides"}, {"GET", "/api/v1/peers"}, {"GET", "/api/v1/peers/1.2.3.4"},
		{"DELETE", "/api/v1/peers/1.2.3.4"}, {"POST", "/api/v1/peers/1.2.3.4/reduce"},
		{"GET", "/api/v1/exemptions"}, {"POST", "/api/v1/exemptions"}, {"DELETE", "/api/v1/exemptions"},
		{"POST", "/api/v1/limiter/off"}, {"POST", "/api/v1/limiter/on"}, {"POST", "/api/v1/check"}, {"GET", "/api/v1/check/auth"},
		{"POST", "/api/v1/release"}, {"GET", "/api/v1/audit"}, {"POST", "/api/v1/snapshot"},
		{"GET", "/api/v1/throttle"}, {"POST", "/api/v1/throttle"},
	} {
		from := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(10+i))}
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: from}).DialContext}}
		for _, auth := range []string{"", "Bearer wrong", "Basic dGVzdC10b2tlbg==", "Bearer "} {
			req, _ := http.NewRequest(r.method, d.AdminURL()+r.path, strings.NewReader("{}"))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Fatalf("%s %s with %q: %d, want 401", r.method, r.path, auth, resp.StatusCode)
			}
		}
	}
}
