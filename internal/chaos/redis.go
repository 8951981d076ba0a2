package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/limiterd/limiterd/internal/redistest"
)

// Redis is a redis-server process on a fixed loopback port, with no
// persistence, that can be killed (SIGKILL) and started again on the same
// port, empty. It is not safe for concurrent use.
type Redis struct {
	Port int
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis runs redis-server (from the PATH) on a free port of
// 127.0.0.1, its files in dir (made if need be).
func StartRedis(dir string) (*Redis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is needed (Debian package redis-server): %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{Port: port, Dir: dir}
	return r, r.Start()
}

// Addr returns host:port.
func (r *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.Port) }

// Start runs the server (again) and waits up to 10 s until it answers.
func (r *Redis) Start() error {
	var err error
	for range 50 { // the port of a killed server may take a moment to free
		if err = r.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (r *Redis) start() error {
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(r.Port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", r.Dir, "--logfile", filepath.Join(r.Dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
			return fmt.Errorf("redis-server exited on port %d:\n%s", r.Port, lastLines(string(log), 5))
		default:
		}
		if redistest.Ping(r.Addr()) {
			r.cmd, r.done = cmd, done
			return nil
		}
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server did not answer on port %d within 10s", r.Port)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (r *Redis) Kill() { r.stop(syscall.SIGKILL) }

// Stop sends SIGTERM and waits.
func (r *Redis) Stop() { r.stop(syscall.SIGTERM) }

func (r *Redis) stop(sig syscall.Signal) {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
