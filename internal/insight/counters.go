package insight

import "sync/atomic"

// ProxyCounters are limiterd's own per-process counters, bumped by the
// proxy with one atomic add each and read by the collector at scrape time.
// The zero value is ready; it is safe for concurrent use. Denied requests
// are not here: the limiter counts them per group (GroupStats.Denied).
type ProxyCounters struct {
	// UpstreamErrors counts requests whose upstream could not be reached
	// or failed mid-response (refused, reset, DNS…), timeouts excepted:
	// limiterd_upstream_errors_total{kind="unreachable"}.
	UpstreamErrors atomic.Uint64
	// UpstreamTimeouts counts requests whose upstream timed out:
	// limiterd_upstream_errors_total{kind="timeout"}.
	UpstreamTimeouts atomic.Uint64
	// ExemptPath counts requests passed on unlimited because their path
	// is in exempt_paths: limiterd_exempt_path_requests_total.
	ExemptPath atomic.Uint64
	// InternalErrors counts requests answered 500 by limiterd itself:
	// limiterd_internal_errors_total.
	InternalErrors atomic.Uint64
	// BadRequests counts requests the public listener refused as
	// malformed or unsafe to proxy (400, 405, 408, 431):
	// limiterd_bad_requests_total.
	BadRequests atomic.Uint64
	// TooLarge counts requests refused for a body over
	// server.max_request_body (413): limiterd_request_body_too_large_total.
	TooLarge atomic.Uint64
	// ConnsRefusedPerIP and ConnsRefusedTotal count connections the public
	// listener closed at once for server.max_conns_per_ip and
	// server.max_conns: limiterd_connections_refused_total{cap}.
	ConnsRefusedPerIP atomic.Uint64
	ConnsRefusedTotal atomic.Uint64
	// CheckLeasesCut counts /api/v1/check leases ended before their time
	// because peers.max_tracked of them were held:
	// limiterd_check_leases_cut_total.
	CheckLeasesCut atomic.Uint64

	// The buffers of the node's answers (docs/config.md, "Answers
	// buffered"). AnswerMemory and AnswerDisk are the bytes they hold now
	// (memory chunks, temporary files):
	// limiterd_answer_buffer_bytes{where}. AnswerSpills counts the answers
	// that went on to a temporary file, AnswerWaits those that waited for
	// their client past every bound, holding the node's connection:
	// limiterd_answers_spilled_total, limiterd_answers_waited_total.
	AnswerMemory, AnswerDisk  atomic.Int64
	AnswerSpills, AnswerWaits atomic.Uint64
	// UpstreamWaits counts requests that waited for a connection to the
	// node, all upstream_max_conns being busy; UpstreamWaitsOverShare those
	// whose peer held its share of the pool then, and so came after the
	// other peers' (docs/config.md, "The node's connections"):
	// limiterd_upstream_waits_total{share}.
	UpstreamWaits, UpstreamWaitsOverShare atomic.Uint64

	// The public listener's HTTP/2 (docs/metrics.md, "HTTP/2").
	// HTTP2Conns counts the connections served as HTTP/2, HTTP2Open those
	// open now: limiterd_http2_connections_total, limiterd_http2_connections.
	HTTP2Conns atomic.Uint64
	HTTP2Open  atomic.Int64
	// HTTP2Streams counts the streams served (each a request):
	// limiterd_http2_streams_total.
	HTTP2Streams atomic.Uint64
	// HTTP2StreamsRefused counts streams answered 429 because their client
	// address had server.max_conns_per_ip connections and streams open:
	// limiterd_connections_refused_total{cap="per_ip_streams"}.
	HTTP2StreamsRefused atomic.Uint64
	// HTTP2Calm counts the connections closed with GOAWAY
	// ENHANCE_YOUR_CALM by limiterd's bounds (stream rates, control
	// frames, CONTINUATION frames, a header block left open), HTTP2Errors
	// the protocol errors the HTTP/2 server found (each a stream or
	// connection error): limiterd_http2_errors_total{by}.
	HTTP2Calm   atomic.Uint64
	HTTP2Errors atomic.Uint64
}
