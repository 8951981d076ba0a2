package insight_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/limiter/peer"
)

// TestPeerIndexFindsPeersSinceRebuild: above IndexFrom entries, peers
// first seen after the index's rebuild are found by a search of at most
// DirectKeys keys (an address, a /24, an IPv6 /56 keyed by /64), live; a
// wider search and the top lists say they come from the index and as of
// when, and find the new peers once it is rebuilt.
func TestPeerIndexFindsPeersSinceRebuild(t *testing.T) {
	lim, t0 := limitertest.Filled(t, insight.IndexFrom+5000)
	now := t0
	x := insight.NewPeerIndex(lim, func() time.Time { return now })
	x.Refresh() // the rebuild, at t0
	rebuilt := t0
	now = t0.Add(20 * time.Second)
	g, _ := lim.GroupID("general")
	for _, s := range []string{"12.0.0.1", "12.0.0.2", "12.0.0.3", "2001:db8:77:1::5"} {
		a := netip.MustParseAddr(s)
		for range 9 { // more requests than any older peer: first by requests
			d := lim.Decide(now, peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}, g)
			d.Release()
		}
	}
	search := func(prefix string, group string) insight.PeerPage {
		return x.Query(insight.PeerQuery{Sort: "requests", Limit: 50, Group: group, Prefix: netip.MustParsePrefix(prefix)})
	}
	for _, tc := range []struct {
		prefix, group string
		total         int
	}{
		{"12.0.0.2/32", "", 1},
		{"12.0.0.2/32", "general", 1},
		{"12.0.0.0/24", "", 3},
		{"12.0.0.0/24", "chunk", 0},
		{"2001:db8:77:1::5/128", "", 1},
		{"2001:db8:77::/56", "", 1},
	} {
		pg := search(tc.prefix, tc.group)
		if pg.Total != tc.total || len(pg.Rows) != tc.total || pg.Indexed || !pg.AsOf.Equal(now) {
			t.Errorf("%s in %q: total %d, %d rows, indexed %v, as of %v; want %d, live at %v", tc.prefix, tc.group, pg.Total, len(pg.Rows), pg.Indexed, pg.AsOf, tc.total, now)
		}
		for _, v := range pg.Rows {
			if v.Requests != 9 {
				t.Errorf("%s: %+v", tc.prefix, v)
			}
		}
	}
	// An old /24 is still found whole, directly.
	if pg := search("11.0.1.0/24", ""); pg.Total != 256 || pg.Indexed {
		t.Errorf("old /24: total %d indexed %v", pg.Total, pg.Indexed)
	}
	// Wider than DirectKeys keys: from the index, which says so.
	for _, prefix := range []string{"12.0.0.0/16", "2001:db8:77::/48"} {
		if pg := search(prefix, ""); pg.Total != 0 || !pg.Indexed || !pg.AsOf.Equal(rebuilt) {
			t.Errorf("%s before the rebuild: total %d indexed %v as of %v; want 0, indexed, as of %v", prefix, pg.Total, pg.Indexed, pg.AsOf, rebuilt)
		}
	}
	top := x.Query(insight.PeerQuery{Sort: "requests", Limit: 10})
	if !top.Indexed || !top.AsOf.Equal(rebuilt) || top.Rows[0].Requests == 9 {
		t.Errorf("top list before the rebuild: indexed %v as of %v first %+v", top.Indexed, top.AsOf, top.Rows[0])
	}
	x.Refresh()
	if pg := search("12.0.0.0/16", ""); pg.Total != 3 || !pg.Indexed || !pg.AsOf.Equal(now) {
		t.Errorf("/16 after the rebuild: total %d indexed %v as of %v", pg.Total, pg.Indexed, pg.AsOf)
	}
	if top := x.Query(insight.PeerQuery{Sort: "requests", Limit: 10}); top.Rows[0].Requests != 9 || !top.AsOf.Equal(now) {
		t.Errorf("top list after the rebuild: first %+v as of %v", top.Rows[0], top.AsOf)
	}
}
