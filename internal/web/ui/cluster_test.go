package ui_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/internal/webtest"
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
	d := webtest.NewDash(t)
	cookie, _ := d.Login()
	if p := webtest.ByID(d.Page("/", cookie), "cluster"); p == nil || !strings.Contains(webtest.Text(p), `cluster.backend = "local"`) {
		t.Fatalf("local backend: %v", p)
	}

	fc := &fakeCluster{st: templates.Cluster{Mode: "strict", OnFailure: "closed", Redis: "127.0.0.1:6379", Up: true, Since: d.Clock.Now().Add(-90 * time.Second)}}
	s := webtest.MustNewServer(t, d.Lim, d.Live, web.Options{Token: webtest.Token, Now: d.Clock.Now, Cluster: fc, DataPlane: proxy.New(d.Lim, proxy.Options{Now: d.Clock.Now})})
	d = &webtest.Dash{T: t, H: s.AdminHandler(), Lim: d.Lim, Live: d.Live, Clock: d.Clock}
	cookie, _ = d.Login()
	p := webtest.ByID(d.Page("/", cookie), "cluster")
	if p == nil || webtest.Text(p) != "Limits are shared through Redis (127.0.0.1:6379), mode strict: Redis up for 1m30s." || webtest.Attr(p, "class") != "muted" {
		t.Fatalf("redis up: %q class %q", webtest.Text(p), webtest.Attr(p, "class"))
	}
	fc.mu.Lock()
	fc.st.Up, fc.st.Reason, fc.st.Since = false, "timeout: redis did not answer within cluster.timeout", d.Clock.Now().Add(-5*time.Second)
	fc.mu.Unlock()
	p = webtest.ByID(d.Page("/stats", cookie), "cluster")
	want := "Redis (127.0.0.1:6379) unavailable for 5s: timeout: redis did not answer within cluster.timeout. Answering 503 (on_failure = closed)."
	if p == nil || webtest.Text(p) != want || webtest.Attr(p, "class") != "muted off" {
		t.Fatalf("redis down: %q class %q", webtest.Text(p), webtest.Attr(p, "class"))
	}

	// One master of a Redis Cluster down: Redis in use, its slots not.
	fc.mu.Lock()
	fc.st.Up, fc.st.Reason = true, ""
	fc.st.SlotsDown, fc.st.SlotsSince, fc.st.SlotsReason = 5461, d.Clock.Now().Add(-20*time.Second), "connection: dial tcp 10.0.0.3:6379: connect: connection refused"
	fc.mu.Unlock()
	p = webtest.ByID(d.Page("/stats", cookie), "cluster")
	want = "Limits are shared through Redis (127.0.0.1:6379), mode strict, but 5461 of 16384 hash slots have been unavailable for 20s (connection: dial tcp 10.0.0.3:6379: connect: connection refused): for the peers whose keys they hold, answering 503 (on_failure = closed)."
	if p == nil || webtest.Text(p) != want || webtest.Attr(p, "class") != "muted off" {
		t.Fatalf("slots down: %q class %q", webtest.Text(p), webtest.Attr(p, "class"))
	}
	item := webtest.ByID(d.Page("/", cookie), "health-daemon")
	if item == nil || !strings.Contains(webtest.Text(item), "backend Redis up, 5461 slots down") {
		t.Fatalf("health strip with slots down: %q", webtest.Text(item))
	}
}
