package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/web/api"
)

// run runs limiterd's Main in-process with args and returns the exit code,
// stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	code := m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, out, _ := run(t, args...)
		first, _, _ := strings.Cut(out, "\n")
		if code != 0 || !strings.HasPrefix(first, "limiterd ") || first == "limiterd dev" || first == "limiterd " ||
			!strings.Contains(out, "revision") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
}

// TestVersionFromBuildInfo: the version, the revision and the commit time
// come from the build information — a checkout's VCS stamp, or what the
// pseudo-version of a `go install …@<commit>` says — and -X stamps win.
func TestVersionFromBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "46993c4546a1eb4a5de25543633b4f0d164062cf"},
		{Key: "vcs.time", Value: "2026-11-23T21:39:47Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	pseudo := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123213947-46993c4546a1"}}
	tagged := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}
	for _, tc := range []struct {
		name  string
		stamp api.Build
		bi    *debug.BuildInfo
		want  api.Build
	}{
		{"checkout", api.Build{GoVersion: "go1.26.8"}, vcs, api.Build{Version: "(devel)", Revision: "46993c4546a1eb4a5de25543633b4f0d164062cf", CommitTime: "2026-11-23T21:39:47Z", Modified: true, GoVersion: "go1.26.8"}},
		{"go install @commit", api.Build{}, pseudo, api.Build{Version: "v0.0.0-20261123213947-46993c4546a1", Revision: "46993c4546a1", CommitTime: "2026-11-23T21:39:47Z"}},
		{"go install @v1.4.0", api.Build{}, tagged, api.Build{Version: "v1.4.0"}},
		{"stamped", api.Build{Version: "v2.0.0", Revision: "abc", BuildTime: "2026-11-24T08:00:00Z"}, vcs, api.Build{Version: "v2.0.0", Revision: "abc", CommitTime: "2026-11-23T21:39:47Z", Modified: true, BuildTime: "2026-11-24T08:00:00Z"}},
		{"nothing", api.Build{}, nil, api.Build{Version: "(devel)"}},
	} {
		if got := buildFrom(tc.stamp, tc.bi, tc.bi != nil); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestVersionStamped builds limiterd with the -ldflags -X line of the
// README and runs `limiterd version`.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "limiterd")
	ld := "-X main.Version=v9.8.7 -X main.Revision=0123456789abcdef0123456789abcdef01234567 -X main.BuildTime=2026-11-24T08:00:00Z"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"limiterd v9.8.7\n", "revision     0123456789abcdef0123456789abcdef01234567\n", "built        2026-11-24T08:00:00Z\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

// flagLine matches a flag in flag.PrintDefaults' output.
var flagLine = regexp.MustCompile(`(?m)^  (-[a-z-]+)`)

// TestHelp: `help`, `-h` and `<command> -h` list the commands and their
// flags and exit 0; every flag a command defines is in its synopsis.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		code, out, _ := run(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, c.synopsis) || !strings.Contains(out, c.summary) {
				t.Errorf("%v does not list %q", args, c.synopsis)
			}
		}
	}
	for _, c := range commands {
		if c.name == "version" || c.name == "help" {
			if code, out, _ := run(t, "help", c.name); code != 0 || !strings.Contains(out, c.synopsis) {
				t.Errorf("help %s: %d %q", c.name, code, out)
			}
			continue
		}
		args := append(strings.Fields(c.name), "-h")
		code, out, errOut := run(t, args...)
		if code != 0 || !strings.Contains(out, "usage: "+c.synopsis) || errOut != "" {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
			continue
		}
		flags := flagLine.FindAllStringSubmatch(out, -1)
		if len(flags) == 0 {
			t.Errorf("%v lists no flags:\n%s", args, out)
		}
		for _, f := range flags {
			if !regexp.MustCompile(regexp.QuoteMeta(f[1]) + `\b`).MatchString(c.synopsis) {
				t.Errorf("%s defines %s, which its synopsis %q does not show", c.name, f[1], c.synopsis)
			}
		}
		// `help <command>` says the same.
		if code, out2, _ := run(t, append([]string{"help"}, strings.Fields(c.name)...)...); code != 0 || out2 != out {
			t.Errorf("help %s differs from %s -h", c.name, c.name)
		}
	}
	if code, _, errOut := run(t, "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "backup"); code != 2 || !strings.Contains(errOut, "-o FILE is required") {
		t.Errorf("backup without -o: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "serve", "-bogus"); code != 2 || !strings.Contains(errOut, "flag provided but not defined: -bogus") {
		t.Errorf("a bad flag: %d %q", code, errOut)
	}
}

