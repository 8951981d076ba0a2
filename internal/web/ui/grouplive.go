package ui

import (
	"context"
	"net/url"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// groupLive is a group page's traffic now: its rates over the now window
// (this instance's, and the fleet's in cluster mode), its most rejected
// peers across the fleet, and the chart of its last hour.
func (d *Dashboard) groupLive(ctx context.Context, name string) templates.GroupLive {
	v := d.opts.Fleet(ctx, true)
	self := v.Self()
	g := templates.GroupLive{Name: name, Window: d.nowSentence(self.Window), Cluster: v.Cluster,
		HistoryURL: "/stats/history?minutes=60&group=" + url.QueryEscape(name)}
	for _, r := range self.Groups {
		if r.Name == name {
			g.Here = groupNow(name, "", false, r, emptySeries)
		}
	}
	if v.Cluster {
		for _, r := range v.Groups {
			if r.Name == name {
				f := groupNow(name, "", false, r, emptySeries)
				g.Fleet = &f
			}
		}
	}
	for _, p := range v.TopRejected {
		if p.Group == name {
			g.Top = append(g.Top, talkerRow(p, v.Cluster))
		}
	}
	return g
}
