// Package redistest starts a real redis-server for tests, on a free
// loopback port, with no persistence, and stops it when the test ends
// (like net/http/httptest for HTTP servers). Without redis-server on the
// PATH a test skips, unless the environment says CI=true: then it fails,
// so that CI cannot pass by skipping.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process run by a test. Its methods are safe
// for concurrent use.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	args []string
	// tls, when not nil, is the client side of a TLS-only server: port is
	// its tls-port.
	tls *tls.Config
	// sentinelConf, when set, makes this a redis-sentinel run on it.
	sentinelConf string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Available reports whether redis-server is installed; with CI=true a
// missing one fails tb instead.
func Available(tb testing.TB) bool {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis-server is needed (Debian package redis-server): %v", err)
		}
		return false
	}
	return true
}

// Start runs redis-server on a free port of 127.0.0.1 with extra
// arguments (such as "--maxmemory", "1mb") and waits until it answers. It
// is stopped when tb ends.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	return start(tb, nil, extra...)
}

func start(tb testing.TB, tc *tls.Config, extra ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis-server is needed (Debian package redis-server): %v", err)
		}
		tb.Skipf("redis-server not installed: %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), args: extra, tls: tc}
	for attempt := 0; ; attempt++ {
		s.port = freePort(tb)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 3 {
			tb.Fatalf("redis-server: %v", err)
		}
	}
	tb.Cleanup(s.Stop)
	return s
}

func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() error {
	port := []string{"--port", fmt.Sprint(s.port)}
	if s.tls != nil {
		port = []string{"--port", "0", "--tls-port", fmt.Sprint(s.port)}
	}
	args := append(append(port,
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"),
	), s.args...)
	if s.sentinelConf != "" {
		args = []string{s.sentinelConf}
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.ping() {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("no answer on port %d within 10s; log:\n%s", s.port, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) ping() bool {
	if s.tls == nil {
		return Ping(s.Addr())
	}
	d := &net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := tls.DialWithDialer(d, "tcp", s.Addr(), s.tls)
	if err != nil {
		return false
	}
	return pingConn(c)
}

// Ping reports whether the Redis at addr answers PING (a server with a
// password answers NOAUTH: it is up), within about a second.
func Ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	return pingConn(c)
}

func pingConn(c net.Conn) bool {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Pid returns the server's process id, 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and waits for
// it; a stopped server stays stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot exit
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops the server and starts it again on the same port, empty.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redis-server restart: %v", err)
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// nothing is answered, as with a stalled Redis.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