// notifySocket listens on a unixgram socket as systemd does and returns
// its path and the messages received.
func notifySocket(t *testing.T) (string, <-chan string) {
	t.Helper()
	// A short path: sun_path holds 108 bytes.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return path, msgs
}

func nextMsg(t *testing.T, msgs <-chan string, what string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no sd_notify message: waiting for %s", what)
		return ""
	}
}

// startDaemonEnv starts limiterd in-process on config with env.
func startDaemonEnv(t *testing.T, config func(dataDir string) string, env []string) *daemon {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(config(filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Stdout: &bytes.Buffer{}, Env: env, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
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

// TestSDNotify: under systemd limiterd says READY=1 once it serves,
// RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a SIGHUP reload,
// refused or not, and STOPPING=1 when the drain begins.
func TestSDNotify(t *testing.T) {
	sock, msgs := notifySocket(t)
	up, _ := countingUpstream(t, nil)
	d := startDaemonEnv(t, func(dir string) string { return testConfig(up.URL, dir, "") }, []string{"NOTIFY_SOCKET=" + sock})
	if m := nextMsg(t, msgs, "READY=1"); !strings.HasPrefix(m, "READY=1\n") {
		t.Fatalf("first message %q", m)
	}
	// Both listeners accept by then.
	for _, a := range []net.Addr{d.publicAddr, d.adminAddr} {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			t.Fatalf("after READY=1, %s: %v", a, err)
		}
		c.Close()
	}
	for _, broken := range []bool{false, true} {
		if broken {
			os.WriteFile(d.cfg, []byte("[log]\nlevel = \"chatty\"\n"), 0o600)
		}
		before, _ := monotonicUsec()
		d.Hangup <- syscall.SIGHUP
		m := nextMsg(t, msgs, "RELOADING=1")
		after, _ := monotonicUsec()
		var us int64
		for _, line := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(line, "MONOTONIC_USEC="); ok {
				us = mustInt(t, v)
			}
		}
		if !strings.HasPrefix(m, "RELOADING=1\n") || us < before || us > after {
			t.Fatalf("reload message %q (monotonic clock %d..%d)", m, before, after)
		}
		if m := nextMsg(t, msgs, "READY=1 after the reload"); !strings.HasPrefix(m, "READY=1\n") {
			t.Fatalf("after the reload: %q", m)
		}
	}
	d.cancel()
	if m := nextMsg(t, msgs, "STOPPING=1"); !strings.HasPrefix(m, "STOPPING=1\n") {
		t.Fatalf("at stop: %q", m)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestSDNotifyNotASocket: a NOTIFY_SOCKET that is a plain file, or
// missing, is logged and limiterd serves anyway.
func TestSDNotifyNotASocket(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	file := filepath.Join(t.TempDir(), "not-a-socket")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, env := range []string{"NOTIFY_SOCKET=" + file, "NOTIFY_SOCKET=" + file + ".missing"} {
		d := startDaemonEnv(t, func(dir string) string { return testConfig(up.URL, dir, "") }, []string{env})
		if s := d.get("/info").StatusCode; s != 200 {
			t.Errorf("%s: the proxy answers %d", env, s)
		}
		if log := d.stderr.String(); !strings.Contains(log, "NOTIFY_SOCKET") || !strings.Contains(log, "systemd will not hear that limiterd is ready") {
			t.Errorf("%s: not logged:\n%s", env, log)
		}
		if code := d.stop(); code != 0 {
			t.Errorf("%s: exit %d", env, code)
		}
	}
}

// TestOperationsCommandTable: docs/operations.md's table of commands
// ("Commands") has a row for each command `limiterd help` lists, under its
// synopsis as help writes it (version and help are written their own way).
func TestOperationsCommandTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n### Commands\n")
	table, _, _ = strings.Cut(table, "\n### ")
	for _, c := range commands {
		if c.name == "version" || c.name == "help" {
			continue
		}
		if !strings.Contains(table, "\n| `"+c.synopsis+"` |") {
			t.Errorf("docs/operations.md's commands have no row \"| `%s` |\"", c.synopsis)
		}
	}
}
