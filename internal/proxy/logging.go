package proxy

import (
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The data plane's reports besides its counters, kept in this file so
// that a handler (the public listener's, the check API's, auth_request's)
// needs one call per event:
//
//   - noteDecision after every Decide (the proxy, the check API,
//     auth_request): refusals go to the RejectLog ([log].rejections);
//   - noteDenied for a denied peer on an exempt path (no decision);
//   - noteUpstreamError when the upstream fails (502/504), sampled warn;
//   - noteExchange once a public-listener exchange has ended:
//     limiterd_proxy_request_duration_seconds{group,code}.
//
// A nil Options.RejectLog logs nothing; the histograms always count.

// noteDecision reports a decision's refusal to the RejectLog.
func (h *Handler) noteDecision(now time.Time, peer peer.Key, d *limiter.Decision) {
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
func (h *Handler) noteDenied(now time.Time, peer peer.Key) {
	h.opts.RejectLog.Denied(now, peer, insight.ExemptPathGroup)
}

// noteUpstreamError reports a failed upstream exchange: a timeout (504)
// or an unreachable or broken node (502).
func (h *Handler) noteUpstreamError(timeout bool, err error) {
	h.opts.RejectLog.UpstreamError(h.now(), timeout, err)
}

// noteExchange records the duration of a public-listener exchange once it
// has ended (exchange.finish): from the handler's start to the end of the
// answer's body. An exchange that was never classified (refused as
// malformed before) or whose client went away before any answer has no
// status and is not recorded.
func (h *Handler) noteExchange(x *exchange) {
	if x.status == 0 {
		return
	}
	h.Exchanges.Observe(x.group, x.status, h.since(x.start))
}
