// Package metrics is limiterd's Prometheus collectors: the Arweave
// limiter's metrics (docs/metrics.md) and limiterd's own (NewCollector), the
// public listener's exchange durations (NewExchangeCollector) and the
// outbound throttle's (ThrottleMetrics). Each reads its source at scrape
// time: nothing is counted through Prometheus on the request path.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
)

// StatsSource is what the collector reads at scrape time (the
// *limiter.Limiter satisfies it).
type StatsSource interface {
	Stats() map[string]limiter.GroupStats
	Tracked() int
	GroupID(name string) (limiter.GroupID, bool)
	Settings(g limiter.GroupID) (limiter.GroupSettings, bool)
	Adaptive(g limiter.GroupID) (limiter.AdaptiveView, bool)
}

// The label names and values of the metrics.
const (
	labelGroup        = "limiter_id"
	labelReason       = "reason"
	labelLimitingType = "limiting_type"
	labelVia          = "via"
	labelKind         = "kind"
	labelAlgorithm    = "algorithm"

	typeConcurrency = "concurrency"
	typeTokens      = "leaky_bucket_tokens"
	typeWindow      = "sliding_window_timestamps"
)

// metricsCollector is the prometheus.Collector of NewCollector.
type metricsCollector struct {
	src   StatsSource
	lat   *insight.Latencies
	pc    *insight.ProxyCounters
	extra []func(ch chan<- prometheus.Metric)

	requests, rejected, reduce                          *prometheus.Desc
	leakyTicks, tickReductionsPeer, tickTokenReductions *prometheus.Desc
	tickDeletePeer, cleanupDeletePeer                   *prometheus.Desc
	responseTime, peers, trackedItems                   *prometheus.Desc

	wouldReject, denied, admitted, evictions, tracked *prometheus.Desc
	upstreamErrors, internalErrors, exemptPath        *prometheus.Desc
	checkLeasesCut                                    *prometheus.Desc
	answerBytes, answersSpilled, answersWaited        *prometheus.Desc
	upstreamWaits                                     *prometheus.Desc
	badRequests, tooLarge, connsRefused               *prometheus.Desc
	h2Open, h2Conns, h2Streams, h2Errors              *prometheus.Desc

	algorithm, groupEntries, logTimestamps, stateDropped *prometheus.Desc

	adaptiveLimit, adaptiveLatency, adaptiveUnloaded, adaptiveInflight, adaptiveProbing *prometheus.Desc
}

