package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// StartReplica runs a redis-server replicating master, and waits until
// the replication link is up.
func StartReplica(tb testing.TB, master *Server, extra ...string) *Server {
	tb.Helper()
	r := Start(tb, append([]string{"--replicaof", "127.0.0.1", fmt.Sprint(master.port)}, extra...)...)
	waitInfo(tb, r, "master_link_status:up")
	return r
}

// waitInfo waits up to 15 s until the INFO of s holds want.
func waitInfo(tb testing.TB, s *Server, want string) {
	tb.Helper()
	cli := cliPath(tb)
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command(cli, "-p", fmt.Sprint(s.port), "info").Output()
		if strings.Contains(string(out), want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: no %q in INFO within 15s:\n%s", s.Addr(), want, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cliPath(tb testing.TB) string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatalf("redis-cli is needed: %v", err)
	}
	return cli
}

// StartSentinels runs n redis-sentinel processes (Debian's
// redis-sentinel) on free loopback ports watching the master named name
// at master, with the given quorum, a master declared down after 1 s of
// silence, and password (when not empty) as their own requirepass. They
// are stopped when tb ends. Without redis-sentinel a test skips, unless
// CI=true.
func StartSentinels(tb testing.TB, n int, name string, master *Server, quorum int, password string) []*Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis-sentinel is needed (Debian package redis-sentinel): %v", err)
		}
		tb.Skipf("redis-sentinel not installed: %v", err)
	}
	var out []*Server
	for range n {
		s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
		for attempt := 0; ; attempt++ {
			s.port = freePort(tb)
			conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
				"sentinel monitor %s 127.0.0.1 %d %d\n"+
				"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 4000\nsentinel parallel-syncs %s 1\n",
				s.port, s.dir, filepath.Join(s.dir, "redis.log"), name, master.port, quorum, name, name, name)
			if password != "" {
				conf += "requirepass " + password + "\n"
			}
			s.sentinelConf = filepath.Join(s.dir, "sentinel.conf")
			if err := os.WriteFile(s.sentinelConf, []byte(conf), 0o600); err != nil {
				tb.Fatal(err)
			}
			err := s.start()
			if err == nil {
				break
			}
			if attempt == 3 {
				tb.Fatalf("redis-sentinel: %v", err)
			}
		}
		tb.Cleanup(s.Stop)
		out = append(out, s)
	}
	return out
}
