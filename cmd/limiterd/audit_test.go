package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// admin.audit_max_entries through the daemon: the log keeps the newest
// entries, the pruned ones are counted in /metrics, a reload that lowers
// the bound removes the backlog at once, and one that sets 0 keeps
// everything from then on.
func TestAuditMaxEntries(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	edit := func(n, from int) {
		t.Helper()
		for i := range n {
			if code, v := d.admin("PATCH", "/api/v1/groups/general", fmt.Sprintf(`{"leaky_limit": %d}`, 100+from+i)); code != 200 {
				t.Fatalf("PATCH: %d %v", code, v)
			}
		}
	}
	entries := func() (count int, newest, oldest float64) {
		t.Helper()
		code, v := d.admin("GET", "/api/v1/audit?limit=1000", "")
		if code != 200 {
			t.Fatalf("GET /api/v1/audit: %d %v", code, v)
		}
		es := v["entries"].([]any)
		if len(es) == 0 {
			return 0, 0, 0
		}
		return len(es), es[0].(map[string]any)["id"].(float64), es[len(es)-1].(map[string]any)["id"].(float64)
	}
	reload := func(extra string) {
		t.Helper()
		body := strings.Replace(testConfig(up.URL, filepath.Join(filepath.Dir(d.cfg), "data"), ""), `token = "test-token"`, "token = \"test-token\"\n"+extra, 1)
		if err := os.WriteFile(d.cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		before := strings.Count(d.stderr.String(), "config reloaded")
		d.Hangup <- syscall.SIGHUP
		eventually(t, "the reload", func() bool { return strings.Count(d.stderr.String(), "config reloaded") > before })
	}

	edit(150, 0) // the default bound (1 000 000) keeps all
	if n, newest, oldest := entries(); n != 150 || newest != 150 || oldest != 1 {
		t.Fatalf("default bound: %d entries, ids %v…%v", n, oldest, newest)
	}
	reload("audit_max_entries = 100")
	eventually(t, "the backlog removed", func() bool { n, _, _ := entries(); return n == 100 })
	if n, newest, oldest := entries(); n != 100 || newest != 150 || oldest != 51 {
		t.Fatalf("bound 100: %d entries, ids %v…%v", n, oldest, newest)
	}
	if !strings.Contains(d.stderr.String(), "oldest entries removed to keep admin.audit_max_entries") {
		t.Fatalf("the pruning is not logged:\n%s", d.stderr.String())
	}
	edit(30, 150)
	if n, newest, oldest := entries(); n != 100 || newest != 180 || oldest != 81 {
		t.Fatalf("bound 100, 30 more edits: %d entries, ids %v…%v", n, oldest, newest)
	}
	if got := d.metric("limiterd_audit_pruned_total"); got != "80" {
		t.Fatalf("limiterd_audit_pruned_total %q, want 80", got)
	}
	reload("audit_max_entries = 0")
	edit(20, 180)
	if n, newest, oldest := entries(); n != 120 || newest != 200 || oldest != 81 {
		t.Fatalf("bound 0: %d entries, ids %v…%v", n, oldest, newest)
	}
}
