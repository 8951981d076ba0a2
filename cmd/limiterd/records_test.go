package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/redistest"
)

// restartDaemon stops d and starts limiterd again on d's config file (its
// data dir, its database).
func restartDaemon(t *testing.T, d *daemon) *daemon {
	t.Helper()
	if code := d.stop(); code != 0 {
		t.Fatalf("limiterd exited with %d:\n%s", code, d.stderr)
	}
	m := &Main{Stdout: io.Discard, Env: nil, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	n := &daemon{Main: m, t: t, done: make(chan int, 1), stderr: &syncBuffer{}, cfg: d.cfg}
	m.Stderr = n.stderr
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- m.Run(ctx, []string{"serve", "-config", d.cfg}) }()
	select {
	case <-m.Ready():
	case code := <-n.done:
		t.Fatalf("limiterd exited with %d:\n%s", code, n.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("limiterd did not start")
	}
	t.Cleanup(func() { n.stop() })
	return n
}

// deniedOn reports whether d's live deny list holds ip.
func deniedOn(d *daemon, ip string) bool {
	_, v := d.admin("GET", "/api/v1/exemptions", "")
	list, _ := v["exemptions"].([]any)
	for _, x := range list {
		if e, _ := x.(map[string]any); e["kind"] == "deny_peer" && e["value"] == ip {
			return true
		}
	}
	return false
}

// TestClusterEditOutlivesRestart: a deny entry answered 201 while Redis is
// down, on an instance that restarts before Redis comes back (empty),
// reaches the other instance — which had removed that entry before, a
// removal the entry's lowest stamp would have lost to without the records
// kept in the database (decision 221).
func TestClusterEditOutlivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	up, _ := countingUpstream(t, nil)
	cfg := clusterConfig(up.URL, srv.Addr(), "timeout = \"200ms\"\non_failure = \"open\"")
	a, b := startDaemonWith(t, cfg), startDaemonWith(t, cfg)
	const ip = "192.0.2.77"
	body := `{"kind": "deny_peer", "value": "` + ip + `"}`
	if code, v := b.admin("POST", "/api/v1/exemptions", body); code != 201 {
		t.Fatalf("POST on b: %d %v", code, v)
	}
	eventually(t, "b's deny entry on a", func() bool { return deniedOn(a, ip) })
	if code, v := b.admin("DELETE", "/api/v1/exemptions", body); code != 200 {
		t.Fatalf("DELETE on b: %d %v", code, v)
	}
	eventually(t, "b's removal on a", func() bool { return !deniedOn(a, ip) })

	srv.Stop()
	if code, v := a.admin("POST", "/api/v1/exemptions", body); code != 201 {
		t.Fatalf("POST on a while redis is down: %d %v", code, v)
	}
	a = restartDaemon(t, a)
	if !deniedOn(a, ip) {
		t.Fatal("a lost its own deny entry at the restart")
	}
	srv.Restart() // empty
	eventually(t, "a's deny entry on b", func() bool { return deniedOn(b, ip) })
	if a.as(ip, "/info") != 403 || b.as(ip, "/info") != 403 {
		t.Error("the denied peer is not answered 403 by both instances")
	}
	time.Sleep(1500 * time.Millisecond) // a sync or two more: still so
	if !deniedOn(a, ip) || !deniedOn(b, ip) {
		t.Error("the deny entry did not stay")
	}
}
