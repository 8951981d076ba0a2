package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoopMinimumRefused: snapshot.interval = "1ns" is refused at start
// (exit 2) and on a SIGHUP reload (the running config stays), with the key
// and the minimum named.
func TestLoopMinimumRefused(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	const want = `config: snapshot.interval: must be at least 1s`
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte(testConfig(up.URL, filepath.Join(dir, "data"), "[snapshot]\ninterval = \"1ns\"\n")), 0o600)
	var stderr bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	if code := m.Run(context.Background(), []string{"serve", "-config", path}); code != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("serve with 1ns: exit %d, stderr:\n%s", code, stderr.String())
	}

	d := startDaemon(t, up.URL, "")
	body := testConfig(up.URL, filepath.Join(filepath.Dir(d.cfg), "data"), "[cluster]\nsync_interval = \"1ms\"\n[snapshot]\ninterval = \"1ns\"\n")
	os.WriteFile(d.cfg, []byte(body), 0o600)
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the refusal logged", func() bool {
		s := d.stderr.String()
		return strings.Contains(s, "reload refused") && strings.Contains(s, "snapshot.interval: must be at least 1s") &&
			strings.Contains(s, "cluster.sync_interval: must be at least 10ms")
	})
	d.Main.mu.Lock()
	got := d.Main.cfg.Snapshot.Interval
	d.Main.mu.Unlock()
	if got < time.Second {
		t.Fatalf("snapshot.interval in force after the refused reload: %s", got)
	}
}
