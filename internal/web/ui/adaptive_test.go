package ui_test

import (
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
)

// A group's adaptive concurrency on the overview and on its page: the
// limit now, in flight, the latency it follows and the unloaded one, the
// shed rate and share, and the sparklines of their last minutes; a group
// without it has no row, and the overview no card when none has it.
func TestDashboardAdaptive(t *testing.T) {
	d, s := webtest.NewDashServer(t, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction = 1000, 1000
		g.Adaptive = limitertest.Adaptive{Min: 2, Max: 2, ProbeSamples: 1}.Settings()
		c.Groups["general"] = g
	})
	cookie, _ := d.Login()
	gid, _ := d.Lim.GroupID("general")
	s.History().Sample(d.Clock.Now(), d.Lim.Stats()) // the baseline
	p := limitertest.Peer("203.0.113.7")
	first := d.Lim.Decide(d.Clock.Now(), p, gid)
	first.Sample(d.Clock.Now(), 8448*time.Microsecond, false) // measured: the limit is 2
	held := []limiter.Decision{first}
	for range 6 {
		if dd := d.Lim.Decide(d.Clock.Now(), p, gid); dd.Allowed {
			held = append(held, dd)
		}
	}
	d.Clock.Add(10 * time.Second)
	s.History().Sample(d.Clock.Now(), d.Lim.Stats())

	row := func(doc *html.Node) map[string]string {
		rows := webtest.Find(doc, func(n *html.Node) bool {
			return n.Data == "tr" && webtest.Attr(n, "data-group") == "general" && webtest.Attr(n.Parent.Parent, "id") == "adaptive-table"
		})
		if len(rows) != 1 {
			t.Fatalf("%d adaptive rows of general", len(rows))
		}
		out := map[string]string{}
		for _, td := range webtest.Find(rows[0], func(n *html.Node) bool { return webtest.Attr(n, "data-col") != "" }) {
			out[webtest.Attr(td, "data-col")] = webtest.Text(td)
		}
		if svg := webtest.Find(rows[0], webtest.ByTag("svg")); len(svg) != 3 {
			t.Fatalf("%d sparklines, want 3", len(svg))
		}
		return out
	}
	for _, path := range []string{"/", "/groups/general"} {
		got := row(d.Page(path, cookie))
		if got["limit"] != "2" || got["inflight"] != "2" || got["latency"] != "—" || got["unloaded"] != "8.4 ms" || got["shed"] != "0.45/s 71 %" {
			t.Errorf("%s: %v", path, got)
		}
	}
	if n := len(webtest.Find(d.Page("/groups/chunk", cookie), func(n *html.Node) bool { return webtest.Attr(n, "id") == "adaptive" })); n != 0 {
		t.Error("chunk's page shows an adaptive card")
	}
	for _, dd := range held {
		dd.Release()
	}
	plain := webtest.NewDash(t)
	c, _ := plain.Login()
	if n := len(webtest.Find(plain.Page("/", c), func(n *html.Node) bool { return webtest.Attr(n, "id") == "adaptive" })); n != 0 {
		t.Error("an overview without adaptive groups shows the card")
	}
}
