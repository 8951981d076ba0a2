package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The daemon's adaptive concurrency end to end: the limit measured from
// the node's answers; a live edit refused naming the group and the key,
// a good one applied and audited; a SIGHUP with a bad value refused naming
// them; and a restart starting from the limit and the unloaded latency the
// snapshot kept, not from the minimum nor from the maximum.
func TestAdaptiveDaemon(t *testing.T) {
	up, _ := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		w.Write([]byte("from the node"))
	})
	dir := t.TempDir()
	config := func(keys string) func(string) string {
		return func(string) string {
			c := testConfig(up.URL, dir, "adaptive_concurrency = true\nadaptive_min_limit = 2\nadaptive_max_limit = 50\nadaptive_probe_samples = 5\nadaptive_window = 50\n"+keys)
			return strings.Replace(c, "leaky_limit = 20\nleaky_tick_reduction = 20\n", "leaky_limit = 100000\nleaky_tick_reduction = 100000\n", 1)
		}
	}
	d := startDaemonWith(t, config(""))
	adaptive := func(d *daemon) map[string]any {
		t.Helper()
		code, v := d.admin("GET", "/api/v1/groups/general", "")
		a, _ := v["adaptive"].(map[string]any)
		if code != 200 || a == nil {
			t.Fatalf("GET /api/v1/groups/general: %d %v", code, v)
		}
		return a
	}
	// 4 at a time, in rounds of 240 answers, until the unloaded latency is
	// measured and the limit has left the minimum (on a loaded host a
	// round's latencies can be stretched and the probe take longer: the
	// rounds go on, up to 15 s).
	var a map[string]any
	for deadline := time.Now().Add(15 * time.Second); ; {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 60 {
					d.get("/info")
				}
			})
		}
		wg.Wait()
		a = adaptive(d)
		if a["unloaded_ns"].(float64) >= float64(4*time.Millisecond) && a["probing"] == false && a["limit"].(float64) > 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s of answers in 5 ms, 4 at a time: %v", a)
		}
	}

	// A live edit: refused naming the group and the key; applied and
	// audited.
	if code, v := d.admin("PATCH", "/api/v1/groups/general", `{"adaptive_min_limit": 80}`); code != 422 ||
		!strings.Contains(fmt.Sprint(v), "adaptive_min_limit") || !strings.Contains(fmt.Sprint(v), "general") {
		t.Fatalf("a minimum above the maximum, live: %d %v", code, v)
	}
	if code, v := d.admin("PATCH", "/api/v1/groups/general", `{"adaptive_max_limit": 40}`); code != 200 {
		t.Fatalf("PATCH adaptive_max_limit: %d %v", code, v)
	}
	if _, v := d.admin("GET", "/api/v1/audit?limit=10", ""); !strings.Contains(fmt.Sprint(v["entries"]), "adaptive_max_limit") {
		t.Fatalf("the live edit is not audited: %v", v)
	}

	// A SIGHUP with an algorithm that does not exist: refused, naming them.
	if err := os.WriteFile(d.cfg, []byte(config(`adaptive_algorithm = "vegas"`+"\n")("")), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Hangup <- syscall.SIGHUP
	eventually(t, "the refusal", func() bool { return strings.Contains(d.stderr.String(), "reload refused") })
	if log := d.stderr.String(); !strings.Contains(log, "http_api.limiter.general.adaptive_algorithm") {
		t.Fatalf("the refusal does not name the key:\n%s", log)
	}

	// A restart starts from the saved limit and unloaded latency.
	if err := os.WriteFile(d.cfg, []byte(config("")("")), 0o600); err != nil {
		t.Fatal(err)
	}
	before := adaptive(d)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d\n%s", code, d.stderr)
	}
	d2 := startDaemonWith(t, config(""))
	after := adaptive(d2)
	t.Logf("before the stop %v; restarted %v", before, after)
	if after["limit"] != before["limit"] || after["unloaded_ns"] != before["unloaded_ns"] || after["probing"] != false {
		t.Fatalf("restarted: %v, before the stop %v", after, before)
	}
}
