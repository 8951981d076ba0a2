package config

import (
	"bytes"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"

	"github.com/limiterd/limiterd/limiter"
)

// The file's shape, for TOML: the same keys and units as config.toml, in
// its order (group tables come in name order).
type (
	fileConfig struct {
		Server   fileServer   `toml:"server"`
		Arweave  fileArweave  `toml:"arweave"`
		Log      fileLog      `toml:"log"`
		Admin    fileAdmin    `toml:"admin"`
		Peers    filePeers    `toml:"peers"`
		Snapshot fileSnapshot `toml:"snapshot"`
		Routes   fileRoutes   `toml:"routes"`
		HTTPAPI  fileHTTPAPI  `toml:"http_api"`
		Throttle fileThrottle `toml:"throttle"`
		Cluster  fileCluster  `toml:"cluster"`
	}
	fileServer struct {
		Listen          string `toml:"listen"`
		Upstream        string `toml:"upstream"`
		DataDir         string `toml:"data_dir"`
		ShutdownTimeout string `toml:"shutdown_timeout"`
		RateLimitHeader string `toml:"ratelimit_headers"`

		MaxRequestBody         string `toml:"max_request_body"`
		ReadHeaderTimeout      string `toml:"read_header_timeout"`
		IdleTimeout            string `toml:"idle_timeout"`
		ClientBodyTimeout      string `toml:"client_body_timeout"`
		SendTimeout            string `toml:"send_timeout"`
		UpstreamConnectTimeout string `toml:"upstream_connect_timeout"`
		UpstreamHeaderTimeout  string `toml:"upstream_header_timeout"`
		UpstreamReadTimeout    string `toml:"upstream_read_timeout"`
		UpstreamMaxConns       int    `toml:"upstream_max_conns"`
		MaxConns               int    `toml:"max_conns"`
		MaxConnsPerIP          int    `toml:"max_conns_per_ip"`
	}
	fileArweave struct {
		Version string `toml:"version"`
	}
	fileAdmin struct {
		Listen     string      `toml:"listen"`
		Token      string      `toml:"token"`
		TokenFile  string      `toml:"token_file"`
		CheckLease string      `toml:"check_lease"`
		AuditMax   int         `toml:"audit_max_entries"`
		MaxConns   int         `toml:"max_conns"`
		Pprof      bool        `toml:"pprof"`
		Tokens     []fileToken `toml:"tokens,omitempty"`
	}
	fileLog struct {
		Format     string `toml:"format"`
		Level      string `toml:"level"`
		Rejections string `toml:"rejections"`
	}
	fileToken struct {
		Name      string `toml:"name"`
		Scope     string `toml:"scope"`
		Token     string `toml:"token,omitempty"`
		TokenFile string `toml:"token_file,omitempty"`
	}
	filePeers struct {
		TrustedProxies  []string `toml:"trusted_proxies"`
		ForwardedHeader string   `toml:"forwarded_header"`
		IPv6Prefix      int      `toml:"ipv6_prefix"`
		Exempt          []string `toml:"exempt"`
		MaxTracked      int      `toml:"max_tracked"`
	}
	fileSnapshot struct {
		Interval string `toml:"interval"`
	}
	fileRoutes struct {
		ExemptPaths []string        `toml:"exempt_paths"`
		Rule        []fileRouteRule `toml:"rule"`
	}
	fileRouteRule struct {
		Group          string   `toml:"group"`
		Paths          []string `toml:"paths"`
		Methods        []string `toml:"methods,omitempty"`
		ReduceOnStatus []int    `toml:"reduce_on_status,omitempty"`
	}
	fileHTTPAPI struct {
		Limiter map[string]fileGroup `toml:"limiter"`
	}
	fileGroup struct {
		SlidingWindowLimit      int64  `toml:"sliding_window_limit"`
		SlidingWindowDuration   int64  `toml:"sliding_window_duration"`
		CleanupInterval         int64  `toml:"sliding_window_timestamp_cleanup_interval"`
		CleanupExpiry           int64  `toml:"sliding_window_timestamp_cleanup_expiry"`
		LeakyLimit              int64  `toml:"leaky_limit"`
		LeakyTickInterval       int64  `toml:"leaky_tick_interval"`
		LeakyTickReduction      int64  `toml:"leaky_tick_reduction"`
		ConcurrencyLimit        int64  `toml:"concurrency_limit"`
		ManualReductionDisabled bool   `toml:"is_manual_reduction_disabled"`
		Mode                    string `toml:"mode"`
		NumberOfWorkers         int64  `toml:"number_of_workers"`
		ConcurrencyScope        string `toml:"concurrency_scope"`
		Algorithm               string `toml:"algorithm"`
		// 0 is "unset" (a hybrid group's), which the file cannot say.
		Limit  int64 `toml:"limit,omitempty"`
		Period int64 `toml:"period,omitempty"`
		Burst  int64 `toml:"burst,omitempty"`
	}
	fileThrottle struct {
		Mode          string             `toml:"mode"`
		Period        int64              `toml:"period"`
		RetryInterval int64              `toml:"retry_interval"`
		ExemptPeers   []string           `toml:"exempt_peers"`
		ExemptPaths   []string           `toml:"exempt_paths"`
		DefaultType   string             `toml:"default_type"`
		DefaultRPM    int                `toml:"default_rpm"`
		Rule          []fileThrottleRule `toml:"rule"`
	}
	fileThrottleRule struct {
		Type  string   `toml:"type"`
		RPM   int      `toml:"rpm"`
		Paths []string `toml:"paths"`
	}
	fileCluster struct {
		Backend      string    `toml:"backend"`
		Mode         string    `toml:"mode"`
		OnFailure    string    `toml:"on_failure"`
		SyncInterval string    `toml:"sync_interval"`
		Timeout      string    `toml:"timeout"`
		Lease        string    `toml:"lease"`
		MaxUnsynced  int       `toml:"max_unsynced"`
		Redis        fileRedis `toml:"redis"`
	}
	fileRedis struct {
		Addrs    []string `toml:"addrs"`
		Username string   `toml:"username"`
		Password string   `toml:"password"`
		DB       int      `toml:"db"`
	}
)

