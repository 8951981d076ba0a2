package ui

import (
	"net/http"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// outboundKeys is how many (peer, type) keys the outbound page shows.
const outboundKeys = 100

func (d *Dashboard) outbound() templates.Outbound {
	th := d.opts.Throttle
	if th == nil {
		return templates.Outbound{}
	}
	st := th.Stats()
	o := templates.Outbound{Configured: true, Enabled: th.Enabled(), Limit: outboundKeys, Stats: templates.OutboundCounts{
		Keys: st.Keys, Timestamps: st.Timestamps, Waiters: st.Waiters,
		Admitted: st.Admitted, Refused: st.Refused, Delayed: st.Delayed, Exempt: st.Exempt, Off: st.Off,
	}}
	o.Mode = th.Mode().String()
	ad := th.AdaptiveStats()
	o.Adaptive = templates.OutboundAdaptive{Peers: ad.Peers, Quotas: ad.Quotas, Waiting: ad.Waiting,
		Observed: ad.Observed, Learned: ad.Learned, Admitted: ad.Admitted, Queued: ad.Queued}
	for _, n := range ad.Refused {
		o.Adaptive.Refused += n
	}
	for _, v := range th.AdaptiveViews(d.now(), outboundKeys) {
		row := templates.OutboundQuota{Peer: v.Peer, Group: v.Group, Known: v.Known, Incompatible: v.Incompatible,
			Total: v.Total, Remaining: v.Remaining, ResetAmount: v.ResetAmount, Waiting: v.Waiting}
		if v.RefillIn > 0 {
			row.RefillIn = v.RefillIn.String()
		}
		o.Adaptive.Rows = append(o.Adaptive.Rows, row)
	}
	for _, k := range th.Keys(d.now(), outboundKeys) {
		v := templates.OutboundKey{Peer: k.Peer, Type: k.Type, Count: k.Count, Capacity: k.Capacity, Waiters: k.Waiters, EarliestIn: "now"}
		if k.EarliestIn > 0 {
			v.EarliestIn = k.EarliestIn.String()
		}
		o.Keys = append(o.Keys, v)
	}
	return o
}

func (d *Dashboard) handleOutbound(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OutboundPage(d.page(r, "Outbound throttle", "/outbound"), d.outbound()))
}

func (d *Dashboard) handleOutboundStats(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OutboundStats(d.outbound()))
}
