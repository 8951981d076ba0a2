package web

import (
	"net/http"

	"github.com/limiterd/limiterd/templates"
)

// outboundKeys is how many (peer, type) keys the outbound page shows.
const outboundKeys = 100

func (d *dashboard) outbound() templates.Outbound {
	th := d.s.opts.Throttle
	if th == nil {
		return templates.Outbound{}
	}
	o := templates.Outbound{Configured: true, Enabled: th.Enabled(), Stats: th.Stats(), Limit: outboundKeys}
	for _, k := range th.Keys(d.s.now(), outboundKeys) {
		v := templates.OutboundKey{Peer: k.Peer, Type: k.Type, Count: k.Count, Capacity: k.Capacity, Waiters: k.Waiters, EarliestIn: "now"}
		if k.EarliestIn > 0 {
			v.EarliestIn = k.EarliestIn.String()
		}
		o.Keys = append(o.Keys, v)
	}
	return o
}

func (d *dashboard) handleOutbound(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OutboundPage(d.page(r, "Outbound throttle", "/outbound"), d.outbound()))
}

func (d *dashboard) handleOutboundStats(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OutboundStats(d.outbound()))
}
