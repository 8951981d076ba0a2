package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildDeb is deploy/debian/build.sh, from this package's directory.
const buildDeb = "../../deploy/debian/build.sh"

// TestDebianPackage builds the .deb with deploy/debian/build.sh and checks
// what it holds (docs/operations.md, "The Debian package"). As root on a
// Debian machine, under CI (or with LIMITERD_DEB_INSTALL=1), it then
// installs it, verifies and runs what it installed, and removes and
// purges it, checking what each leaves: the whole in under 30 s. It never
// touches a limiterd package already installed.
func TestDebianPackage(t *testing.T) {
	tool(t, "dpkg-deb", "dpkg")
	out := t.TempDir()
	start := time.Now()
	b, err := exec.Command(buildDeb, "-o", out).CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	deb := strings.TrimSpace(string(b))
	field := func(name string) string {
		t.Helper()
		v, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(v))
	}
	version := field("Version")
	if !regexp.MustCompile(`^\d+\.\d+\.\d+([~+][A-Za-z0-9.+~]*)?$`).MatchString(version) || field("Package") != "limiterd" ||
		!strings.Contains(field("Depends"), "adduser") || filepath.Base(deb) != "limiterd_"+version+"_"+field("Architecture")+".deb" {
		t.Errorf("the control file: %s version %q, %s, depends %q", deb, version, field("Architecture"), field("Depends"))
	}

	// What it holds, with modes.
	list, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, line := range strings.Split(string(list), "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			modes[strings.TrimPrefix(f[len(f)-1], ".")] = f[0] + " " + f[1]
		}
	}
	for path, mode := range map[string]string{
		"/usr/bin/limiterd":                                 "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/limiterd.service":          "-rw-r--r-- root/root",
		"/usr/lib/systemd/system/limiterd.socket":           "-rw-r--r-- root/root",
		"/usr/lib/sysusers.d/limiterd.conf":                 "-rw-r--r-- root/root",
		"/etc/limiterd/config.toml":                         "-rw-r--r-- root/root",
		"/usr/share/doc/limiterd/copyright":                 "-rw-r--r-- root/root",
		"/usr/share/doc/limiterd/changelog.gz":              "-rw-r--r-- root/root",
		"/usr/share/doc/limiterd/docs/operations.md":        "-rw-r--r-- root/root",
		"/usr/share/limiterd/grafana/limiterd.json":         "-rw-r--r-- root/root",
		"/usr/share/limiterd/prometheus/limiterd-rules.yml": "-rw-r--r-- root/root",
	} {
		if modes[path] != mode {
			t.Errorf("%s: %q, want %q", path, modes[path], mode)
		}
	}
	x := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-R", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(x, "DEBIAN/conffiles")); string(b) != "/etc/limiterd/config.toml\n" {
		t.Errorf("conffiles: %q", b)
	}
	shipped, _ := os.ReadFile("../../config.toml")
	if b, _ := os.ReadFile(filepath.Join(x, "etc/limiterd/config.toml")); !bytes.Equal(b, shipped) {
		t.Error("/etc/limiterd/config.toml is not the repository's config.toml")
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if out, err := exec.Command("sh", "-n", filepath.Join(x, "DEBIAN", s)).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", s, err, out)
		}
	}
	if v, err := exec.Command(filepath.Join(x, "usr/bin/limiterd"), "version").Output(); err != nil || !strings.HasPrefix(string(v), "limiterd v"+version+"\n") {
		t.Errorf("limiterd version: %v\n%s\nwant limiterd v%s", err, v, version)
	}

	if os.Geteuid() != 0 || (os.Getenv("CI") != "true" && os.Getenv("LIMITERD_DEB_INSTALL") == "") {
		t.Skip("the install test runs as root with CI=true or LIMITERD_DEB_INSTALL=1: it installs, removes and purges the package on this machine")
	}
	if exec.Command("dpkg", "-s", "limiterd").Run() == nil {
		t.Skip("a limiterd package is installed on this machine: the install test leaves it alone")
	}
	testInstall(t, deb, version)
}

