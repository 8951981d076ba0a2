package ui_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestDashboardPeerSearchSinceIndex: above the index threshold the peers
// page says when its rows were chosen from the index (and that newer peers
// may be missing), and an address search finds a peer first seen since.
func TestDashboardPeerSearchSinceIndex(t *testing.T) {
	d, _ := webtest.NewDashServer(t, nil)
	g, _ := d.Lim.GroupID("general")
	decide := func(s string) {
		a := netip.MustParseAddr(s)
		dec := d.Lim.Decide(d.Clock.Now(), peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
		dec.Release()
	}
	for i := range insight.IndexFrom + 100 {
		decide(fmt.Sprintf("11.%d.%d.%d", i>>16, (i>>8)&255, i&255))
	}
	cookie, _ := d.Login()
	note := func(doc *html.Node) string {
		n := webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "peers-index-note" })
		if len(n) == 0 {
			return ""
		}
		return webtest.Text(n[0])
	}
	built := d.Clock.Now().UTC().Format("2006-01-02 15:04:05")
	if s := note(d.Page("/peers?sort=requests", cookie)); !strings.Contains(s, "peers first seen since may be missing") || !strings.Contains(s, built) {
		t.Fatalf("top list's note: %q (index built %s)", s, built)
	}
	d.Clock.Add(20 * time.Second)
	decide("12.0.0.5")
	doc := d.Page("/peers?q=12.0.0.5", cookie)
	if s := note(doc); s != "" {
		t.Errorf("an address search is live, yet noted: %q", s)
	}
	if rows := webtest.Find(doc, func(n *html.Node) bool { return n.Data == "code" && webtest.Text(n) == "12.0.0.5" }); len(rows) != 1 {
		t.Errorf("12.0.0.5, first seen after the index was built, not listed")
	}
	doc = d.Page("/peers?q=12.0.0.0/16", cookie)
	if s := note(doc); !strings.Contains(s, built) || len(webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "no-peers" })) != 1 {
		t.Errorf("a /16 search: note %q, want the index's time and no rows", s)
	}
}
