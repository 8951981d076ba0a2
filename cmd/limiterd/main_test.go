package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// daemon is a Main running in-process for one test.
type daemon struct {
	*Main
	t      *testing.T
	cancel context.CancelFunc
	done   chan int
	stderr *syncBuffer
	cfg    string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testConfig is a config on loopback ports chosen by the kernel, with
// general's leaky_limit set small, no exempt peers, upstream up.
func testConfig(upstream, dir, extra string) string {
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
trusted_proxies = ["10.9.9.9/32"]
forwarded_header = "x-forwarded-for"

[http_api.limiter.general]
leaky_limit = 20
leaky_tick_reduction = 20
concurrency_limit = 5
%s
`, upstream, dir, extra)
}

func startDaemon(t *testing.T, upstream string, extra string) *daemon {
	t.Helper()
	return startDaemonWith(t, func(dataDir string) string { return testConfig(upstream, dataDir, extra) })
}

// startDaemonWith starts limiterd on the config file that config returns
// for a data dir of the test's own.
func startDaemonWith(t *testing.T, config func(dataDir string) string) *daemon {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(config(filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Stdout: io.Discard, Env: nil, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	d := &daemon{Main: m, t: t, done: make(chan int, 1), stderr: &syncBuffer{}, cfg: path}
	m.Stderr = d.stderr
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- m.Run(ctx, []string{"serve", "-config", path}) }()
	select {
	case <-m.Ready():
	case code := <-d.done:
		t.Fatalf("limiterd exited with %d:\n%s", code, d.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("limiterd did not start")
	}
	t.Cleanup(func() { d.stop() })
	return d
}

func (d *daemon) stop() int {
	d.cancel()
	select {
	case code := <-d.done:
		d.done <- code
		return code
	case <-time.After(15 * time.Second):
		d.t.Fatal("limiterd did not stop")
		return -1
	}
}

func (d *daemon) admin(method, path string, body string) (int, map[string]any) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.AdminURL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func (d *daemon) get(path string, hdr ...string) *http.Response {
	d.t.Helper()
	req, _ := http.NewRequest("GET", d.PublicURL()+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// metric returns the value of one exposition line (name with labels).
func (d *daemon) metric(series string) string {
	d.t.Helper()
	resp, err := http.Get(d.AdminURL() + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return ""
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func countingUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// The Arweave spam scenario: one peer floods general; exactly leaky_limit
// requests reach the node, the rest get 429 and never reach it.
func TestSpamExactlyLeakyLimitAdmitted(t *testing.T) {
	up, seen := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	var ok, limited int
	for i := 0; i < 60; i++ {
		resp := d.get("/info")
		switch resp.StatusCode {
		case 200:
			ok++
			if resp.Header.Get("Ratelimit-Policy") != `"general";q=20;w=30` {
				t.Fatalf("RateLimit-Policy %q", resp.Header.Get("Ratelimit-Policy"))
			}
		case 429:
			limited++
			if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Fatalf("429 without Retry-After: %v", resp.Header)
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if ok != 20 || limited != 40 || seen.Load() != 20 {
		t.Fatalf("admitted %d, limited %d, upstream saw %d; want 20, 40, 20", ok, limited, seen.Load())
	}
	if v := d.metric(`ar_limiter_rejected_total{limiter_id="general",reason="rate_limit"}`); v != "40" {
		t.Fatalf("rejected_total = %q", v)
	}
	if v := d.metric(`ar_limiter_requests_total{limiter_id="general"}`); v != "60" {
		t.Fatalf("requests_total = %q", v)
	}

	// JSON body when the client prefers it.
	req, _ := http.NewRequest("GET", d.PublicURL()+"/info", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 429 || body["error"] != "too_many_requests" || body["group"] != "general" || body["reason"] != "rate_limit" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
}

func inflight(d *daemon) string {
	return d.metric(`ar_limiter_tracked_items_total{limiter_id="general",limiting_type="concurrency"}`)
}

func TestInflightReleased(t *testing.T) {
	release := make(chan struct{})
	var mode atomic.Value
	mode.Store("block")
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "block":
			select {
			case <-release:
			case <-r.Context().Done():
			}
			io.WriteString(w, "late")
		case "abort":
			// Headers, half a body, then the connection dies: the proxy
			// aborts the exchange with a panic (http.ErrAbortHandler).
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	})
	d := startDaemon(t, up.URL, "")

	t.Run("client disconnects", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", d.PublicURL()+"/info", nil)
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		eventually(t, "one request in flight", func() bool { return inflight(d) == "1" })
		cancel()
		<-errc
		// The node, which does not notice, is still working on it: the slot
		// is held until it answers (decision 210).
		time.Sleep(300 * time.Millisecond)
		if n := inflight(d); n != "1" {
			t.Fatalf("in flight %s while the node still works on the request whose client left, want 1", n)
		}
		release <- struct{}{}
		eventually(t, "in-flight back to 0", func() bool { return inflight(d) == "0" })
	})
	t.Run("upstream aborts mid-body", func(t *testing.T) {
		mode.Store("abort")
		req, _ := http.NewRequest("GET", d.PublicURL()+"/info", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		eventually(t, "in-flight back to 0", func() bool { return inflight(d) == "0" })
	})
	close(release)

	t.Run("upstream unreachable", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		d2 := startDaemon(t, "http://"+addr, "")
		if resp := d2.get("/info"); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", resp.StatusCode)
		}
		if v := inflight(d2); v != "0" {
			t.Fatalf("in-flight %q after a 502", v)
		}
		if v := d2.metric(`limiterd_upstream_errors_total{kind="unreachable"}`); v != "1" {
			t.Fatalf("upstream errors %q", v)
		}
	})
}

func TestReduceOnSuccessfulTx(t *testing.T) {
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			http.Error(w, "invalid tx", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "OK")
	})
	d := startDaemon(t, up.URL, "")
	post := func(q string) int {
		resp, err := http.Post(d.PublicURL()+"/tx"+q, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tokens := func() float64 {
		_, v := d.admin("GET", "/api/v1/peers/127.0.0.1", "")
		for _, g := range v["groups"].([]any) {
			if g := g.(map[string]any); g["group"] == "general" {
				return g["tokens"].(float64)
			}
		}
		return -1
	}
	d.get("/info")
	d.get("/info")
	if got := tokens(); got != 2 {
		t.Fatalf("tokens %v", got)
	}
	// A valid transaction: its token is given back (consumed 1, refunded 1).
	if s := post(""); s != 200 {
		t.Fatalf("status %d", s)
	}
	if got := tokens(); got != 2 {
		t.Fatalf("after a good POST /tx: tokens %v, want 2", got)
	}
	// A failed one keeps its token.
	if s := post("?fail=1"); s != 400 {
		t.Fatalf("status %d", s)
	}
	if got := tokens(); got != 3 {
		t.Fatalf("after a failed POST /tx: tokens %v, want 3", got)
	}
	if v := d.metric(`ar_limiter_reduce_requests_total{limiter_id="general"}`); v != "1" {
		t.Fatalf("reduce_requests_total %q", v)
	}
}

func TestSpoofedForwardedForIgnored(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	// 127.0.0.1 is not a trusted proxy: each request claims a new address,
	// all count against 127.0.0.1.
	for i := 0; i < 25; i++ {
		d.get("/info", "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i), "Forwarded", fmt.Sprintf("for=198.51.100.%d", i))
	}
	_, v := d.admin("GET", "/api/v1/peers?limit=100", "")
	peers := v["peers"].([]any)
	if len(peers) != 1 || peers[0].(map[string]any)["peer"] != "127.0.0.1" {
		t.Fatalf("peers %v", peers)
	}
	if resp := d.get("/info", "X-Forwarded-For", "192.0.2.200"); resp.StatusCode != 429 {
		t.Fatalf("status %d, want 429", resp.StatusCode)
	}
}

func TestLiveEditsAndAPI(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	for i := 0; i < 20; i++ {
		d.get("/info")
	}
	if d.get("/info").StatusCode != 429 {
		t.Fatal("expected 429 at the limit")
	}
	// A bad value is refused, names the key and changes nothing.
	code, v := d.admin("PATCH", "/api/v1/groups/general", `{"leaky_limit": -5}`)
	if code != 422 || v["field"] != "leaky_limit" {
		t.Fatalf("%d %v", code, v)
	}
	code, v = d.admin("PATCH", "/api/v1/groups/general", `{"leaky_limt": 5}`)
	if code != 422 || v["field"] != "leaky_limt" {
		t.Fatalf("%d %v", code, v)
	}
	// A body that is not a JSON object is a bad request, as on every
	// endpoint; an empty object names nothing to change.
	for _, body := range []string{`{`, `[1]`, `"x"`} {
		if code, v = d.admin("PATCH", "/api/v1/groups/general", body); code != 400 || !strings.HasPrefix(v["error"].(string), "the body is not a JSON object") {
			t.Fatalf("PATCH %s: %d %v", body, code, v)
		}
	}
	if code, v = d.admin("PATCH", "/api/v1/groups/general", `{}`); code != 422 || v["error"] != "the body names no key to change" {
		t.Fatalf("PATCH {}: %d %v", code, v)
	}
	// Listing the peers of a group that does not exist is an error, not an
	// empty list.
	if code, v = d.admin("GET", "/api/v1/peers?group=nope", ""); code != 422 || v["field"] != "group" {
		t.Fatalf("peers of an unknown group: %d %v", code, v)
	}
	if code, _ = d.admin("GET", "/api/v1/peers?group=general", ""); code != 200 {
		t.Fatalf("peers of general: %d", code)
	}
	// Raise the limit: the next request goes through at once.
	code, v = d.admin("PATCH", "/api/v1/groups/general", `{"leaky_limit": 25}`)
	if code != 200 || v["override"].(map[string]any)["leaky_limit"] != 25.0 || v["file"].(map[string]any)["leaky_limit"] != 20.0 {
		t.Fatalf("%d %v", code, v)
	}
	if s := d.get("/info").StatusCode; s != 200 {
		t.Fatalf("after raising the limit: %d", s)
	}
	// Drop the override: back to the file's 20.
	if code, v = d.admin("DELETE", "/api/v1/groups/general/overrides", ""); code != 200 || v["override"] != nil {
		t.Fatalf("%d %v", code, v)
	}
	if s := d.get("/info").StatusCode; s != 429 {
		t.Fatalf("after dropping the override: %d", s)
	}
	// Exempt 127.0.0.1 live: unlimited.
	if code, v = d.admin("POST", "/api/v1/exemptions", `{"kind":"exempt_peer","value":"127.0.0.0/8"}`); code != 201 {
		t.Fatalf("%d %v", code, v)
	}
	if s := d.get("/info").StatusCode; s != 200 {
		t.Fatalf("exempt: %d", s)
	}
	if code, _ = d.admin("POST", "/api/v1/exemptions", `{"kind":"exempt_peer","value":"127.0.0.0/8"}`); code != 409 {
		t.Fatalf("duplicate exemption: %d", code)
	}
	if code, v = d.admin("POST", "/api/v1/exemptions", `{"kind":"exempt_peer","value":"127.0.0.1/8"}`); code != 422 || v["field"] != "value" {
		t.Fatalf("%d %v", code, v)
	}
	if code, _ = d.admin("DELETE", "/api/v1/exemptions", `{"kind":"exempt_peer","value":"127.0.0.0/8"}`); code != 200 {
		t.Fatalf("remove: %d", code)
	}
	// Deny: 403.
	d.admin("POST", "/api/v1/exemptions", `{"kind":"deny_peer","value":"127.0.0.1"}`)
	if s := d.get("/info").StatusCode; s != 403 {
		t.Fatalf("denied: %d", s)
	}
	// On every request (docs/limiting.md, "The deny list"), an exempt path's
	// included, and the check API says so too.
	if code, _ := d.admin("POST", "/api/v1/exemptions", `{"kind":"exempt_path","value":"/info"}`); code != 201 {
		t.Fatalf("exempt path: %d", code)
	}
	if s := d.get("/info").StatusCode; s != 403 {
		t.Fatalf("denied on an exempt path: %d", s)
	}
	if code, v := d.admin("POST", "/api/v1/check", `{"peer":"127.0.0.1","path":"/info"}`); code != 403 || v["allowed"] != false || v["reason"] != "denied" {
		t.Fatalf("check of a denied peer on an exempt path: %d %v", code, v)
	}
	d.admin("DELETE", "/api/v1/exemptions?kind=exempt_path&value=/info", "")
	d.admin("DELETE", "/api/v1/exemptions?kind=deny_peer&value=127.0.0.1", "")
	// The global switch.
	if code, v = d.admin("POST", "/api/v1/limiter/off", ""); code != 200 || v["enabled"] != false {
		t.Fatalf("%d %v", code, v)
	}
	if s := d.get("/info").StatusCode; s != 200 {
		t.Fatalf("switch off: %d", s)
	}
	d.admin("POST", "/api/v1/limiter/on", "")
	// Forget the peer: a fresh allowance.
	if code, v = d.admin("DELETE", "/api/v1/peers/127.0.0.1", ""); code != 200 || v["forgotten"] != 1.0 {
		t.Fatalf("%d %v", code, v)
	}
	if s := d.get("/info").StatusCode; s != 200 {
		t.Fatalf("after forget: %d", s)
	}
	// The audit log has every edit, newest first.
	_, v = d.admin("GET", "/api/v1/audit", "")
	var actions []string
	for _, e := range v["entries"].([]any) {
		actions = append(actions, e.(map[string]any)["action"].(string))
	}
	want := "peer.forget limiter.switch limiter.switch exemption.remove exemption.remove exemption.add exemption.add exemption.remove exemption.add group.reset group.patch"
	if strings.Join(actions, " ") != want {
		t.Fatalf("audit actions:\n got %s\nwant %s", strings.Join(actions, " "), want)
	}
	// The check API registers like a request and leases its slot.
	code, v = d.admin("POST", "/api/v1/check", `{"peer":"192.0.2.7","method":"GET","path":"/chunk/1"}`)
	if code != 200 || v["allowed"] != true || v["group"] != "chunk" || v["id"] == nil {
		t.Fatalf("%d %v", code, v)
	}
	if code, _ = d.admin("POST", "/api/v1/release", fmt.Sprintf(`{"id":%q}`, v["id"])); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if code, _ = d.admin("POST", "/api/v1/release", fmt.Sprintf(`{"id":%q}`, v["id"])); code != 404 {
		t.Fatalf("second release: %d", code)
	}
	if code, v = d.admin("POST", "/api/v1/check", `{"peer":"not an ip","path":"/x"}`); code != 422 || v["field"] != "peer" {
		t.Fatalf("%d %v", code, v)
	}
	// What the nginx check refuses, this one refuses too, naming the field.
	for body, field := range map[string]string{
		`{"peer":"192.0.2.7","path":"info"}`:                     "path",
		`{"peer":"192.0.2.7","path":"/info","method":"bad one"}`: "method",
	} {
		if code, v = d.admin("POST", "/api/v1/check", body); code != 422 || v["field"] != field {
			t.Fatalf("%s: %d %v", body, code, v)
		}
	}
	// The query is not part of the path.
	if code, v = d.admin("POST", "/api/v1/check", `{"peer":"192.0.2.8","path":"/chunk/1?x=/info"}`); code != 200 || v["group"] != "chunk" {
		t.Fatalf("path with a query: %d %v", code, v)
	}
}