// testInstall installs deb (of version), checks what it installed and
// what remove and purge leave.
func testInstall(t *testing.T, deb, version string) {
	t.Cleanup(func() {
		if exec.Command("dpkg", "-s", "limiterd").Run() == nil {
			exec.Command("dpkg", "-P", "limiterd").Run()
		}
	})
	start := time.Now()
	dpkg := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := dpkg("-i", deb)
	if !strings.Contains(out, "limiterd is installed, not started") {
		t.Errorf("dpkg -i does not say what to do next:\n%s", out)
	}
	installed := time.Since(start)

	// The installed limiterd runs in a clean environment, as systemd runs
	// it: a LIMITERD_ variable of the test's would be a config key.
	installedCmd := func(args ...string) *exec.Cmd {
		c := exec.Command("/usr/bin/limiterd", args...)
		c.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		return c
	}
	if v, err := installedCmd("version").Output(); err != nil || !strings.HasPrefix(string(v), "limiterd v"+version+"\n") {
		t.Errorf("the installed limiterd version: %v\n%s", err, v)
	}
	analyze := tool(t, "systemd-analyze", "systemd")
	if out, err := exec.Command(analyze, "verify", "/usr/lib/systemd/system/limiterd.service", "/usr/lib/systemd/system/limiterd.socket").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify on the installed units: %v\n%s", err, out)
	}
	if out, err := installedCmd("check-config", "-config", "/etc/limiterd/config.toml").CombinedOutput(); err != nil {
		t.Errorf("check-config on the installed config: %v\n%s", err, out)
	}
	u, err := user.Lookup("limiterd")
	if err != nil {
		t.Fatalf("the user limiterd: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for path, want := range map[string]struct {
		mode     os.FileMode
		uid, gid int
	}{
		"/etc/limiterd":             {os.ModeDir | 0o750, 0, gid},
		"/etc/limiterd/config.toml": {0o640, 0, gid},
		"/var/lib/limiterd":         {os.ModeDir | 0o700, uid, gid},
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != want.mode || int(st.Uid) != want.uid || int(st.Gid) != want.gid {
			t.Errorf("%s: %v %d:%d, want %v %d:%d", path, fi.Mode(), st.Uid, st.Gid, want.mode, want.uid, want.gid)
		}
	}

	// Run as the unit runs it: the user limiterd, the installed config,
	// the state directory (loopback ports of the kernel's choosing).
	serve := installedCmd("serve", "-config", "/etc/limiterd/config.toml", "-data-dir", "/var/lib/limiterd")
	serve.Env = append(serve.Env, "LIMITERD_SERVER__LISTEN=127.0.0.1:0", "LIMITERD_ADMIN__LISTEN=127.0.0.1:0")
	serve.Dir = "/var/lib/limiterd"
	serve.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}}
	stderr, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var log []string
	served := false
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.Contains(sc.Text(), `msg="limiterd serving"`) {
			served = true
			break
		}
	}
	serve.Process.Signal(syscall.SIGTERM)
	go func() {
		for sc.Scan() {
		}
	}()
	if err := serve.Wait(); err != nil || !served {
		t.Fatalf("the installed limiterd as the user limiterd: served %v, exit %v:\n%s", served, err, strings.Join(log, "\n"))
	}
	for _, f := range []string{"/var/lib/limiterd/limiterd.db", "/var/lib/limiterd/admin.token"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after a run: %v", err)
		}
	}

	// An upgrade (here the same version again) keeps the operator's edit
	// of the conffile and the state.
	f, _ := os.OpenFile("/etc/limiterd/config.toml", os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("# edited by the operator\n")
	f.Close()
	dpkg("-i", deb)
	if b, _ := os.ReadFile("/etc/limiterd/config.toml"); !strings.HasSuffix(string(b), "# edited by the operator\n") {
		t.Error("reinstalling lost the operator's edit of /etc/limiterd/config.toml")
	}

	removeStart := time.Now()
	dpkg("-r", "limiterd")
	for _, gone := range []string{"/usr/bin/limiterd", "/usr/lib/systemd/system/limiterd.service", "/usr/lib/systemd/system/limiterd.socket"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("after dpkg -r, %s: %v", gone, err)
		}
	}
	for _, kept := range []string{"/etc/limiterd/config.toml", "/var/lib/limiterd/limiterd.db", "/var/lib/limiterd/admin.token"} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("dpkg -r removed %s: %v", kept, err)
		}
	}
	if _, err := user.Lookup("limiterd"); err != nil {
		t.Errorf("dpkg -r removed the user: %v", err)
	}
	dpkg("-P", "limiterd")
	for _, gone := range []string{"/etc/limiterd", "/var/lib/limiterd"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("after dpkg -P, %s: %v", gone, err)
		}
	}
	if out, _ := exec.Command("dpkg-statoverride", "--list").Output(); strings.Contains(string(out), "/etc/limiterd") {
		t.Errorf("dpkg -P left a stat override:\n%s", out)
	}
	total := time.Since(start)
	t.Logf("dpkg -i %v; installed, verified, run, reinstalled, removed (%v) and purged in %v", installed.Round(time.Millisecond),
		time.Since(removeStart).Round(time.Millisecond), total.Round(time.Millisecond))
	if total > 30*time.Second {
		t.Errorf("install, verify, remove and purge took %v, over 30 s", total)
	}
}
