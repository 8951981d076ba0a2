package main

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
)

// nginxBinary returns the path of an nginx with the auth_request module.
// Without one the test is skipped on a developer machine, and fails when
// the CI environment variable is set: CI installs nginx-light.
func nginxBinary(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		if _, ci := os.LookupEnv("CI"); ci {
			t.Fatalf("%s (CI is set: install nginx-light)", why)
		}
		t.Skip(why)
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		missing("nginx is not installed")
	}
	out, _ := exec.Command(bin, "-V").CombinedOutput()
	if !bytes.Contains(out, []byte("--with-http_auth_request_module")) {
		missing(bin + " lacks the auth_request module")
	}
	return bin
}

// nginx decides with a token of scope data, as docs/nginx.md says.
const (
	nginxDataToken       = "nginx-data-token-0123456789abcdef"
	nginxDataTokenConfig = "[[admin.tokens]]\nname = \"nginx\"\nscope = \"data\"\ntoken = \"" + nginxDataToken + "\"\n"
)

// nginxSite returns the configuration of docs/nginx.md — its first nginx
// block — pointed at the test's listeners, with the extra replacements
// applied. Every text it replaces must be in the document, so that the
// document and this test cannot drift apart.
func nginxSite(t *testing.T, listen, admin, node string, extra ...[2]string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "nginx.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```nginx\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("docs/nginx.md has no ```nginx block")
	}
	repl := [][2]string{
		{"listen 80;", "listen " + listen + ";"},
		{"server 127.0.0.1:1986;", "server " + admin + ";"},
		{"server 127.0.0.1:1984;", "server " + node + ";"},
		{`"Bearer <data-token>"`, `"Bearer ` + nginxDataToken + `"`},
	}
	for _, r := range append(repl, extra...) {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("the configuration in docs/nginx.md no longer contains %q", r[0])
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	return block
}

// startNginx runs nginx in the foreground, as one process (so that no
// worker can outlive it), with site included in its http block and every
// file it writes in a temporary directory. It checks the configuration
// with nginx -t first, waits until nginx accepts connections on listen and
// stops it in t.Cleanup: SIGQUIT, then SIGKILL after 5 s.
func startNginx(t *testing.T, bin, listen, site string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limiterd.conf"), []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	var temps strings.Builder
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&temps, "    %s_temp_path %s;\n", k, filepath.Join(dir, k))
	}
	conf := filepath.Join(dir, "nginx.conf")
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %s;
error_log %s info;
events { worker_connections 256; }
http {
    access_log off;
%s    include %s;
}
`, filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"), temps.String(), filepath.Join(dir, "limiterd.conf"))
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")}
	if out, err := exec.Command(bin, append([]string{"-t"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	var output syncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &output, &output
	// Its own process group, and killed if this process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("nginx ignored SIGQUIT for 5 s; killed")
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", output.String(), log)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", err, output.String(), log)
		default:
		}
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx did not start listening")
		}
	}
}

// freeAddr returns a loopback address nobody listens on, for nginx.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// TestNginxDocExemptWarning: docs/nginx.md's warning that an exempt
// address is never limited names the shipped config's exempt list as it
// is.
func TestNginxDocExemptWarning(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "nginx.md"))
	if err != nil {
		t.Fatal(err)
	}
	var exempt []string
	for _, k := range config.Keys() {
		if k.Name == "peers.exempt" {
			exempt, _ = k.Default.([]string)
		}
	}
	quoted := make([]string, len(exempt))
	for i, a := range exempt {
		quoted[i] = strconv.Quote(a)
	}
	want := "`peers.exempt = [" + strings.Join(quoted, ", ") + "]`"
	if len(exempt) == 0 || !strings.Contains(string(doc), want) || !strings.Contains(string(doc), "**A request from an exempt address is never limited.**") {
		t.Errorf("docs/nginx.md does not warn that the shipped exempt list, %s, is never limited", want)
	}
}

