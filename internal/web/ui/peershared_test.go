package ui_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// sharedCluster shows a cluster.Backend on the dashboard as the daemon
// does: its status, and the peers' shared state.
type sharedCluster struct{ b *cluster.Backend }

func (c sharedCluster) ClusterState() templates.Cluster {
	return templates.Cluster{Mode: "strict", OnFailure: "closed", Up: true}
}

func (c sharedCluster) SharedEntry(ctx context.Context, k peer.Key, group string, s *limiter.GroupSettings) (limiter.EntryView, bool, error) {
	return c.b.SharedEntry(ctx, k, group, s)
}

// TestPeerPageSharedState: two instances share one Redis in strict mode;
// a peer limited through instance A shows on instance B's peer page as
// limited, with the tokens and window A's admissions consumed, marked as
// the fleet's shared state, beside the fleet's figures; a peer nobody saw
// shows as not tracked, a corrupt value as corrupt; a token bucket group's
// state reads in its own terms, and no notice says a state is not shown.
func TestPeerPageSharedState(t *testing.T) {
	srv := redistest.Start(t)
	general := limiter.GroupSettings{
		SlidingWindowLimit: 2, SlidingWindowDuration: 60000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 3, LeakyTickInterval: 600000, LeakyTickReduction: 1, ConcurrencyLimit: 100,
	}
	other := general
	other.Algorithm, other.Limit, other.Period, other.Burst = algo.TokenBucket, 5, 1000, 5
	cfg := limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{"general": general, "other": other}}
	openInstance := func() (*cluster.Backend, *limiter.Limiter) {
		b, err := cluster.Open(cluster.Options{Addrs: []string{srv.Addr()}, Mode: cluster.Strict, OnFailure: cluster.FailClosed,
			Timeout: 2 * time.Second, Lease: 10 * time.Second, SyncInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Fallback: memory.New()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		lim, err := limiter.New(b, time.Now(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b, lim
	}
	_, limA := openInstance()
	bB, limB := openInstance()
	g, _ := limA.GroupID("general")
	a := netip.MustParseAddr("198.51.100.7")
	for i := range 6 {
		d := limA.Decide(time.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		if d.Allowed != (i < 5) {
			t.Fatalf("decision %d on A: %+v", i, d)
		}
		if d.Allowed {
			d.Release()
		}
	}
	// The token bucket's 5 taken through A.
	gO, _ := limA.GroupID("other")
	for range 5 {
		d := limA.Decide(time.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, gO)
		if !d.Allowed {
			t.Fatalf("token bucket on A: %+v", d)
		}
		d.Release()
	}

	c := limitertest.NewClock(time.Now())
	lv, err := live.New(context.Background(), limB, webtest.OpenStore(t), cfg, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	s := webtest.MustNewServer(t, limB, lv, web.Options{Token: webtest.Token, Now: c.Now, Cluster: sharedCluster{bB}, Fleet: fleet.NewRedisBoard(rdb), Instance: "gw-b"})
	dash := &webtest.Dash{T: t, H: s.AdminHandler(), Lim: limB, Live: lv, Clock: c}
	cookie, _ := dash.Login()

	row := func(doc *html.Node, group string) *html.Node {
		t.Helper()
		tab := webtest.ByID(doc, "peer-shared-table")
		if tab == nil {
			t.Fatal("no shared state table")
		}
		for _, tr := range webtest.Find(tab, webtest.ByTag("tr")) {
			if webtest.Attr(tr, "data-group") == group {
				return tr
			}
		}
		t.Fatalf("no shared state row of %s", group)
		return nil
	}
	col := func(tr *html.Node, name string) string {
		for _, n := range webtest.Find(tr, func(n *html.Node) bool { return webtest.Attr(n, "data-col") == name }) {
			return strings.Join(strings.Fields(webtest.Text(n)), " ")
		}
		return ""
	}

	doc := dash.Page("/peer?key=198.51.100.7", cookie)
	tr := row(doc, "general")
	if st := webtest.Attr(tr, "data-status"); st != "limited" {
		t.Fatalf("the peer A limited shows on B as %q", st)
	}
	if tok, win := col(tr, "tokens"), col(tr, "window"); !strings.Contains(tok, "3 / 3") || !strings.Contains(win, "2 / 2") {
		t.Fatalf("tokens %q, window %q: want 3 / 3 and 2 / 2", tok, win)
	}
	if in := col(tr, "inflight"); in != "0" {
		t.Fatalf("in flight %q, want 0", in)
	}
	sec := webtest.ByID(doc, "peer-shared")
	if txt := webtest.Text(sec); !strings.Contains(txt, "fleet's shared state") {
		t.Fatalf("the section does not say whose state it is: %q", txt)
	}
	if webtest.ByID(doc, "peer-fleet") == nil {
		t.Fatal("the fleet's figures are gone")
	}
	if webtest.ByID(doc, "peer-state") != nil || webtest.ByID(doc, "peer-shared-untracked") != nil {
		t.Fatal("an empty table of this instance's own state, or a not-tracked line")
	}
	// (A bucket of 5 refills one every 200 ms: at most a couple back by
	// the time B reads it.)
	if tr := row(doc, "other"); (webtest.Attr(tr, "data-status") != "limited" && webtest.Attr(tr, "data-status") != "not limited") || !strings.Contains(webtest.Text(tr), "token_bucket") {
		t.Fatalf("token_bucket group: %q %q", webtest.Attr(tr, "data-status"), webtest.Text(tr))
	}
	if n := webtest.ByID(doc, "peer-untracked"); n != nil {
		t.Fatalf("a notice that some state is not shown: %q", webtest.Text(n))
	}

	doc = dash.Page("/peer?key=198.51.100.8", cookie)
	if n := webtest.ByID(doc, "peer-shared-untracked"); n == nil || strings.Join(strings.Fields(webtest.Text(n)), " ") != "Not tracked in any group: general, other." {
		t.Fatalf("untouched peer: %q", webtest.Text(n))
	}
	if tab := webtest.ByID(doc, "peer-shared-table"); tab != nil {
		t.Fatalf("untouched peer has a shared state table: %q", webtest.Text(tab))
	}
	if n := webtest.ByID(doc, "peer-untracked"); n != nil {
		t.Fatalf("untouched peer's notice: %q", webtest.Text(n))
	}

	bad := "ld:{198.51.100.9|general}:pt" // the strict tokens key
	// Packed: 3 fields, then the expiry (0) and the fields (generation 0,
	// tok -3, tk 1) as little-endian doubles.
	raw := []byte{3}
	for _, f := range []float64{0, 0, -3, 1} {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(f))
	}
	if err := rdb.Set(context.Background(), bad, raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	doc = dash.Page("/peer?key=198.51.100.9", cookie)
	if tr := row(doc, "general"); webtest.Attr(tr, "data-status") != "corrupt" || !strings.Contains(col(tr, "status"), `tok holds -3`) {
		t.Fatalf("corrupt value: %q %q", webtest.Attr(tr, "data-status"), col(tr, "status"))
	}
}
