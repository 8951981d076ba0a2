package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/web/ui"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// openCluster opens the Redis backend of cluster mode (docs/cluster.md) when
// the config asks for it; nil when the limits are this instance's own.
func openCluster(cfg *config.Config, limCfg limiter.Config, log *slog.Logger) (*cluster.Backend, error) {
	if cfg.Cluster.Backend != "redis" {
		return nil, nil
	}
	mode, err := cluster.ParseMode(cfg.Cluster.Mode)
	if err != nil {
		return nil, err
	}
	onFail, err := cluster.ParseOnFailure(cfg.Cluster.OnFailure)
	if err != nil {
		return nil, err
	}
	// go-redis logs dial failures itself; cluster logs what they mean.
	redis.SetLogger(redisLogger{log})
	r := &cfg.Cluster.Redis
	var tlsOpts *cluster.TLSOptions
	if r.TLS {
		tlsOpts = &cluster.TLSOptions{CAFile: r.CAFile, CertFile: r.CertFile, KeyFile: r.KeyFile,
			ServerName: r.ServerName, InsecureSkipVerify: r.InsecureSkipVerify && r.AllowInsecureSkipVerify}
	}
	b, err := cluster.Open(cluster.Options{
		Addrs:            r.Addrs,
		Username:         r.Username,
		Password:         r.Password,
		PasswordFile:     r.PasswordFile,
		DB:               r.DB,
		TLS:              tlsOpts,
		MasterName:       r.Sentinel.MasterName,
		SentinelAddrs:    r.Sentinel.Addrs,
		SentinelPassword: r.Sentinel.Password,
		Mode:             mode,
		OnFailure:        onFail,
		Timeout:          cfg.Cluster.Timeout,
		Lease:            cfg.Cluster.Lease,
		SyncInterval:     cfg.Cluster.SyncInterval,
		MaxUnsynced:      cfg.Cluster.MaxUnsynced,
		// While Redis is down (on_failure = "local"), decisions are made
		// in this process's memory, capped as peers.max_tracked says.
		Fallback: memory.New(),
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	if r.TLS && r.InsecureSkipVerify {
		log.Warn("cluster.redis.insecure_skip_verify: the redis server's certificate is not verified (allowed by cluster.redis.allow_insecure_skip_verify)")
	}
	log.Info("cluster mode: limits shared through redis", "addrs", strings.Join(cfg.Cluster.Redis.Addrs, ","),
		"sentinel_master", r.Sentinel.MasterName, "tls", r.TLS,
		"mode", cfg.Cluster.Mode, "on_failure", cfg.Cluster.OnFailure, "instance", b.Instance())
	return b, nil
}

// redisLogger takes go-redis's own log lines to the debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// checkClusterLimits refuses the groups whose limits cluster mode's scripts
// cannot compute exactly.
func checkClusterLimits(lc limiter.Config) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(lc.Groups)) {
		gs := lc.Groups[name]
		if err := cluster.CheckLimits(name, &gs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// backendOf returns where the limiter keeps its state: b's Redis, or
// (b nil) this process's memory.
func backendOf(b *cluster.Backend) limiter.Backend {
	if b == nil {
		return memory.New()
	}
	return b
}

// clusterStatus shows a cluster.Backend's state on the dashboard.
type clusterStatus struct{ b *cluster.Backend }

func (c clusterStatus) ClusterState() templates.Cluster {
	st := c.b.Status()
	return templates.Cluster{
		Mode: st.Mode.String(), OnFailure: st.OnFailure.String(), Redis: strings.Join(st.Addrs, ", "),
		Up: st.Up, Since: st.Since, Reason: st.Reason,
		SlotsDown: st.Down.Count, SlotsSince: st.Down.Since, SlotsReason: st.Down.Reason,
	}
}

// webCluster returns b as the dashboard's ui.ClusterStatus (nil for the
// local backend).
func webCluster(b *cluster.Backend) ui.ClusterStatus {
	if b == nil {
		return nil
	}
	return clusterStatus{b}
}

// clusterCollector exports a cluster.Backend's state at scrape time:
// limiterd_cluster_redis_up (docs/metrics.md, "Cluster mode") and the counters
// behind it.
type clusterCollector struct {
	b                                     *cluster.Backend
	up, errors, failures, trips, commands *prometheus.Desc
	dropped, repaired, drift, slotsDown   *prometheus.Desc
}

func newClusterCollector(b *cluster.Backend) *clusterCollector {
	return &clusterCollector{
		b: b,
		up: prometheus.NewDesc("limiterd_cluster_redis_up",
			"1 while decisions use Redis (cluster mode), 0 while they are made as cluster.on_failure says.", nil, nil),
		slotsDown: prometheus.NewDesc("limiterd_cluster_redis_slots_down",
			"Hash slots of a Redis Cluster whose master does not answer while the others do: their peers are decided as cluster.on_failure says.", nil, nil),
		errors: prometheus.NewDesc("limiterd_cluster_redis_errors_total",
			"Failed Redis calls, by kind: timeout, busy, connection, auth, script, memory, evicted, readonly, key, reply.",
			[]string{"kind"}, nil),
		failures: prometheus.NewDesc("limiterd_cluster_failure_decisions_total",
			"Decisions made without Redis, by what cluster.on_failure answered: open, closed or local.",
			[]string{"answer"}, nil),
		trips: prometheus.NewDesc("limiterd_cluster_redis_round_trips_total",
			"Round trips to Redis (a pipeline counts once).", nil, nil),
		commands: prometheus.NewDesc("limiterd_cluster_redis_commands_total",
			"Commands sent to Redis.", nil, nil),
		dropped: prometheus.NewDesc("limiterd_cluster_dropped_releases_total",
			"Released in-flight slots Redis could not be told of in time: they expire with their lease.", nil, nil),
		drift: prometheus.NewDesc("limiterd_cluster_drift_groups",
			"Groups whose file-level settings on this instance differ from another instance's sharing the Redis.", nil, nil),
		repaired: prometheus.NewDesc("limiterd_cluster_repaired_keys_total",
			"(peer, group)s whose keys in Redis were of the wrong type or corrupt, deleted so that they start afresh.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.slotsDown, c.errors, c.failures, c.trips, c.commands, c.dropped, c.repaired, c.drift} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.Stats()
	up := 0.0
	if s.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.slotsDown, prometheus.GaugeValue, float64(s.SlotsDown))
	for _, k := range cluster.Kinds {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(s.Errors[k]), k)
	}
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.FailOpen), "open")
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.FailClosed), "closed")
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.FailLocal), "local")
	ch <- prometheus.MustNewConstMetric(c.trips, prometheus.CounterValue, float64(s.RoundTrips))
	ch <- prometheus.MustNewConstMetric(c.commands, prometheus.CounterValue, float64(s.Commands))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.DroppedReleases))
	ch <- prometheus.MustNewConstMetric(c.repaired, prometheus.CounterValue, float64(s.Repaired))
	ch <- prometheus.MustNewConstMetric(c.drift, prometheus.GaugeValue, float64(len(c.b.Drifts())))
}

