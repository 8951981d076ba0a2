package proxy

import (
	"time"

	"github.com/limiterd/limiterd/insight"
	"github.com/limiterd/limiterd/limiter"
)

// The data plane's reports besides its counters, kept in this file so
// that a handler (net/http today, fasthttp tomorrow) needs one call per
// event:
//
//   - noteDecision after every Decide (the proxy, the check API,
//     auth_request): refusals go to the RejectLog ([log].rejections);
//   - noteDenied for a denied peer on an exempt path (no decision);
//   - noteUpstreamError when the upstream fails (502/504), sampled warn;
//   - noteExchange once a public-listener exchange is answered:
//     limiterd_proxy_request_duration_seconds{group,code}.
//
// A nil Options.RejectLog logs nothing; the histograms always count.

// exchange is one public-listener request being timed.
type exchange struct {
	start  time.Time
	group  limiter.GroupID // insight.ExemptPathGroup for an exempt path
	status int             // the status answered; 0: none (the client went away)
}

// noteDecision reports a decision's refusal to the RejectLog.
func (h *Handler) noteDecision(now time.Time, peer limiter.PeerKey, d *limiter.Decision) {
	if d.Allowed || h.opts.RejectLog == nil {
		return
	}
	switch d.Reason {
	case limiter.ReasonDenied:
		h.opts.RejectLog.Denied(now, peer, d.Group)
	case limiter.ReasonConcurrency, limiter.ReasonRateLimit:
		h.opts.RejectLog.Rejected(now, peer, d.Group, d.Reason)
	}
}

// noteDenied reports a denied peer's request on an exempt path.
func (h *Handler) noteDenied(now time.Time, peer limiter.PeerKey) {
	h.opts.RejectLog.Denied(now, peer, insight.ExemptPathGroup)
}

// noteUpstreamError reports a failed upstream exchange: a timeout (504)
// or an unreachable node (502).
func (h *Handler) noteUpstreamError(timeout bool, err error) {
	h.opts.RejectLog.UpstreamError(h.now(), timeout, err)
}

// noteExchange records an answered exchange's duration (deferred by the
// public listener's handler).
func (h *Handler) noteExchange(ex *exchange) {
	if ex.status == 0 {
		return
	}
	h.Exchanges.Observe(ex.group, ex.status, h.now().Sub(ex.start))
}
