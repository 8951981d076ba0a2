package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/throttleclient"
)

// call sends one admin request with token and returns the status and the
// decoded JSON answer.
func (d *daemon) call(token, method, path, body string) (int, map[string]any) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.AdminURL()+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// writeToken writes a token file, mode 0600 unless mode says otherwise.
func writeToken(t *testing.T, path, token string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(token+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestScopedTokensThroughDaemon: named tokens from the config, each held
// to its scope, re-read on SIGHUP; a token file others can read is
// refused at start and at reload, naming the file.
func TestScopedTokensThroughDaemon(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	dir := t.TempDir()
	nginxFile := filepath.Join(dir, "nginx.token")
	writeToken(t, nginxFile, "nginx-data-token-0123456789abcdef", 0o600)
	tokens := fmt.Sprintf(`
[[admin.tokens]]
name = "nginx"
scope = "data"
token_file = %q

[[admin.tokens]]
name = "grafana"
scope = "read"
token = "grafana-read-token-0123456789abcdef"
`, nginxFile)
	d := startDaemon(t, up.URL, tokens)

	data, read := "nginx-data-token-0123456789abcdef", "grafana-read-token-0123456789abcdef"
	for _, c := range []struct {
		token, method, path, body string
		want                      int
	}{
		{data, "POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "/info"}`, 200},
		{data, "GET", "/api/v1/groups", "", 403},
		{data, "POST", "/api/v1/limiter/off", "", 403},
		{read, "GET", "/api/v1/groups", "", 200},
		{read, "GET", "/api/v1/limiter", "", 200},
		{read, "GET", "/api/v1/backup", "", 403},
		{read, "POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "/info"}`, 403},
		{read, "PATCH", "/api/v1/groups/general", `{"leaky_limit": 5}`, 403},
		{"test-token", "GET", "/api/v1/groups", "", 200},
	} {
		if s, v := d.call(c.token, c.method, c.path, c.body); s != c.want {
			t.Errorf("%s %s with %s: %d %v, want %d", c.method, c.path, c.token[:5], s, v, c.want)
		}
	}
	// The throttle client works with a data token.
	tc := throttleclient.New(d.AdminURL(), data)
	if err := tc.Throttle(context.Background(), "peer-a:1984", "/info"); err != nil {
		t.Errorf("the throttle client with a data token: %v", err)
	}
	if err := throttleclient.New(d.AdminURL(), read).Throttle(context.Background(), "peer-a:1984", "/info"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the throttle client with a read token: %v, want a 403", err)
	}

	// SIGHUP re-reads the token files: the old secret stops, the new works.
	writeToken(t, nginxFile, "nginx-data-token-rotated-0123456789", 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the reload", func() bool { return strings.Contains(d.stderr.String(), "config reloaded") })
	if s, _ := d.call(data, "POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "/info"}`); s != 401 {
		t.Errorf("the rotated-out token: %d, want 401", s)
	}
	if s, _ := d.call("nginx-data-token-rotated-0123456789", "POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "/info"}`); s != 200 {
		t.Errorf("the rotated-in token: %d, want 200", s)
	}

	// A token file others can read: the reload is refused, naming it.
	os.Chmod(nginxFile, 0o644)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the refusal", func() bool { return strings.Contains(d.stderr.String(), "reload refused") })
	if log := d.stderr.String(); !strings.Contains(log, "admin.tokens[0].token_file: token file "+nginxFile+": every user of this machine can access it (mode 0644)") {
		t.Errorf("the refusal does not name the file:\n%s", log)
	}
	if s, v := d.call("test-token", "GET", "/api/v1/limiter", ""); s != 200 || v["config"].(map[string]any)["last_reload"].(map[string]any)["ok"] != false {
		t.Errorf("GET /api/v1/limiter after a refused reload: %d %v", s, v)
	}
	if v := d.metric("limiterd_config_last_reload_success"); v != "0" {
		t.Errorf("limiterd_config_last_reload_success = %q after a refused reload", v)
	}
	if s, _ := d.call("nginx-data-token-rotated-0123456789", "POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "/info"}`); s != 200 {
		t.Errorf("after the refused reload the token in force: %d, want 200", s)
	}
	// The secrets never reach the log.
	for _, secret := range []string{data, read, "nginx-data-token-rotated"} {
		if strings.Contains(d.stderr.String(), secret) {
			t.Errorf("the log holds the token %s", secret)
		}
	}
}

// TestStartRefusesBadTokens: start fails with exit 2, naming the key and
// the file, on a token file others can read, a short one, and an admin
// listener off loopback without a chosen token.
func TestStartRefusesBadTokens(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	dir := t.TempDir()
	world := filepath.Join(dir, "world.token")
	writeToken(t, world, "a-token-long-enough-0123456789", 0o644)
	short := filepath.Join(dir, "short.token")
	writeToken(t, short, "short", 0o600)
	for _, c := range []struct{ name, config, want string }{
		{"world-readable", strings.Replace(testConfig(up.URL, filepath.Join(dir, "d1"), ""), `token = "test-token"`, fmt.Sprintf("token_file = %q", world), 1),
			"config: admin.token_file: token file " + world + ": every user of this machine can access it (mode 0644)"},
		{"short", testConfig(up.URL, filepath.Join(dir, "d2"), fmt.Sprintf("[[admin.tokens]]\nname = \"n\"\nscope = \"data\"\ntoken_file = %q\n", short)),
			"config: admin.tokens[0].token_file: token file " + short + ": the token has 5 characters, fewer than 24"},
		{"unknown scope", testConfig(up.URL, filepath.Join(dir, "d3"), "[[admin.tokens]]\nname = \"n\"\nscope = \"superuser\"\ntoken = \"0123456789abcdef0123456789\"\n"),
			`config: admin.tokens[0].scope: must be one of admin, read, data, got "superuser"`},
		{"exposed", strings.Replace(testConfig(up.URL, filepath.Join(dir, "d4"), ""), "[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"test-token\"", "[admin]\nlisten = \"0.0.0.0:0\"", 1),
			`config: admin.listen: "0.0.0.0:0" can be reached from other machines: set admin.token or admin.token_file explicitly`},
	} {
		path := filepath.Join(dir, c.name+".toml")
		os.WriteFile(path, []byte(c.config), 0o600)
		code, _, errOut := run(t, "serve", "-config", path)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant %q", c.name, code, errOut, c.want)
		}
		// check-config says the same.
		if code, _, errOut := run(t, "check-config", "-config", path); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: check-config exit %d:\n%s", c.name, code, errOut)
		}
	}
}

// TestGeneratedTokenNeverLogged: the token generated on first start is in
// its file (mode 0600), the log names the file and never the token.
func TestGeneratedTokenNeverLogged(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	var dataDir string
	d := startDaemonWith(t, func(dir string) string {
		dataDir = dir
		return strings.Replace(testConfig(up.URL, dir, ""), `token = "test-token"`, "", 1)
	})
	file := filepath.Join(dataDir, "admin.token")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	fi, _ := os.Stat(file)
	if len(tok) != 48 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated token %d characters, mode %v", len(tok), fi.Mode())
	}
	log := d.stderr.String()
	if strings.Contains(log, tok) || !strings.Contains(log, "generated an admin token") || !strings.Contains(log, "file="+file) {
		t.Errorf("the log:\n%s", log)
	}
	if s, _ := d.call(tok, "GET", "/api/v1/limiter", ""); s != 200 {
		t.Errorf("the generated token: %d", s)
	}
}

// logLines returns the JSON lines of a log.
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func linesWith(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// TestLogs: [log] in JSON; a flood's rejections as one sampled line; an
// upstream error at warn; every live edit and switch; a reload whose file
// value an override shadows, key by key; the level changed by a reload.
func TestLogs(t *testing.T) {
	upDown := false
	var mu sync.Mutex
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		down := upDown
		mu.Unlock()
		if down {
			// A node that resets the connection: 502.
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		io.WriteString(w, "ok")
	})
	logCfg := "[log]\nformat = \"json\"\nrejections = \"sampled\"\n"
	d := startDaemon(t, up.URL, "leaky_tick_interval = 3600000\n"+logCfg)
	for range 30 {
		d.get("/info")
	}
	lines := logLines(t, d.stderr.String())
	if serving := linesWith(lines, "limiterd serving"); len(serving) != 1 || serving[0]["dashboard"] != d.AdminURL()+"/" {
		t.Errorf("the start-up line does not name the dashboard at %s/: %v", d.AdminURL(), serving)
	}
	rej := linesWith(lines, "rejected")
	if len(rej) != 1 || rej[0]["peer"] != "127.0.0.1" || rej[0]["group"] != "general" || rej[0]["rate_limit"] != 1.0 || rej[0]["level"] != "INFO" {
		t.Errorf("rejection lines: %v", rej)
	}

	mu.Lock()
	upDown = true
	mu.Unlock()
	d.call("test-token", "POST", "/api/v1/exemptions", `{"kind": "exempt_peer", "value": "127.0.0.1", "note": "the test's own client"}`)
	for range 3 {
		if s := d.get("/info").StatusCode; s != 502 {
			t.Fatalf("upstream down: %d", s)
		}
	}
	d.call("test-token", "PATCH", "/api/v1/groups/general", `{"leaky_limit": 25}`)
	d.call("test-token", "POST", "/api/v1/limiter/off", "")
	lines = logLines(t, d.stderr.String())
	if up := linesWith(lines, "upstream error"); len(up) != 1 || up[0]["level"] != "WARN" || up[0]["kind"] != "unreachable" || up[0]["count"] != 1.0 {
		t.Errorf("upstream error lines: %v", up)
	}
	edits := linesWith(lines, "live edit")
	if len(edits) != 3 || edits[0]["action"] != "exemption.add" || edits[0]["note"] != "the test's own client" ||
		edits[1]["action"] != "group.patch" || edits[1]["actor"] != "api-token" || edits[2]["action"] != "limiter.switch" || edits[2]["new"] != "off" {
		t.Errorf("live edit lines: %v", edits)
	}

	// The file changes leaky_limit under the override, and the level.
	body := strings.Replace(testConfig(up.URL, filepath.Join(filepath.Dir(d.cfg), "data"), "leaky_tick_interval = 3600000\n"+strings.Replace(logCfg, "[log]\n", "[log]\nlevel = \"warn\"\n", 1)), "leaky_limit = 20", "leaky_limit = 30", 1)
	os.WriteFile(d.cfg, []byte(body), 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the shadowed key", func() bool {
		return strings.Contains(d.stderr.String(), "a live override keeps this file value out of effect")
	})
	lines = logLines(t, d.stderr.String())
	sh := linesWith(lines, "reload: a live override keeps this file value out of effect (DELETE /api/v1/groups/{group}/overrides to use the file's)")
	if len(sh) != 1 || sh[0]["group"] != "general" || sh[0]["key"] != "leaky_limit" || sh[0]["file_was"] != 20.0 || sh[0]["file_now"] != 30.0 || sh[0]["override"] != 25.0 {
		t.Errorf("shadowed lines: %v", sh)
	}
	eventually(t, "the level change", func() bool { return strings.Contains(d.stderr.String(), `"msg":"log level changed"`) })
	// At warn, info lines stop: a live edit is no longer logged.
	n := len(logLines(t, d.stderr.String()))
	d.call("test-token", "POST", "/api/v1/limiter/on", "")
	if lines := logLines(t, d.stderr.String()); len(lines) != n {
		t.Errorf("at level warn, an info line: %v", lines[n:])
	}
}

// TestBackupRestoreDrill is docs/operations.md's drill: a backup through
// the API while the daemon is under load and snapshots are written, the
// daemon stopped, the copy put in a new data dir, the daemon started on
// it: the peers' state, the live edits, the exemptions and the audit are
// there, and the daemon takes new edits.
func TestBackupRestoreDrill(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	extra := "leaky_tick_interval = 3600000\n[snapshot]\ninterval = \"1s\"\n"
	d := startDaemon(t, up.URL, extra)
	for range 8 {
		d.get("/info")
	}
	if s, _ := d.admin("PATCH", "/api/v1/groups/chunk", `{"leaky_limit": 7000}`); s != 200 {
		t.Fatal("patch chunk")
	}
	if s, _ := d.admin("POST", "/api/v1/exemptions", `{"kind": "deny_peer", "value": "203.0.113.66", "note": "scraper, ticket 42"}`); s != 201 {
		t.Fatal("deny")
	}

	// Load on the proxy and snapshots on demand while the backup runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var requests, snapshots atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				d.get("/info")
				requests.Add(1)
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				d.admin("POST", "/api/v1/snapshot", "")
				snapshots.Add(1)
			}
		}
	})
	eventually(t, "the load", func() bool { return requests.Load() >= 20 && snapshots.Load() >= 5 })
	backup := filepath.Join(t.TempDir(), "limiterd-backup.db")
	code, _, errOut := run(t, "backup", "-config", d.cfg, "-admin", d.AdminURL(), "-o", backup)
	r0, s0 := requests.Load(), snapshots.Load()
	eventually(t, "the load after the backup", func() bool { return requests.Load() > r0 && snapshots.Load() > s0 })
	close(stop)
	wg.Wait()
	if code != 0 || !strings.Contains(errOut, "from "+d.AdminURL()+"/api/v1/backup") {
		t.Fatalf("backup: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(backup + ".tmp"); err == nil {
		t.Error("the temporary copy was left behind")
	}
	// An edit after the backup: not in the copy.
	d.admin("PATCH", "/api/v1/groups/general", `{"concurrency_limit": 9}`)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}

	// A stopped daemon's file is copied directly.
	cold := filepath.Join(t.TempDir(), "cold.db")
	if code, _, errOut := run(t, "backup", "-config", d.cfg, "-o", cold); code != 0 || !strings.Contains(errOut, "(no daemon holds it)") {
		t.Fatalf("backup of a stopped daemon: exit %d\n%s", code, errOut)
	}
	if db, err := store.Open(cold, store.Options{ReadOnly: true}); err != nil {
		t.Fatalf("the cold copy: %v", err)
	} else {
		db.Close()
	}

	// Restore: the copy is the new data dir's database.
	r := startDaemonWith(t, func(dataDir string) string {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "limiterd.db"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return testConfig(up.URL, dataDir, extra)
	})
	if _, g := r.admin("GET", "/api/v1/groups/chunk", ""); g["override"].(map[string]any)["leaky_limit"] != 7000.0 {
		t.Errorf("chunk after restore: %v", g)
	}
	if _, g := r.admin("GET", "/api/v1/groups/general", ""); g["override"] != nil {
		t.Errorf("general after restore has the edit made after the backup: %v", g["override"])
	}
	if _, v := r.admin("GET", "/api/v1/exemptions", ""); len(v["exemptions"].([]any)) != 1 || v["exemptions"].([]any)[0].(map[string]any)["note"] != "scraper, ticket 42" {
		t.Errorf("exemptions after restore: %v", v)
	}
	_, p := r.admin("GET", "/api/v1/peers/127.0.0.1", "")
	groups, _ := p["groups"].([]any)
	if len(groups) != 1 || groups[0].(map[string]any)["tokens"].(float64) < 8 || groups[0].(map[string]any)["requests"].(float64) < 9 {
		t.Errorf("the peer after restore: %v", p)
	}
	_, a := r.admin("GET", "/api/v1/audit?action=exemption", "")
	if e := a["entries"].([]any); len(e) != 1 || e[0].(map[string]any)["note"] != "scraper, ticket 42" {
		t.Errorf("audit after restore: %v", a)
	}
	if s, _ := r.admin("PATCH", "/api/v1/groups/general", `{"leaky_limit": 21}`); s != 200 {
		t.Errorf("an edit on the restored daemon: %d", s)
	}
}