// clusterConditions returns the dashboard's banner while Redis is not in
// use (nil for the local backend).
func clusterConditions(b *cluster.Backend) func() []ui.Condition {
	if b == nil {
		return nil
	}
	return func() []ui.Condition {
		var out []ui.Condition
		if d := b.Drifts(); len(d) > 0 {
			var groups []string
			for _, x := range d {
				groups = append(groups, x.String())
			}
			out = append(out, ui.Condition{Kind: "drift", Title: "cluster: instances disagree",
				Text: "— the file settings of " + strings.Join(groups, "; ") + " differ from this instance's: each applies its own limits to those groups."})
		}
		st := b.Status()
		doing := map[cluster.OnFailure]string{
			cluster.FailOpen:   "requests are admitted unlimited (on_failure = open).",
			cluster.FailClosed: "requests are answered 503 (on_failure = closed).",
			cluster.FailLocal:  "requests are decided on this instance's own state (on_failure = local).",
		}[st.OnFailure]
		switch {
		case !st.Up:
			out = append(out, ui.Condition{Kind: "down", Title: "cluster: Redis down", Text: "— " + doing})
		case st.Down.Count > 0:
			out = append(out, ui.Condition{Kind: "down", Title: "cluster: Redis slots down",
				Text: fmt.Sprintf("— %d of 16384 hash slots have no master answering (%s): for the peers whose keys they hold, %s The others are shared.", st.Down.Count, st.Down.Reason, doing)})
		}
		return out
	}
}

// clusterReadiness returns /readyz's backend check (nil for the local
// backend): not ready while Redis cannot be used and on_failure is closed
// (every request would be answered 503), ready but degraded with open or
// local (docs/cluster.md, "When Redis fails").
func clusterReadiness(b *cluster.Backend) func() (bool, string) {
	if b == nil {
		return nil
	}
	return func() (bool, string) {
		st := b.Status()
		if st.Up && st.Down.Count > 0 {
			// Most peers are still shared: an instance that is taken out
			// would not help, as every instance sees the same masters.
			return true, fmt.Sprintf("degraded: %d of 16384 redis cluster hash slots unavailable (%s): their peers decided as on_failure = %s says", st.Down.Count, st.Down.Reason, st.OnFailure)
		}
		if st.Up {
			return true, "ok: redis in use"
		}
		down := "redis unavailable (" + st.Reason + ")"
		if st.OnFailure == cluster.FailClosed {
			return false, down + ": on_failure = closed answers every request 503"
		}
		return true, "degraded: " + down + ": decided as on_failure = " + st.OnFailure.String() + " says"
	}
}

// SharedEntry reads a peer's state shared in Redis for its page
// (ui.SharedStates).
func (c clusterStatus) SharedEntry(ctx context.Context, k peer.Key, group string, s *limiter.GroupSettings) (limiter.EntryView, bool, error) {
	return c.b.SharedEntry(ctx, k, group, s)
}

var _ ui.SharedStates = clusterStatus{}
