package proxy

// The data plane's part of adaptive concurrency (docs/limiting.md,
// "Adaptive concurrency"): the node's answers timed for the group's
// controller, and the reply of a request the adaptive limit sheds
// (docs/replies.md, "Shedding").

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
)

// doTimed is upstream.do, timed for the group's adaptive concurrency when
// the decision was counted by it: the latency from the request's sending
// to the answer's head (the request's body included), and whether the
// node failed (sampleNode).
func (h *Handler) doTimed(x *exchange, req *fasthttp.Request, resp *fasthttp.Response, hasBody bool) error {
	if !x.d.Adaptive() {
		return h.upstream.do(x, req, resp, hasBody)
	}
	sent := h.now()
	err := h.upstream.do(x, req, resp, hasBody)
	h.sampleNode(x, sent, err, &x.out.Header)
	return err
}

// sampleNode reports one exchange with the node to the decision's group:
// failed when the node answered 5xx or did not answer (a timeout, a
// refused or reset connection, a malformed answer); nothing when the
// client broke it off (its body did not come): that says nothing of the
// node. A client that went away does not end the wait for the node's
// answer (decision 210), so that exchange is sampled as any other.
func (h *Handler) sampleNode(x *exchange, sent time.Time, err error, head *fasthttp.ResponseHeader) {
	if x.bodyErr != nil {
		return
	}
	failed := err != nil || head.StatusCode() >= http.StatusInternalServerError
	now := h.now()
	x.d.Sample(now, now.Sub(sent), failed)
}

// shed writes the reply of a request the adaptive limit shed
// (docs/replies.md, "Shedding"): 503 with Retry-After and Cache-Control:
// no-store, the body chosen by the request's Accept (shedBody). The
// caller has set the rate-limit fields.
func (h *Handler) shed(ctx *fasthttp.RequestCtx, d *limiter.Decision) {
	r := &ctx.Response
	var b [320]byte
	r.Header.SetCanonical(hdrRetryAfter, strconv.AppendInt(b[:0], d.RetryAfter, 10))
	r.Header.SetCanonical(hdrCacheControl, valueNoStore)
	r.SetStatusCode(http.StatusServiceUnavailable)
	ctype, body := shedBody(b[:0], b2s(ctx.Request.Header.Peek("Accept")), h.lim.GroupName(d.Group), d.RetryAfter)
	r.Header.SetContentTypeBytes(ctype)
	r.SetBody(body)
}

// shedStream writes the 503 of a shed HTTP/2 stream, as shed does. The
// caller has set the rate-limit fields.
func (h *Handler) shedStream(w http.ResponseWriter, r *http.Request, d *limiter.Decision) {
	wh := w.Header()
	var b [320]byte
	wh["Retry-After"] = []string{strconv.FormatInt(d.RetryAfter, 10)}
	wh["Cache-Control"] = []string{string(valueNoStore)}
	ctype, body := shedBody(b[:0], r.Header.Get("Accept"), h.lim.GroupName(d.Group), d.RetryAfter)
	wh["Content-Type"] = []string{string(ctype)}
	wh["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// The problem type of a shed request: the temporary reduced capacity of
// the IETF rate-limit fields' draft (docs/replies.md, "Shedding").
const problemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

var (
	valueProblemJSON = []byte("application/problem+json")
	bodyUnavailable  = []byte("Service Unavailable\n")
)

// shedBody returns the Content-Type and the body of a shed request's 503
// for a client whose Accept is accept, appending to b: a problem
// document of type temporary-reduced-capacity when it accepts
// application/problem+json (listed, with a q at least as high as any text
// or wildcard type), else the JSON of the 429s when it prefers JSON, else
// http.Error's text. group names the request's group.
func shedBody(b []byte, accept, group string, retryAfter int64) (ctype, body []byte) {
	switch {
	case acceptsProblem(accept):
		b = append(b, `{"type":"`+problemReducedCapacity+`","title":"Temporary reduced capacity","status":503,"detail":"the node is at the concurrency its latency allows for this group; retry later","group":`...)
		b = appendJSONString(b, group)
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, retryAfter, 10)
		return valueProblemJSON, append(b, "}\n"...)
	case prefersJSON(accept):
		b = append(b, `{"error":"service_unavailable","group":`...)
		b = appendJSONString(b, group)
		b = append(b, `,"reason":"adaptive","retry_after":`...)
		b = strconv.AppendInt(b, retryAfter, 10)
		return valueJSON, append(b, "}\n"...)
	}
	return valueText, bodyUnavailable
}

// acceptsProblem reports whether an Accept header lists
// application/problem+json with a q above 0 and at least as high as any
// text or wildcard type.
func acceptsProblem(accept string) bool {
	if !strings.Contains(accept, "problem+json") {
		return false
	}
	qProblem, qText := acceptQ(accept, func(mt string) bool { return mt == "application/problem+json" })
	return qProblem > 0 && qProblem >= qText
}
