package chaos

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Setup is what every driver's daemon runs with: its ports, fixed for
// all its restarts, its data dir and config file.
type Setup struct {
	Public, Admin string // host:port
	DataDir       string
	Config        string
}

// FreePort returns a port of 127.0.0.1 free now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// NewSetup picks two free ports and writes dir/config.toml: the public
// listener in front of upstream, peers named by X-Forwarded-For from
// 127.0.0.1 (trusted, not exempt) with peerKeys added to [peers], general
// at leakyLimit with its tick every tick (0: an hour, so that nothing is
// forgiven during a run; a live edit of the interval would take effect
// only at the next tick of the old schedule), and extra TOML (tables)
// appended.
func NewSetup(dir, upstream string, leakyLimit int, tick time.Duration, peerKeys, extra string) (*Setup, error) {
	if tick == 0 {
		tick = time.Hour
	}
	pp, err := FreePort()
	if err != nil {
		return nil, err
	}
	ap, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Setup{Public: fmt.Sprintf("127.0.0.1:%d", pp), Admin: fmt.Sprintf("127.0.0.1:%d", ap),
		DataDir: filepath.Join(dir, "data"), Config: filepath.Join(dir, "config.toml")}
	cfg := fmt.Sprintf(`
[server]
listen = %q
upstream = %q
data_dir = %q
shutdown_timeout = "5s"

[log]
rejections = "off"

[admin]
listen = %q
token = %q

[peers]
exempt = []
trusted_proxies = ["127.0.0.1/32"]
forwarded_header = "x-forwarded-for"
ipv6_prefix = 64
%s

[http_api.limiter.general]
sliding_window_limit = 0
leaky_limit = %d
leaky_tick_reduction = %d
leaky_tick_interval = %d
concurrency_limit = 1000
%s
`, s.Public, upstream, s.DataDir, s.Admin, Token, peerKeys, leakyLimit, leakyLimit, tick.Milliseconds(), extra)
	if err := os.WriteFile(s.Config, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// snapshotTOML is the [snapshot] table of the drivers' configs: a
// snapshot every interval.
func snapshotTOML(interval time.Duration) string {
	return fmt.Sprintf("[snapshot]\ninterval = %q\n", interval)
}

// clusterTOML is the [cluster] tables of an instance sharing the
// redis-server at addr (host:port) with others: strict decisions (one
// script a request), made locally while Redis is down or answers later
// than 500 ms (on a loaded machine, a shorter timeout sends instances to
// local decisions now and then, which the drivers would take for an
// outage).
func clusterTOML(addr string) string {
	return fmt.Sprintf(`[cluster]
backend = "redis"
mode = "strict"
on_failure = "local"
timeout = "500ms"

[cluster.redis]
addrs = [%q]
`, addr)
}
