package proxy

import "github.com/limiterd/limiterd/limiter"

// The data plane's reports besides its counters, kept in this file so
// that a handler needs one call per event:
//
//   - noteUpstreamError when the upstream fails (502/504), sampled warn;
//   - noteExchange once a public-listener exchange has ended:
//     limiterd_proxy_request_duration_seconds{group,code}.
//
// The refusals reach the RejectLog as the limiter's observer
// (limiter.WithObserver), whichever handler asked. A nil Options.RejectLog
// logs no upstream error; the histograms always count.

// noteUpstreamError reports a failed upstream exchange: a timeout (504)
// or an unreachable or broken node (502).
func (h *Handler) noteUpstreamError(timeout bool, err error) {
	h.opts.RejectLog.UpstreamError(h.now(), timeout, err)
}

// noteExchange records the duration of a public-listener exchange once it
// has ended (exchange.finish): from the handler's start to the end of the
// answer's body. An exchange that was never classified (refused as
// malformed before) has no status and is not recorded.
func (h *Handler) noteExchange(x *exchange) {
	if x.status == 0 {
		return
	}
	if !x.d.Allowed && (x.d.Reason == limiter.ReasonAdaptive || x.d.Reason == limiter.ReasonUnavailable) {
		// A 503 of limiterd's own: the node was never asked.
		h.Exchanges.ObserveOwn(x.group, x.status, h.since(x.start))
		return
	}
	h.Exchanges.Observe(x.group, x.status, h.since(x.start))
}
