package config_test

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{
		"64MiB": 64 << 20, "512 KiB": 512 << 10, "1GiB": 1 << 30, "1048576": 1 << 20, "10B": 10,
		"2MB": 2e6, "3KB": 3e3, "1GB": 1e9,
	} {
		if got, err := config.ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "64mib", "64 parsecs", "-1MiB", "1.5MiB", "99999999999GiB"} {
		if n, err := config.ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", s, n)
		}
	}
	for _, n := range []int64{64 << 20, 512 << 10, 1 << 30, 1000, 3 << 30, 1} {
		if got, err := config.ParseSize(config.FormatSize(n)); err != nil || got != n {
			t.Errorf("FormatSize(%d) = %q does not read back: %d, %v", n, config.FormatSize(n), got, err)
		}
	}
}

// TestDataPlaneKeys: the public listener's keys are read, printed back by
// check-config, and each bad value is an error naming its key.
func TestDataPlaneKeys(t *testing.T) {
	c, err := loadFile(t, `
[server]
data_dir = "/var/lib/limiterd"
max_request_body = "512KiB"
read_header_timeout = "3s"
idle_timeout = "1m"
client_body_timeout = "7s"
send_timeout = "8s"
upstream_connect_timeout = "1s"
upstream_header_timeout = "2m"
upstream_read_timeout = "90s"
upstream_max_conns = 64
max_conns = 4096
max_conns_per_ip = 0
http2 = false
http2_max_concurrent_streams = 32
http2_max_header_list_size = "16KiB"
http2_conn_stream_rate = 50
http2_peer_stream_rate = 0
upstream_protocol = "h2c"
answer_memory = "64KiB"
answer_memory_total = "8MiB"
answer_disk = "0"
answer_disk_total = "1GiB"
answer_temp_dir = "/var/tmp"
`)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Server{
		Listen: "0.0.0.0:1985", Upstream: "http://127.0.0.1:1984", DataDir: "/var/lib/limiterd", ShutdownTimeout: 15 * time.Second,
		MaxRequestBody: 512 << 10, ReadHeaderTimeout: 3 * time.Second, IdleTimeout: time.Minute,
		ClientBodyTimeout: 7 * time.Second, SendTimeout: 8 * time.Second, UpstreamConnectTimeout: time.Second,
		UpstreamHeaderTimeout: 2 * time.Minute, UpstreamReadTimeout: 90 * time.Second, UpstreamMaxConns: 64,
		MaxConns: 4096, MaxConnsPerIP: 0,
		HTTP2: false, HTTP2MaxConcurrentStreams: 32, HTTP2MaxHeaderListSize: 16 << 10, HTTP2ConnStreamRate: 50,
		UpstreamProtocol: "h2c",
		AnswerMemory:     64 << 10, AnswerMemoryTotal: 8 << 20, AnswerDisk: 0, AnswerDiskTotal: 1 << 30, AnswerTempDir: "/var/tmp",
	}
	if c.Server != want {
		t.Fatalf("server:\n got %+v\nwant %+v", c.Server, want)
	}
	b, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := loadFile(t, string(b))
	if err != nil || back.Server != want {
		t.Fatalf("check-config's output loads back as %+v, %v", back, err)
	}

	_, err = loadFile(t, `
[server]
max_request_body = "64 parsecs"
read_header_timeout = "0s"
idle_timeout = "-1s"
send_timeout = "soon"
upstream_max_conns = 0
max_conns = 99999999
max_conns_per_ip = -1
http2 = "yes"
http2_max_concurrent_streams = 0
http2_max_header_list_size = "100B"
http2_conn_stream_rate = 0
http2_peer_stream_rate = -5
upstream_protocol = "h3"
answer_temp_dir = "tmp"
`)
	wantLines := []string{
		`config: server.send_timeout: must be a duration such as "5s", "100ms" or "1m30s", got "soon"`,
		`config: server.http2: must be true or false, got string "yes"`,
		`config: server.max_request_body: must be a size such as "64MiB", "512KiB" or "1048576" (units B, KiB, MiB, GiB, KB, MB, GB), got "64 parsecs"`,
		"config: server.read_header_timeout: must be a duration > 0, got 0s",
		"config: server.idle_timeout: must be a duration > 0, got -1s",
		"config: server.upstream_max_conns: must be an integer from 1 to 16777216, got 0",
		"config: server.max_conns: must be an integer from 1 to 16777216, got 99999999",
		"config: server.max_conns_per_ip: must be an integer from 0 to 16777216, got -1",
		"config: server.http2_max_concurrent_streams: must be an integer from 1 to 16777216, got 0",
		`config: server.http2_max_header_list_size: must be from 1KiB to 16MiB, got "100B"`,
		"config: server.http2_conn_stream_rate: must be an integer from 1 to 16777216, got 0",
		"config: server.http2_peer_stream_rate: must be an integer from 0 to 16777216, got -5",
		`config: server.upstream_protocol: must be one of http1, h2c, got "h3"`,
		`config: server.answer_temp_dir: must be an absolute path or empty, got "tmp"`,
	}
	got := errorLines(t, err)
	if len(got) != len(wantLines) {
		t.Fatalf("errors:\n%s", err)
	}
	for i := range got {
		if got[i] != wantLines[i] {
			t.Errorf("error %d:\n got %s\nwant %s", i, got[i], wantLines[i])
		}
	}
}