// tomlHeader starts the output of TOML.
const tomlHeader = `# The effective limiterd configuration: the built-in default, the config
# file, the environment and the flags, merged. Same keys and units as
# config.toml; every list is given whole, so loading this file alone gives
# the same configuration.

`

// TOML returns the configuration as a TOML document with the key names
// and units of config.toml (integer milliseconds for the Arweave keys and
// the throttle, Go duration strings elsewhere), for limiterd check-config.
// Loading it as the config file gives a Config equal to c. It includes the
// secrets; print c.Redacted().TOML() to show it to people.
func (c *Config) TOML() ([]byte, error) {
	f := fileConfig{
		Server: fileServer{
			Listen:          c.Server.Listen,
			Upstream:        c.Server.Upstream,
			DataDir:         c.Server.DataDir,
			ShutdownTimeout: c.Server.ShutdownTimeout.String(),
			RateLimitHeader: c.Server.RateLimitHeaders.String(),
		},
		Arweave: fileArweave{Version: c.Arweave.Version.String()},
		Admin: fileAdmin{
			Listen:     c.Admin.Listen,
			Token:      c.Admin.Token,
			TokenFile:  c.Admin.TokenFile,
			CheckLease: c.Admin.CheckLease.String(),
			AuditMax:   c.Admin.AuditMaxEntries,
			MaxConns:   c.Admin.MaxConns,
			Pprof:      c.Admin.Pprof,
		},
		Log: fileLog{Format: c.Log.Format, Level: c.Log.Level, Rejections: c.Log.Rejections},
		Peers: filePeers{
			TrustedProxies:  list(c.Peers.TrustedProxies),
			ForwardedHeader: c.Peers.ForwardedHeader,
			IPv6Prefix:      c.Peers.IPv6Prefix,
			Exempt:          list(c.Peers.Exempt),
			MaxTracked:      c.Peers.MaxTracked,
		},
		Snapshot: fileSnapshot{Interval: c.Snapshot.Interval.String()},
		Routes: fileRoutes{
			ExemptPaths: list(c.Routes.ExemptPaths),
			Rule:        []fileRouteRule{}, // "rule = []" when empty: it replaces the shipped rules
		},
		HTTPAPI: fileHTTPAPI{Limiter: make(map[string]fileGroup, len(c.Groups))},
		Throttle: fileThrottle{
			Mode:          c.Throttle.Mode.String(),
			Period:        int64(c.Throttle.Period / time.Millisecond),
			RetryInterval: int64(c.Throttle.RetryInterval / time.Millisecond),
			ExemptPeers:   list(c.Throttle.ExemptPeers),
			ExemptPaths:   list(c.Throttle.ExemptPaths),
			DefaultType:   c.Throttle.DefaultType,
			DefaultRPM:    c.Throttle.DefaultRPM,
			Rule:          []fileThrottleRule{},
		},
		Cluster: fileCluster{
			Backend:      c.Cluster.Backend,
			Mode:         c.Cluster.Mode,
			OnFailure:    c.Cluster.OnFailure,
			SyncInterval: c.Cluster.SyncInterval.String(),
			Timeout:      c.Cluster.Timeout.String(),
			Lease:        c.Cluster.Lease.String(),
			MaxUnsynced:  c.Cluster.MaxUnsynced,
			Redis: fileRedis{
				Addrs:    list(c.Cluster.Redis.Addrs),
				Username: c.Cluster.Redis.Username,
				Password: c.Cluster.Redis.Password,
				DB:       c.Cluster.Redis.DB,
			},
		},
	}
	dataPlaneTOML(c.Server, &f.Server)
	for _, t := range c.Admin.Tokens {
		f.Admin.Tokens = append(f.Admin.Tokens, fileToken(t))
	}
	for _, r := range c.Routes.Rules {
		f.Routes.Rule = append(f.Routes.Rule, fileRouteRule{
			Group:          r.Group,
			Paths:          list(r.Paths),
			Methods:        list(r.Methods),
			ReduceOnStatus: list(r.ReduceOnStatus),
		})
	}
	for name, g := range c.Groups {
		f.HTTPAPI.Limiter[name] = fileGroupOf(g)
	}
	for _, r := range c.Throttle.Rules {
		f.Throttle.Rule = append(f.Throttle.Rule, fileThrottleRule{Type: r.Type, RPM: r.RPM, Paths: list(r.Paths)})
	}

	var buf bytes.Buffer
	buf.WriteString(tomlHeader)
	enc := gotoml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileGroupOf returns the table of one group's settings.
func fileGroupOf(g limiter.GroupSettings) fileGroup {
	return fileGroup{
		SlidingWindowLimit:      g.SlidingWindowLimit,
		SlidingWindowDuration:   g.SlidingWindowDuration,
		CleanupInterval:         g.CleanupInterval,
		CleanupExpiry:           g.CleanupExpiry,
		LeakyLimit:              g.LeakyLimit,
		LeakyTickInterval:       g.LeakyTickInterval,
		LeakyTickReduction:      g.LeakyTickReduction,
		ConcurrencyLimit:        g.ConcurrencyLimit,
		ManualReductionDisabled: g.ManualReductionDisabled,
		Mode:                    g.Mode.String(),
		NumberOfWorkers:         max(1, g.NumberOfWorkers),
		ConcurrencyScope:        g.ConcurrencyScope.String(),
		Algorithm:               g.Algorithm.String(),
		Limit:                   g.Limit,
		Period:                  g.Period,
		Burst:                   g.Burst,
	}
}

// list returns s, or an empty slice for nil, so that the encoder writes
// "key = []" rather than leaving the key out.
func list[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
