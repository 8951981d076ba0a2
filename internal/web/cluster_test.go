package web_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// fakeCluster is a ClusterStatus whose state the test sets.
type fakeCluster struct {
	mu sync.Mutex
	st templates.Cluster
}

func (f *fakeCluster) ClusterState() templates.Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

// TestOverviewClusterLine: the overview (and its refreshing partial) says
// where the limits live: this instance alone, Redis in use, or Redis down
// and what is done meanwhile.
func TestOverviewClusterLine(t *testing.T) {
	d := newDash(t)
	cookie, _ := d.login()
	if p := byID(d.page("/", cookie), "cluster"); p == nil || !strings.Contains(text(p), `cluster.backend = "local"`) {
		t.Fatalf("local backend: %v", p)
	}

	fc := &fakeCluster{st: templates.Cluster{Mode: "strict", OnFailure: "closed", Redis: "127.0.0.1:6379", Up: true, Since: d.clock.Now().Add(-90 * time.Second)}}
	s := web.MustNewServer(t, d.lim, d.live, web.Options{Token: dashToken, Now: d.clock.Now, Cluster: fc, DataPlane: proxy.New(d.lim, proxy.Options{Now: d.clock.Now})})
	d = &dash{t: t, h: s.AdminHandler(), lim: d.lim, live: d.live, clock: d.clock}
	cookie, _ = d.login()
	p := byID(d.page("/", cookie), "cluster")
	if p == nil || text(p) != "Limits are shared through Redis (127.0.0.1:6379), mode strict: Redis up for 1m30s." || attr(p, "class") != "muted" {
		t.Fatalf("redis up: %q class %q", text(p), attr(p, "class"))
	}
	fc.mu.Lock()
	fc.st.Up, fc.st.Reason, fc.st.Since = false, "timeout: redis did not answer within cluster.timeout", d.clock.Now().Add(-5*time.Second)
	fc.mu.Unlock()
	p = byID(d.page("/stats", cookie), "cluster")
	want := "Redis (127.0.0.1:6379) unavailable for 5s: timeout: redis did not answer within cluster.timeout. Answering 503 (on_failure = closed)."
	if p == nil || text(p) != want || attr(p, "class") != "muted off" {
		t.Fatalf("redis down: %q class %q", text(p), attr(p, "class"))
	}
}
