package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadActivation: the socket-activation variables as sd_listen_fds
// reads them, and the roles of the sockets passed.
func TestReadActivation(t *testing.T) {
	const pid = 4242
	for _, tc := range []struct {
		name  string
		env   []string
		roles []string
		err   string
	}{
		{"none", nil, nil, ""},
		{"another process's", []string{"LISTEN_PID=1", "LISTEN_FDS=2"}, nil, ""},
		{"no pid", []string{"LISTEN_FDS=2"}, nil, ""},
		{"zero", []string{"LISTEN_PID=4242", "LISTEN_FDS=0"}, nil, ""},
		{"unnamed", []string{"LISTEN_PID=4242", "LISTEN_FDS=2"}, []string{"public", "admin"}, ""},
		{"one unnamed", []string{"LISTEN_PID=4242", "LISTEN_FDS=1"}, []string{"public"}, ""},
		{"the unit's default names", []string{"LISTEN_PID=4242", "LISTEN_FDS=2", "LISTEN_FDNAMES=limiterd.socket:limiterd.socket"}, []string{"public", "admin"}, ""},
		{"named", []string{"LISTEN_PID=4242", "LISTEN_FDS=2", "LISTEN_FDNAMES=public:admin"}, []string{"public", "admin"}, ""},
		{"named, admin first", []string{"LISTEN_PID=4242", "LISTEN_FDS=2", "LISTEN_FDNAMES=admin:public"}, []string{"admin", "public"}, ""},
		{"admin alone", []string{"LISTEN_PID=4242", "LISTEN_FDS=1", "LISTEN_FDNAMES=admin"}, []string{"admin"}, ""},
		{"one named", []string{"LISTEN_PID=4242", "LISTEN_FDS=2", "LISTEN_FDNAMES=public:other"}, nil, `the sockets are named "public:other"`},
		{"twice the same", []string{"LISTEN_PID=4242", "LISTEN_FDS=2", "LISTEN_FDNAMES=public:public"}, nil, `the sockets are named "public:public"`},
		{"three", []string{"LISTEN_PID=4242", "LISTEN_FDS=3"}, nil, "3 sockets passed; limiterd takes two"},
		{"not a number", []string{"LISTEN_PID=4242", "LISTEN_FDS=two"}, nil, `LISTEN_FDS="two" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readActivation(append([]string{"PATH=/bin"}, tc.env...), pid)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.roles, tc.roles) {
				t.Fatalf("roles %q, %v; want %q", got.roles, err, tc.roles)
			}
		})
	}
}

func TestSameAddr(t *testing.T) {
	addr := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		socket, config string
		same           bool
	}{
		{"127.0.0.1:1986", "127.0.0.1:1986", true},
		{"127.0.0.1:1986", "127.0.0.1:0", true},
		{"127.0.0.1:1986", "127.0.0.1:1987", false},
		{"127.0.0.1:1986", "0.0.0.0:1986", false},
		{"0.0.0.0:1985", "0.0.0.0:1985", true},
		{"[::]:1985", "0.0.0.0:1985", true},
		{"[::]:1985", ":1985", true},
		{"127.0.0.1:1985", ":1985", false},
		{"[::1]:1985", "[::1]:1985", true},
		{"127.0.0.1:1985", "localhost:1985", true},
	} {
		if got := sameAddr(addr(tc.socket), tc.config); got != tc.same {
			t.Errorf("sameAddr(%s, %s) = %v", tc.socket, tc.config, got)
		}
	}
}

// startActivated starts limiterd on cfgPath as socket activation does:
// files from fd 3 on, LISTEN_PID its own pid, and env (LISTEN_FDS…).
func startActivated(t *testing.T, cfgPath string, files []*os.File, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, binary(t), "serve", "-config", cfgPath)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = files
	return cmd
}

// listenFile returns a listening socket of 127.0.0.1 as a file to pass,
// and its address.
func listenFile(t *testing.T) (*os.File, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, ln.Addr().String()
}

// TestSocketActivation: limiterd serves on the sockets passed to it, by
// name or by order, warns when one is bound elsewhere than its config
// says, binds itself what was not passed, and refuses a descriptor that is
// not a listening socket.
func TestSocketActivation(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	cfgPath, _ := writeProcConfig(t, up.URL, "1h") // both listeners on 127.0.0.1:0
	serve := func(cmd *exec.Cmd) (public, admin, log string) {
		t.Helper()
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if m := servingLine.FindStringSubmatch(stderr.String()); m != nil {
				resp, err := http.Get("http://" + m[1] + "/info")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return m[1], m[2], stderr.String()
			}
		}
		t.Fatalf("limiterd did not serve:\n%s", &stderr)
		return
	}

	pf, paddr := listenFile(t)
	af, aaddr := listenFile(t)
	public, admin, log := serve(startActivated(t, cfgPath, []*os.File{pf, af}, "LISTEN_FDS=2"))
	if public != paddr || admin != aaddr || !strings.Contains(log, `listeners=public,admin`) {
		t.Errorf("unnamed: serving on %s and %s, passed %s and %s:\n%s", public, admin, paddr, aaddr, log)
	}
	public, admin, _ = serve(startActivated(t, cfgPath, []*os.File{af, pf}, "LISTEN_FDS=2", "LISTEN_FDNAMES=admin:public"))
	if public != paddr || admin != aaddr {
		t.Errorf("named admin first: serving on %s and %s, passed public %s, admin %s", public, admin, paddr, aaddr)
	}
	public, admin, _ = serve(startActivated(t, cfgPath, []*os.File{af}, "LISTEN_FDS=1", "LISTEN_FDNAMES=admin"))
	if admin != aaddr || public == paddr {
		t.Errorf("the admin listener alone: serving on %s and %s, passed admin %s", public, admin, aaddr)
	}

	// A config that names other addresses: the sockets win, with a warning.
	other := filepath.Join(t.TempDir(), "other.toml")
	b, _ := os.ReadFile(cfgPath)
	os.WriteFile(other, []byte(strings.Replace(strings.Replace(string(b), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:1"`, 1), `listen = "127.0.0.1:0"`, `listen = "0.0.0.0:2"`, 1)), 0o600)
	public, _, log = serve(startActivated(t, other, []*os.File{pf, af}, "LISTEN_FDS=2"))
	if public != paddr || strings.Count(log, "is not bound where the config says") != 2 || !strings.Contains(log, "server.listen=127.0.0.1:1") {
		t.Errorf("sockets elsewhere than the config says: serving on %s:\n%s", public, log)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "not-a-socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	out, err := startActivated(t, cfgPath, []*os.File{file}, "LISTEN_FDS=1").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "socket activation: the public listener (fd 3): not a socket") {
		t.Errorf("a file passed as the public listener: %v\n%s", err, out)
	}
}

func TestDashboardURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:1986":  "http://127.0.0.1:1986/",
		"0.0.0.0:1986":    "http://127.0.0.1:1986/",
		"[::]:1986":       "http://[::1]:1986/",
		"10.1.2.3:1986":   "http://10.1.2.3:1986/",
		"[2001:db8::1]:1": "http://[2001:db8::1]:1/",
	} {
		a, _ := net.ResolveTCPAddr("tcp", addr)
		if got := dashboardURL(a); got != want {
			t.Errorf("dashboardURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
