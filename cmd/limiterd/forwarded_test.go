package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// proxiedConfig is a daemon behind a trusted proxy on 127.0.0.1, with the
// default exemption of 127.0.0.1 and general's leaky_limit at 20. header
// is the [peers] forwarded_header line ("" leaves it out).
func proxiedConfig(upstream, dataDir, header string) string {
	return fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
upstream = %q
data_dir = %q

[admin]
listen = "127.0.0.1:0"
token = "test-token"

[peers]
trusted_proxies = ["127.0.0.1"]
exempt = ["127.0.0.1"]
%s

[http_api.limiter.general]
leaky_limit = 20
leaky_tick_reduction = 20
`, upstream, dataDir, header)
}

// TestForwardedBypassClosed reproduces the bypass an attack found: behind
// a trusted proxy that writes Forwarded, with the default header choice
// ("auto", which read X-Forwarded-For first) and the default exemption of
// 127.0.0.1, a client sending "X-Forwarded-For: unknown" was the proxy —
// local_peers, never limited — and "X-Forwarded-For: <any>" got a fresh
// bucket per request. Now the header must be named, "auto" is refused, the
// header the proxy does not write is never read, and a malformed hop is
// one shared, limited bucket.
func TestForwardedBypassClosed(t *testing.T) {
	up, hits := countingUpstream(t, nil)

	// The defaults no longer guess which header the proxy writes.
	for _, header := range []string{"", `forwarded_header = "auto"`} {
		path := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(path, []byte(proxiedConfig(up.URL, t.TempDir(), header)), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr}
		if code := m.Run(context.Background(), []string{"check-config", "-config", path}); code != exitUsage || !strings.Contains(stderr.String(), "config: peers.forwarded_header: ") {
			t.Errorf("%q with trusted proxies: exit %d, %q; want 2 naming peers.forwarded_header", header, code, stderr.String())
		}
	}

	d := startDaemonWith(t, func(dataDir string) string {
		return proxiedConfig(up.URL, dataDir, `forwarded_header = "forwarded"`)
	})
	// send makes n requests as the proxy would pass them on, and returns
	// how many got 429.
	send := func(n int, hdr func(i int) []string) (rejected int) {
		for i := range n {
			resp := d.get("/info", hdr(i)...)
			if resp.StatusCode == 429 {
				rejected++
			}
		}
		return rejected
	}
	// "X-Forwarded-For: unknown" passed through: not the exempt proxy.
	if r := send(25, func(int) []string {
		return []string{"X-Forwarded-For", "unknown", "Forwarded", "for=198.51.100.7"}
	}); r != 5 {
		t.Errorf("client XFF unknown: %d of 25 rejected, want 5 (limited as 198.51.100.7)", r)
	}
	// A new X-Forwarded-For per request: one bucket all the same.
	if r := send(25, func(i int) []string {
		return []string{"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i), "Forwarded", "for=198.51.100.8"}
	}); r != 5 {
		t.Errorf("client XFF rotating: %d of 25 rejected, want 5 (limited as 198.51.100.8)", r)
	}
	// A hop that names no address where the peer would be: one shared,
	// limited bucket, whatever the text, never the proxy.
	if r := send(25, func(i int) []string {
		return []string{"Forwarded", fmt.Sprintf("for=_hidden%d", i)}
	}); r != 5 {
		t.Errorf("malformed hops: %d of 25 rejected, want 5 (one shared bucket)", r)
	}
	if got := hits.Load(); got != 60 {
		t.Errorf("the node got %d requests, want 60", got)
	}
	_, v := d.admin("GET", "/api/v1/peers?limit=100", "")
	seen := map[string]bool{}
	for _, p := range v["peers"].([]any) {
		seen[p.(map[string]any)["peer"].(string)] = true
	}
	if len(seen) != 3 || !seen["198.51.100.7"] || !seen["198.51.100.8"] || seen["127.0.0.1"] {
		t.Errorf("tracked peers %v, want 198.51.100.7, 198.51.100.8 and the malformed bucket", seen)
	}
}
