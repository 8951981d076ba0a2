package config

import (
	"fmt"
	"strconv"
	"strings"
)

// The [server] keys of the public listener (the data plane): body limit,
// timeouts and connection caps. Their defaults are in config.toml.

// buildDataPlane reads and checks the public listener's keys of [server].
func (b *builder) buildDataPlane(c *Server) {
	p := b.p
	if s, ok := b.str("server", "max_request_body"); ok {
		n, err := ParseSize(s)
		switch {
		case err != nil:
			p.add("server.max_request_body", err.Error())
		case n < 1:
			p.addf("server.max_request_body", "must be at least 1 byte, got %q", s)
		}
		c.MaxRequestBody = n
	}
	c.ReadHeaderTimeout = b.positiveDuration("server", "read_header_timeout")
	c.IdleTimeout = b.positiveDuration("server", "idle_timeout")
	c.ClientBodyTimeout = b.positiveDuration("server", "client_body_timeout")
	c.SendTimeout = b.positiveDuration("server", "send_timeout")
	c.UpstreamConnectTimeout = b.positiveDuration("server", "upstream_connect_timeout")
	c.UpstreamHeaderTimeout = b.positiveDuration("server", "upstream_header_timeout")
	c.UpstreamReadTimeout = b.positiveDuration("server", "upstream_read_timeout")
	count := func(key string, min int64) int {
		n, ok := b.num("server", key)
		if ok && (n < min || n > 1<<24) {
			p.addf("server."+key, "must be an integer from %d to %d, got %d", min, 1<<24, n)
		}
		return int(n)
	}
	c.UpstreamMaxConns = count("upstream_max_conns", 1)
	c.MaxConns = count("max_conns", 1)
	c.MaxConnsPerIP = count("max_conns_per_ip", 0)
}

// ParseSize parses a size in bytes: an integer, optionally followed by a
// unit, B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000),
// as in "64MiB" or "512 KiB".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && '0' <= t[i] && t[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf(`must be a size such as "64MiB", "512KiB" or "1048576", got %q`, s)
	}
	var mul int64
	switch strings.TrimSpace(t[i:]) {
	case "", "B":
		mul = 1
	case "KiB":
		mul = 1 << 10
	case "MiB":
		mul = 1 << 20
	case "GiB":
		mul = 1 << 30
	case "KB":
		mul = 1e3
	case "MB":
		mul = 1e6
	case "GB":
		mul = 1e9
	default:
		return 0, fmt.Errorf(`must be a size such as "64MiB", "512KiB" or "1048576" (units B, KiB, MiB, GiB, KB, MB, GB), got %q`, s)
	}
	if n > (1<<62)/mul {
		return 0, fmt.Errorf("must be at most 4 EiB, got %q", s)
	}
	return n * mul, nil
}

// FormatSize writes n as ParseSize reads it, in the largest binary unit
// that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// dataPlaneTOML fills the data plane keys of the [server] table of TOML.
func dataPlaneTOML(c Server, f *fileServer) {
	f.MaxRequestBody = FormatSize(c.MaxRequestBody)
	f.ReadHeaderTimeout = c.ReadHeaderTimeout.String()
	f.IdleTimeout = c.IdleTimeout.String()
	f.ClientBodyTimeout = c.ClientBodyTimeout.String()
	f.SendTimeout = c.SendTimeout.String()
	f.UpstreamConnectTimeout = c.UpstreamConnectTimeout.String()
	f.UpstreamHeaderTimeout = c.UpstreamHeaderTimeout.String()
	f.UpstreamReadTimeout = c.UpstreamReadTimeout.String()
	f.UpstreamMaxConns = c.UpstreamMaxConns
	f.MaxConns = c.MaxConns
	f.MaxConnsPerIP = c.MaxConnsPerIP
}