// NewCollector returns a prometheus.Collector that reads src, lat and pc
// at scrape time: the Arweave metrics (docs/metrics.md), labelled limiter_id with
// the group name, and limiterd's own, prefixed limiterd_. Nothing is
// counted through Prometheus on the request path. lat and pc may be nil;
// their metrics are then left out. Each extra func is called on every
// scrape to send metrics of the daemon's (snapshot duration and the like);
// it is also called once by Describe, at registration, to learn their
// descriptors, so it must send the same set of descriptors every time and
// be safe to call before the daemon runs. The collector is safe for
// concurrent use. Its label values are group names and fixed words, never
// a peer address.
func NewCollector(src StatsSource, lat *insight.Latencies, pc *insight.ProxyCounters, extra ...func(ch chan<- prometheus.Metric)) prometheus.Collector {
	group := []string{labelGroup}
	return &metricsCollector{
		src: src, lat: lat, pc: pc, extra: extra,

		requests: prometheus.NewDesc("ar_limiter_requests_total",
			"The number of requests the limiter has processed.", group, nil),
		rejected: prometheus.NewDesc("ar_limiter_rejected_total",
			"The number of requests rejected by the limiter (429), by reason: concurrency or rate_limit; and (503) adaptive, shed by the group's adaptive concurrency limit.",
			[]string{labelGroup, labelReason}, nil),
		reduce: prometheus.NewDesc("ar_limiter_reduce_requests_total",
			"The number of manual reduction requests (one leaky-bucket token given back to a peer).", group, nil),
		leakyTicks: prometheus.NewDesc("ar_limiter_leaky_ticks",
			"The number of leaky bucket ticks the limiter has processed.", group, nil),
		tickReductionsPeer: prometheus.NewDesc("ar_limiter_leaky_tick_reductions_peer",
			"The number of leaky bucket tick reductions performed for a peer holding tokens.", group, nil),
		tickTokenReductions: prometheus.NewDesc("ar_limiter_leaky_tick_token_reductions_total",
			"The number of consumed leaky bucket tokens given back by ticks, all peers together.", group, nil),
		tickDeletePeer: prometheus.NewDesc("ar_limiter_leaky_tick_delete_peer_total",
			"The number of times a peer was dropped from the leaky bucket token register.", group, nil),
		cleanupDeletePeer: prometheus.NewDesc("ar_limiter_cleanup_tick_expired_sliding_peers_deleted_total",
			"The number of times a peer was dropped from the sliding window timestamp register by a cleanup tick.", group, nil),
		responseTime: prometheus.NewDesc("ar_limiter_response_time_microseconds",
			"Time the limiter took to decide on a request, in microseconds.", group, nil),
		peers: prometheus.NewDesc("ar_limiter_peers",
			"The number of peers the limiter tracks now, by limiting type: with requests in flight (concurrency), holding leaky bucket tokens, holding sliding window timestamps.",
			[]string{labelGroup, labelLimitingType}, nil),
		trackedItems: prometheus.NewDesc("ar_limiter_tracked_items_total",
			"The number of items the limiter tracks now, by limiting type: requests in flight (concurrency), leaky bucket tokens, sliding window timestamps.",
			[]string{labelGroup, labelLimitingType}, nil),

		wouldReject: prometheus.NewDesc("limiterd_would_reject_total",
			"Requests a dry_run group let through that enforcement would have rejected.", group, nil),
		denied: prometheus.NewDesc("limiterd_denied_total",
			"Requests refused (403) because their peer is on the deny list.", group, nil),
		admitted: prometheus.NewDesc("limiterd_admitted_total",
			"Requests admitted, by how: within the sliding window, with a leaky bucket token, by the group's other algorithm, or with no limiting applied (exempt peer, mode off, limiter switched off).",
			[]string{labelGroup, labelVia}, nil),
		evictions: prometheus.NewDesc("limiterd_evictions_total",
			"(peer, group) entries evicted because max_tracked was reached.", nil, nil),
		tracked: prometheus.NewDesc("limiterd_tracked_entries",
			"(peer, group) entries the limiter tracks now.", nil, nil),
		upstreamErrors: prometheus.NewDesc("limiterd_upstream_errors_total",
			"Proxied requests that failed upstream, by kind: unreachable or timeout.", []string{labelKind}, nil),
		internalErrors: prometheus.NewDesc("limiterd_internal_errors_total",
			"Requests limiterd answered with 503 because of its own error (a panic in its request path).", nil, nil),
		exemptPath: prometheus.NewDesc("limiterd_exempt_path_requests_total",
			"Requests passed on without limiting because their path is in exempt_paths.", nil, nil),
		checkLeasesCut: prometheus.NewDesc("limiterd_check_leases_cut_total",
			"Leases of /api/v1/check admissions ended before their time because peers.max_tracked of them were held.", nil, nil),
		answerBytes: prometheus.NewDesc("limiterd_answer_buffer_bytes",
			"Bytes of the node's answers held for their clients now, by where: memory or disk (temporary files).",
			[]string{"where"}, nil),
		answersSpilled: prometheus.NewDesc("limiterd_answers_spilled_total",
			"Answers of the node held past server.answer_memory (or answer_memory_total) in a temporary file.", nil, nil),
		answersWaited: prometheus.NewDesc("limiterd_answers_waited_total",
			"Answers of the node that waited for their client past every buffer bound, holding the node's connection.", nil, nil),
		upstreamWaits: prometheus.NewDesc("limiterd_upstream_waits_total",
			"Requests that waited for a connection to the node, all server.upstream_max_conns being busy, by share: over (their peer held its fair share of the pool then, and came after the others) or within.",
			[]string{"share"}, nil),
		badRequests: prometheus.NewDesc("limiterd_bad_requests_total",
			"Requests the public listener refused as malformed or unsafe to proxy (400, 405, 408, 431).", nil, nil),
		tooLarge: prometheus.NewDesc("limiterd_request_body_too_large_total",
			"Requests refused with 413: a body over server.max_request_body.", nil, nil),
		connsRefused: prometheus.NewDesc("limiterd_connections_refused_total",
			"Client connections closed at once by a cap: per_ip (server.max_conns_per_ip) or total (server.max_conns).",
			[]string{"cap"}, nil),
		h2Open: prometheus.NewDesc("limiterd_http2_connections",
			"Public-listener connections served as HTTP/2 open now.", nil, nil),
		h2Conns: prometheus.NewDesc("limiterd_http2_connections_total",
			"Public-listener connections served as HTTP/2 (opened with the client preface).", nil, nil),
		h2Streams: prometheus.NewDesc("limiterd_http2_streams_total",
			"HTTP/2 streams served by the public listener, each a request.", nil, nil),
		h2Errors: prometheus.NewDesc("limiterd_http2_errors_total",
			"HTTP/2 protocol errors, by who found them: the server (a stream or connection error) or limiterd (a bound of docs/http2.md: GOAWAY ENHANCE_YOUR_CALM).",
			[]string{"by"}, nil),

		algorithm: prometheus.NewDesc("limiterd_algorithm_info",
			"The algorithm each group decides with: 1 for the group's, labelled by its name.",
			[]string{labelGroup, labelAlgorithm}, nil),
		groupEntries: prometheus.NewDesc("limiterd_group_entries",
			"(peer, group) entries the limiter tracks now, per group, whatever the algorithm.", group, nil),
		logTimestamps: prometheus.NewDesc("limiterd_sliding_log_timestamps",
			"Timestamps the sliding logs of a group hold now (one per admission of the last period, per peer).", group, nil),
		stateDropped: prometheus.NewDesc("limiterd_algorithm_state_dropped_total",
			"Entries dropped because their group's algorithm changed (a live edit, a reload, a restart).", group, nil),

		adaptiveLimit: prometheus.NewDesc("limiterd_adaptive_limit",
			"A group's adaptive concurrency limit now: its requests in flight, all peers together (the minimum while the node's unloaded latency is measured).", group, nil),
		adaptiveLatency: prometheus.NewDesc("limiterd_adaptive_latency_seconds",
			"The node's latency the adaptive limit follows: the last window's percentile of the answers' times to their head.", group, nil),
		adaptiveUnloaded: prometheus.NewDesc("limiterd_adaptive_unloaded_latency_seconds",
			"The node's unloaded latency the adaptive limit compares it with, as last measured.", group, nil),
		adaptiveInflight: prometheus.NewDesc("limiterd_adaptive_inflight",
			"A group's requests in flight, all peers together, as its adaptive concurrency counts them.", group, nil),
		adaptiveProbing: prometheus.NewDesc("limiterd_adaptive_probing",
			"1 while a group's adaptive limit is pinned at its minimum to measure the node's unloaded latency.", group, nil),
	}
}

