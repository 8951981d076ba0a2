package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownDuringStuckReload: a SIGHUP whose reload never ends (the
// config path is now a FIFO nobody writes: reading it blocks) does not
// keep SIGTERM from ending the process; the shutdown says it did not wait.
func TestShutdownDuringStuckReload(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	if err := os.Remove(d.cfg); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(d.cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// Let the stuck reload go at the end, refused, and wait for it, so
	// that nothing is left running.
	t.Cleanup(func() {
		if f, err := os.OpenFile(d.cfg, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.WriteString("[server\n")
			f.Close()
			eventually(t, "the reload left behind refused", func() bool { return strings.Contains(d.stderr.String(), "reload refused") })
		}
	})
	d.Hangup <- syscall.SIGHUP
	time.Sleep(300 * time.Millisecond) // the reload blocks opening the FIFO
	if resp := d.get("/info"); resp.StatusCode != 200 {
		t.Fatalf("public request during the stuck reload: %d", resp.StatusCode)
	}
	start := time.Now()
	d.cancel() // SIGTERM
	select {
	case code := <-d.done:
		d.done <- code
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("stopped after %v", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("limiterd did not stop while a reload was stuck")
	}
	if !strings.Contains(d.stderr.String(), "a reload is still running") {
		t.Errorf("the shutdown does not say it left a reload behind:\n%s", d.stderr.String())
	}
}
