package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles limiterd into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "limiterd")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/limiterd/limiterd/cmd/limiterd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build limiterd: %v\n%s", err, out)
	}
	return bin, nil
}

// Daemon is one limiterd process run from a binary on a config file; Kill
// and Start may be called again and again (a crash loop). It is not safe
// for concurrent use, except Pid, Admin and Public, which may be read by
// load generators while another goroutine kills and restarts.
type Daemon struct {
	Bin    string
	Config string
	// Log receives the daemon's standard error, every run appended.
	Log io.Writer
	// Env is added to the driver's environment for the daemon (config
	// keys as LIMITERD_… variables).
	Env []string
	// Sockets, when set, are the listening sockets passed to every run of
	// the daemon as systemd's socket activation passes them (fd 3 on,
	// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES "public:admin"): the
	// public listener's, then the admin listener's.
	Sockets []*os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
	public string
	admin  string
}

var servingLine = regexp.MustCompile(`msg="limiterd serving".* public=(\S+) admin=(\S+)`)

// Start runs the daemon and waits (up to 30 s) until it logs that it
// serves; a daemon that exits first returns its last lines of log.
func (d *Daemon) Start() error {
	cmd := exec.Command(d.Bin, "serve", "-config", d.Config)
	if len(d.Env) > 0 {
		cmd.Env = append(os.Environ(), d.Env...)
	}
	if len(d.Sockets) > 0 {
		// LISTEN_PID is the daemon's own pid: the shell's, which exec keeps.
		names := []string{"public", "admin"}[:len(d.Sockets)]
		cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, d.Bin, "serve", "-config", d.Config)
		cmd.Env = append(append(os.Environ(), d.Env...), fmt.Sprintf("LISTEN_FDS=%d", len(d.Sockets)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
		cmd.ExtraFiles = d.Sockets
	}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start limiterd: %w", err)
	}
	found := make(chan [2]string, 1)
	tail := &tailBuffer{}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			tail.add(line)
			if d.Log != nil {
				fmt.Fprintln(d.Log, line)
			}
			if m := servingLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	select {
	case a := <-found:
		d.mu.Lock()
		d.cmd, d.exited = cmd, exited
		d.public, d.admin = "http://"+a[0], "http://"+a[1]
		d.mu.Unlock()
		return nil
	case err := <-exited:
		return fmt.Errorf("limiterd exited before serving (%v):\n%s", err, tail)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("limiterd did not serve within 30s:\n%s", tail)
	}
}

// Pid returns the running process's id, 0 when none runs.
func (d *Daemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Public returns the public listener's base URL (http://host:port).
func (d *Daemon) Public() string { d.mu.Lock(); defer d.mu.Unlock(); return d.public }

// Admin returns the admin listener's base URL.
func (d *Daemon) Admin() string { d.mu.Lock(); defer d.mu.Unlock(); return d.admin }

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (d *Daemon) Kill() error { return d.signalAndWait(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits up to 30 s for the exit.
func (d *Daemon) Stop() error { return d.signalAndWait(syscall.SIGTERM, 30*time.Second) }

// Signal sends sig to the running process (SIGHUP: a reload).
func (d *Daemon) Signal(sig syscall.Signal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return errors.New("limiterd is not running")
	}
	return d.cmd.Process.Signal(sig)
}

func (d *Daemon) signalAndWait(sig syscall.Signal, wait time.Duration) error {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("limiterd did not exit within %v of %v", wait, sig)
	}
}

// tailBuffer keeps the last 40 lines of a log.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailBuffer) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > 40 {
		t.lines = t.lines[1:]
	}
}

// String returns the lines kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// ProcStats are a process's resources as /proc shows them.
type ProcStats struct {
	// RSS and HWM are VmRSS and VmHWM (the peak resident set), in bytes;
	// Anon and File split RSS into anonymous memory (the heap, stacks) and
	// file pages (the binary, the database's mmap).
	RSS, HWM, Anon, File int64
	// FDs is the number of open file descriptors.
	FDs int
}

// ReadProcStats reads /proc/PID/status and /proc/PID/fd (Linux only).
func ReadProcStats(pid int) (ProcStats, error) {
	var s ProcStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = n << 10
		case "VmHWM":
			s.HWM = n << 10
		case "RssAnon":
			s.Anon = n << 10
		case "RssFile":
			s.File = n << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	return s, nil
}

// MiB formats bytes as MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