// Describe sends the descriptors of the fixed metrics, then those of the
// metrics the extra funcs send now.
func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.requests, c.rejected, c.reduce, c.leakyTicks, c.tickReductionsPeer,
		c.tickTokenReductions, c.tickDeletePeer, c.cleanupDeletePeer, c.peers,
		c.trackedItems, c.wouldReject, c.denied, c.admitted, c.evictions, c.tracked,
		c.algorithm, c.groupEntries, c.logTimestamps, c.stateDropped,
		c.adaptiveLimit, c.adaptiveLatency, c.adaptiveUnloaded, c.adaptiveInflight, c.adaptiveProbing,
	} {
		ch <- d
	}
	if c.lat != nil {
		ch <- c.responseTime
	}
	if c.pc != nil {
		ch <- c.upstreamErrors
		ch <- c.internalErrors
		ch <- c.exemptPath
		ch <- c.checkLeasesCut
		ch <- c.answerBytes
		ch <- c.answersSpilled
		ch <- c.answersWaited
		ch <- c.upstreamWaits
		ch <- c.badRequests
		ch <- c.tooLarge
		ch <- c.connsRefused
		ch <- c.h2Open
		ch <- c.h2Conns
		ch <- c.h2Streams
		ch <- c.h2Errors
	}
	if len(c.extra) == 0 {
		return
	}
	mc := make(chan prometheus.Metric)
	go func() {
		c.collectExtra(mc)
		close(mc)
	}()
	for m := range mc {
		ch <- m.Desc()
	}
}

func (c *metricsCollector) collectExtra(ch chan<- prometheus.Metric) {
	for _, f := range c.extra {
		f(ch)
	}
}

