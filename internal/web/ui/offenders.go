package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter/peer"
)

// offendersShown is how many the offenders page lists.
const offendersShown = 200

func offenseRow(o live.Offense) templates.OffenseRow {
	return templates.OffenseRow{Peer: o.Peer.String(), Group: o.Group, Rejections: o.Rejections, First: stamp(o.First), Last: stamp(o.Last)}
}

// withPending adds to the saved offenses those collected since the last
// save (of only, when not nil), so that the pages are current: the
// latest first. It returns how many (peer, group)s were new.
func (d *Dashboard) withPending(saved []live.Offense, only *peer.Key) ([]live.Offense, int) {
	type key struct {
		peer  peer.Key
		group string
	}
	at := map[key]int{}
	for i, o := range saved {
		at[key{o.Peer, o.Group}] = i
	}
	added := 0
	for _, p := range d.activity.PendingOffenses(only) {
		k := key{p.Peer, p.Group}
		i, ok := at[k]
		if !ok {
			at[k] = len(saved)
			saved = append(saved, live.Offense{Peer: p.Peer, Group: p.Group, Rejections: p.Rejections, First: p.First, Last: p.Last})
			added++
			continue
		}
		o := &saved[i]
		o.Rejections += p.Rejections
		if p.First.Before(o.First) {
			o.First = p.First
		}
		if p.Last.After(o.Last) {
			o.Last = p.Last
		}
	}
	slices.SortFunc(saved, func(a, b live.Offense) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return saved, added
}

func (d *Dashboard) handleOffenders(w http.ResponseWriter, r *http.Request) {
	data := templates.Offenders{}
	if st := d.opts.Offenses; st != nil {
		data.Kept = true
		offs, total, err := st.RecentOffenses(r.Context(), d.now(), offendersShown)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		offs, added := d.withPending(offs, nil)
		data.Total = total + added
		for _, o := range offs[:min(len(offs), offendersShown)] {
			data.Rows = append(data.Rows, offenseRow(o))
		}
	}
	render(w, r, http.StatusOK, templates.OffendersPage(d.page(r, "Offenders, last 24 hours", "/offenders"), data))
}