// The configuration of docs/nginx.md, run by a real nginx in front of an
// upstream, deciding through a real limiterd (general: 20 per 30 s).
func TestNginxAuthRequest(t *testing.T) {
	bin := nginxBinary(t)
	slowArrived, releaseSlow := make(chan struct{}), make(chan struct{})
	up, seen := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(slowArrived)
			<-releaseSlow
		}
		io.WriteString(w, "ok")
	})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseSlow) }) }
	defer release()
	d := startDaemon(t, up.URL, nginxDataTokenConfig)
	admin := strings.TrimPrefix(d.AdminURL(), "http://")
	node := strings.TrimPrefix(up.URL, "http://")
	listen := freeAddr(t)
	startNginx(t, bin, listen, nginxSite(t, listen, admin, node))
	front := "http://" + listen

	// 25 requests from 127.0.0.1, every fifth a POST with a body, each
	// claiming another address: nginx overwrites X-Real-IP, so they all
	// count against 127.0.0.1.
	var ok, limited int
	for i := range 25 {
		method, body := "GET", ""
		if i%5 == 0 {
			method, body = "POST", "some=body"
		}
		r := do(t, method, fmt.Sprintf("%s/info?i=%d", front, i), body,
			"X-Real-IP", fmt.Sprintf("192.0.2.%d", i), "X-Forwarded-For", "198.51.100.1")
		switch r.status {
		case http.StatusOK:
			ok++
			if got := r.header.Get("RateLimit-Policy"); got != `"general";q=20;w=30` {
				t.Fatalf("request %d: RateLimit-Policy %q", i, got)
			}
			if want := fmt.Sprintf(`"general";r=%d;`, 20-ok); !strings.HasPrefix(r.header.Get("RateLimit"), want) {
				t.Fatalf("request %d: RateLimit %q, want %s…", i, r.header.Get("RateLimit"), want)
			}
			// The Arweave 2.9.7 fields pass nginx too (no window here:
			// what is left is the bucket's).
			if got := r.header.Get("Ratelimit-Remaining"); got != strconv.Itoa(20-ok) || r.header.Get("Ratelimit-Limit") == "" {
				t.Fatalf("request %d: ratelimit-remaining %q (want %d), ratelimit-limit %q", i, got, 20-ok, r.header.Get("Ratelimit-Limit"))
			}
		case http.StatusTooManyRequests:
			limited++
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("request %d: 429 with Retry-After %q", i, r.header.Get("Retry-After"))
			}
			if !strings.HasPrefix(r.header.Get("RateLimit"), `"general";r=0;`) || r.header.Get("RateLimit-Policy") == "" {
				t.Fatalf("request %d: 429 without the RateLimit fields: %v", i, r.header)
			}
			if r.header.Get("Ratelimit-Remaining") != "0" || r.header.Get("Ratelimit-Reset") == "" {
				t.Fatalf("request %d: 429 without the Arweave fields: %v", i, r.header)
			}
			if r.body != "Too Many Requests" {
				t.Fatalf("request %d: body %q", i, r.body)
			}
		default:
			t.Fatalf("request %d (%s): status %d %q", i, method, r.status, r.body)
		}
	}
	if ok != 20 || limited != 5 || seen.Load() != 20 {
		t.Fatalf("admitted %d, limited %d, upstream saw %d; want 20, 5, 20", ok, limited, seen.Load())
	}
	if v := d.metric(`ar_limiter_rejected_total{limiter_id="general",reason="rate_limit"}`); v != "5" {
		t.Fatalf("rejected_total = %q", v)
	}
	// Each decision gave its in-flight slot back at once.
	if v := inflight(d); v != "0" {
		t.Fatalf("in-flight %q after the requests, want 0", v)
	}
	// The endpoint needs the token like the rest of the API.
	if r := do(t, "GET", d.AdminURL()+"/api/v1/check/auth", "", "X-Original-Method", "GET",
		"X-Original-URI", "/info", "X-Real-IP", "192.0.2.1"); r.status != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", r.status)
	}

	// A denied peer gets 403 and never reaches the node.
	if code, v := d.admin("POST", "/api/v1/exemptions", `{"kind":"deny_peer","value":"127.0.0.1"}`); code != 201 {
		t.Fatalf("deny: %d %v", code, v)
	}
	if r := do(t, "GET", front+"/info", ""); r.status != http.StatusForbidden || r.header.Get("Retry-After") != "" {
		t.Fatalf("denied peer: %d %v %q", r.status, r.header, r.body)
	}
	if seen.Load() != 20 {
		t.Fatalf("upstream saw %d", seen.Load())
	}

	// limiterd down: fails closed (500) as documented.
	if code := d.stop(); code != 0 {
		t.Fatalf("limiterd exit %d", code)
	}
	if r := do(t, "GET", front+"/info", ""); r.status != http.StatusInternalServerError {
		t.Fatalf("limiterd down: %d, want 500", r.status)
	}
	if seen.Load() != 20 {
		t.Fatalf("upstream saw %d", seen.Load())
	}

	// The commented error_page line fails open. limit_conn (here 1 per
	// address) still holds, before limiterd is asked: one request in
	// flight, the next gets 429 with Retry-After: 1.
	listen2 := freeAddr(t)
	front2 := "http://" + listen2
	startNginx(t, bin, listen2, nginxSite(t, listen2, admin, node,
		[2]string{"# error_page 500 = @limiterd_down;", "error_page 500 = @limiterd_down;"},
		[2]string{"limit_conn limiterd_conn 150;", "limit_conn limiterd_conn 1;"}))
	slow := make(chan reply, 1)
	go func() {
		resp, err := http.Get(front2 + "/slow")
		if err != nil {
			slow <- reply{body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- reply{status: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-slowArrived:
	case r := <-slow:
		t.Fatalf("the slow request: %d %q", r.status, r.body)
	case <-time.After(5 * time.Second):
		t.Fatal("the slow request did not reach the upstream")
	}
	if r := do(t, "GET", front2+"/info", ""); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
		t.Fatalf("over limit_conn: %d %v", r.status, r.header)
	}
	release()
	if r := <-slow; r.status != http.StatusOK || r.body != "ok" {
		t.Fatalf("limiterd down, failing open: %d %q", r.status, r.body)
	}
	if r := do(t, "POST", front2+"/info", "x=1"); r.status != http.StatusOK || r.body != "ok" {
		t.Fatalf("limiterd down, failing open: %d %q", r.status, r.body)
	}
	if seen.Load() != 22 {
		t.Fatalf("upstream saw %d, want 22", seen.Load())
	}
}