// Collect reads the sources once and sends every metric.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	seconds := func(d *prometheus.Desc, v time.Duration, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v.Seconds(), labels...)
	}

	var evictions uint64
	for name, s := range c.src.Stats() {
		evictions += s.Evictions
		counter(c.requests, s.Requests, name)
		counter(c.rejected, s.RejectedConcurrency, name, limiter.ReasonConcurrency.String())
		counter(c.rejected, s.RejectedRateLimit, name, limiter.ReasonRateLimit.String())
		g, defined := c.src.GroupID(name)
		av, adaptive := limiter.AdaptiveView{}, false
		if defined {
			av, adaptive = c.src.Adaptive(g)
		}
		if adaptive || s.RejectedAdaptive > 0 {
			counter(c.rejected, s.RejectedAdaptive, name, limiter.ReasonAdaptive.String())
		}
		if adaptive {
			gauge(c.adaptiveLimit, av.Limit, name)
			seconds(c.adaptiveLatency, av.Latency, name)
			seconds(c.adaptiveUnloaded, av.Unloaded, name)
			gauge(c.adaptiveInflight, av.Inflight, name)
			probing := int64(0)
			if av.Probing {
				probing = 1
			}
			gauge(c.adaptiveProbing, probing, name)
		}
		counter(c.reduce, s.ReduceRequests, name)
		counter(c.leakyTicks, s.LeakyTicks, name)
		counter(c.tickReductionsPeer, s.TickReductionsPeer, name)
		counter(c.tickTokenReductions, s.TickTokenReductions, name)
		counter(c.tickDeletePeer, s.TickDeletePeer, name)
		counter(c.cleanupDeletePeer, s.CleanupDeletePeer, name)

		gauge(c.peers, s.PeersConcurrency, name, typeConcurrency)
		gauge(c.peers, s.PeersTokens, name, typeTokens)
		gauge(c.peers, s.PeersWindow, name, typeWindow)
		gauge(c.trackedItems, s.ItemsConcurrency, name, typeConcurrency)
		gauge(c.trackedItems, s.ItemsTokens, name, typeTokens)
		gauge(c.trackedItems, s.ItemsWindow, name, typeWindow)

		counter(c.wouldReject, s.WouldReject, name)
		counter(c.denied, s.Denied, name)
		counter(c.admitted, s.AllowedSliding, name, limiter.ViaSliding.String())
		counter(c.admitted, s.AllowedLeaky, name, limiter.ViaLeaky.String())
		counter(c.admitted, s.Unlimited, name, limiter.ViaUnlimited.String())
		counter(c.admitted, s.AllowedAlgorithm, name, limiter.ViaAlgorithm.String())
		gauge(c.groupEntries, s.Entries, name)
		gauge(c.logTimestamps, s.LogItems, name)
		counter(c.stateDropped, s.StateDrops, name)
		if g, ok := c.src.GroupID(name); ok {
			if gs, ok := c.src.Settings(g); ok {
				gauge(c.algorithm, 1, name, gs.Algorithm.String())
			}
		}

		if c.lat == nil {
			continue
		}
		// A group removed from the config keeps its counters but has no
		// ID any more, hence no histogram.
		if g, ok := c.src.GroupID(name); ok {
			c.collectLatency(ch, name, c.lat.Group(g))
		}
	}
	counter(c.evictions, evictions)
	gauge(c.tracked, int64(c.src.Tracked()))

	if c.pc != nil {
		counter(c.upstreamErrors, c.pc.UpstreamErrors.Load(), "unreachable")
		counter(c.upstreamErrors, c.pc.UpstreamTimeouts.Load(), "timeout")
		counter(c.internalErrors, c.pc.InternalErrors.Load())
		counter(c.exemptPath, c.pc.ExemptPath.Load())
		counter(c.checkLeasesCut, c.pc.CheckLeasesCut.Load())
		gauge(c.answerBytes, c.pc.AnswerMemory.Load(), "memory")
		gauge(c.answerBytes, c.pc.AnswerDisk.Load(), "disk")
		counter(c.answersSpilled, c.pc.AnswerSpills.Load())
		counter(c.answersWaited, c.pc.AnswerWaits.Load())
		over := c.pc.UpstreamWaitsOverShare.Load()
		counter(c.upstreamWaits, c.pc.UpstreamWaits.Load()-min(over, c.pc.UpstreamWaits.Load()), "within")
		counter(c.upstreamWaits, over, "over")
		counter(c.badRequests, c.pc.BadRequests.Load())
		counter(c.tooLarge, c.pc.TooLarge.Load())
		counter(c.connsRefused, c.pc.ConnsRefusedPerIP.Load(), "per_ip")
		counter(c.connsRefused, c.pc.ConnsRefusedTotal.Load(), "total")
		counter(c.connsRefused, c.pc.HTTP2StreamsRefused.Load(), "per_ip_streams")
		gauge(c.h2Open, c.pc.HTTP2Open.Load())
		counter(c.h2Conns, c.pc.HTTP2Conns.Load())
		counter(c.h2Streams, c.pc.HTTP2Streams.Load())
		counter(c.h2Errors, c.pc.HTTP2Errors.Load(), "server")
		counter(c.h2Errors, c.pc.HTTP2Calm.Load(), "limiterd")
	}
	c.collectExtra(ch)
}

func (c *metricsCollector) collectLatency(ch chan<- prometheus.Metric, name string, h *insight.LatencyHistogram) {
	if h == nil {
		return
	}
	cum, count, sum := h.Snapshot()
	bounds := insight.LatencyBuckets()
	buckets := make(map[float64]uint64, len(cum))
	for i, n := range cum {
		buckets[bounds[i]] = n
	}
	ch <- prometheus.MustNewConstHistogram(c.responseTime, count, sum, buckets, name)
}
