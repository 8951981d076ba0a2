// Package config loads limiterd's configuration into a typed, validated
// Config: plain values for the components, which never see koanf.
//
// Load merges four layers, lowest first, with koanf's semantics:
//
//  1. the shipped config.toml, compiled in (limiterd.DefaultConfig): every
//     key at its default, the Arweave groups, routes and throttle table;
//  2. the config file, if any;
//  3. the environment: LIMITERD_ variables, "__" between levels, names
//     lower-cased (LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT=900 is
//     http_api.limiter.general.leaky_limit); lists are comma-separated;
//  4. the flags (-data-dir).
//
// Tables merge key by key, so a layer that omits a table or a key inherits
// it. A list given in a higher layer replaces the lower list whole: a file
// with [[routes.rule]] tables replaces every shipped route rule, and
// peers.exempt = [] empties the exempt list.
//
// Group tables ([http_api.limiter.<group>]) merge like any table, so a
// shipped group that a file overrides in part keeps its own default for
// every key the file omits (the embedded layer gives it every key). A new
// group takes, for each key it omits, the value of the general group (as
// merged), as docs/config.md says; limiter.ResolveGroups fills those in. A shipped
// group cannot be removed, only left without routes; local_peers is built
// in and cannot be configured.
//
// Every key is declared once, in the table keys (keys.go): its name, type,
// default, bounds or values, help, and whether a new value takes effect on
// restart, on reload or live; the decoding, the environment, the checks
// and the TOML output go by it.
//
// Everything is validated before Load returns: every problem is reported,
// not just the first, each as a *limiter.FieldError naming the key (see
// Errors).
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"

	"github.com/limiterd/limiterd"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// Config is the typed configuration (plain values; components never see
// koanf). Load returns it validated; a Config is a value that is not
// modified after Load, and safe to read from several goroutines.
type Config struct {
	Server   Server
	Arweave  Arweave
	Log      Log
	Admin    Admin
	Peers    Peers
	Snapshot Snapshot
	Routes   Routes
	// Groups holds the resolved, validated settings of every group (the
	// file value of each key, before any live edit), general included,
	// local_peers never.
	Groups   map[string]limiter.GroupSettings
	Throttle Throttle
	Cluster  Cluster
}

// Server is the [server] table: the public listener and the node behind it.
type Server struct {
	Listen          string        // host:port of the proxy
	Upstream        string        // absolute http(s) URL of the node
	DataDir         string        // directory of limiterd.db
	ShutdownTimeout time.Duration // drain bound on SIGTERM/SIGINT; 0: do not wait
	// RateLimitHeaders is server.ratelimit_headers: which rate-limit
	// fields limited replies carry (docs/replies.md).
	RateLimitHeaders ratelimit.Set

	// The public listener (config/dataplane.go).
	MaxRequestBody         int64         // bytes; a larger request body is answered 413
	ReadHeaderTimeout      time.Duration // a request's line and headers
	IdleTimeout            time.Duration // the next request on a keep-alive connection
	ClientBodyTimeout      time.Duration // each wait for more of a request body
	SendTimeout            time.Duration // each wait for the client to take more of an answer
	UpstreamConnectTimeout time.Duration // connecting to the node (and waiting for a free connection)
	UpstreamHeaderTimeout  time.Duration // the node's first byte once the request is sent
	UpstreamReadTimeout    time.Duration // each wait for more of the node's answer (or for it to take the request body)
	UpstreamMaxConns       int           // connections to the node, busy and idle
	MaxConns               int           // open client connections
	MaxConnsPerIP          int           // open connections of one client address; 0: no cap

	// The buffers of the node's answers (config/dataplane.go): bytes per
	// answer and in all, in memory and in temporary files; 0: none.
	AnswerMemory, AnswerMemoryTotal int64
	AnswerDisk, AnswerDiskTotal     int64
	AnswerTempDir                   string // "": the system's

	// Cleartext HTTP/2 on the public listener (config/dataplane.go).
	HTTP2                     bool  // serve a connection that opens with the HTTP/2 preface as HTTP/2
	HTTP2MaxConcurrentStreams int   // streams open at once on one connection
	HTTP2MaxHeaderListSize    int64 // bytes of a request's decoded header list
	HTTP2ConnStreamRate       int   // new streams per second of one connection
	HTTP2PeerStreamRate       int   // new streams per second of one client address; 0: no limit
	// UpstreamProtocol is how the node is reached: "http1" (HTTP/1.1) or
	// "h2c" (cleartext HTTP/2, prior knowledge).
	UpstreamProtocol string
}

// Admin is the [admin] table: the admin listener and its token.
type Admin struct {
	Listen     string        // host:port of the dashboard and admin API
	Token      string        // bearer token; "" with TokenFile "": generate one
	TokenFile  string        // file holding the token; at most one of Token and TokenFile is set
	CheckLease time.Duration // release of a /api/v1/check slot not released by its caller
	// AuditMaxEntries bounds the audit log: beyond it, the oldest entries
	// are removed as new ones are written; 0 keeps every entry.
	AuditMaxEntries int
	// MaxConns caps the admin listener's open connections: at the cap a
	// new one displaces the connection idle the longest, or is answered
	// 503. Taken at start only.
	MaxConns int
	// ExpensiveCalls bounds the expensive admin calls run at once (0: a
	// quarter of the cores); ExpensiveCallTimeout bounds each one's time.
	ExpensiveCalls       int
	ExpensiveCallTimeout time.Duration
	// NowWindow is what the dashboard's "who is hammering now", the
	// fleet's rates and GET /api/v1/overview cover; changes on SIGHUP.
	NowWindow time.Duration
	// Pprof serves the Go runtime's profiles at /debug/pprof/ to admin
	// tokens; changes on SIGHUP.
	Pprof  bool
	Tokens []Token // [[admin.tokens]]: more tokens, each with a scope
}

// The bounds of admin.audit_max_entries other than 0 (keep every entry):
// a log of fewer than MinAuditEntries would lose an afternoon's edits to a
// script, and MaxAuditEntries (about 200 GB of entries) is beyond any
// database limiterd is meant to keep.
const (
	MinAuditEntries = 100
	MaxAuditEntries = 1 << 30
)

// Peers is the [peers] table: how a request's peer is identified.
type Peers struct {
	TrustedProxies []string // IPs or CIDRs, valid for limiter.ParsePrefix
	// ForwardedHeader is the header the trusted proxies write:
	// "x-forwarded-for" or "forwarded"; "" (required to be set when there
	// are trusted proxies).
	ForwardedHeader string
	IPv6Prefix      int      // 1..120 or 128
	Exempt          []string // IPs or CIDRs, valid for limiter.ParsePrefix
	MaxTracked      int      // cap on (peer, group) entries; 0: none
}

// Snapshot is the [snapshot] table.
type Snapshot struct {
	Interval time.Duration // how often per-peer state is written
}

// Routes is the [routes] table: the paths that bypass the limiter and the
// ordered route rules.
type Routes struct {
	ExemptPaths []string            // patterns valid for limiter.ParsePattern
	Rules       []limiter.RouteRule // valid for limiter.NewRouteTable; every group exists
}

// Throttle is the [throttle] table: the outbound throttle (docs/throttle.md).
type Throttle struct {
	Mode          throttle.Mode // fixed (ar_rate_limiter) or adaptive (2.9.7: learned quotas)
	Period        time.Duration // the counting window (period, integer ms in the file)
	RetryInterval time.Duration // how often a waiting call is re-evaluated (ms in the file)
	ExemptPeers   []string      // peer names, compared exactly
	ExemptPaths   []string      // patterns valid for limiter.ParseThrottlePattern
	DefaultType   string        // type of a path no rule matches
	DefaultRPM    int           // its requests per minute
	Rules         []ThrottleRule
}

// ThrottleRule is one [[throttle.rule]]: calls whose path matches one of
// Paths are of type Type, allowed RPM requests per minute.
type ThrottleRule struct {
	Type  string
	RPM   int
	Paths []string // patterns valid for limiter.ParseThrottlePattern
}

// Cluster is the [cluster] table (docs/cluster.md).
type Cluster struct {
	Backend      string        // "local" or "redis"
	Mode         string        // "strict" or "local_first"
	OnFailure    string        // "open", "closed" or "local"
	SyncInterval time.Duration // local_first: push interval
	Timeout      time.Duration // longest wait for Redis on a request's path
	Lease        time.Duration // in-flight slots of a dead instance are freed after this
	MaxUnsynced  int           // local_first: admissions per key held unpushed (0: no cap)
	Redis        Redis
}

// Redis is the [cluster.redis] table.
type Redis struct {
	Addrs        []string // host:port of each server
	Username     string
	Password     string
	PasswordFile string
	DB           int
	// TLS to Redis and the sentinels (docs/cluster.md, "TLS, passwords
	// and Sentinel").
	TLS                     bool
	CAFile                  string
	CertFile                string
	KeyFile                 string
	ServerName              string
	InsecureSkipVerify      bool
	AllowInsecureSkipVerify bool
	Sentinel                Sentinel
}

// Sentinel is the [cluster.redis.sentinel] table.
type Sentinel struct {
	MasterName string
	Addrs      []string
	Password   string
}

// Source says where a Load comes from.
type Source struct {
	// Path is the config file; "" means none.
	Path string
	// Required is true when the path was given explicitly (-config): a
	// missing file is then an error. When false and the file does not
	// exist, only the embedded default is used.
	Required bool
	// Env is the environment, os.Environ() style ("NAME=value"); only
	// LIMITERD_ variables are read.
	Env []string
	// DataDir is the -data-dir flag ("" = not given); it overrides
	// server.data_dir.
	DataDir string
	// Data, when not nil, is the config file's content, read instead of
	// the file at Path (Path then only names it in errors).
	Data []byte
}

// Info says what a Load used, for the startup log.
type Info struct {
	// UsedFile is the config file read, or "" when none was.
	UsedFile string
	// EmbeddedOnly is true when no file was read: the configuration is the
	// embedded default with the environment and flags over it.
	EmbeddedOnly bool
}

// embeddedName names the embedded default in errors.
const embeddedName = "config.toml (embedded)"

// Load reads, merges and validates the configuration of src (see the
// package comment for the layers). On error the Config is nil and the
// error joins every problem found, "config: <key>: <problem>" (see
// Errors); Info is filled in either way.
func Load(src Source) (*Config, Info, error) {
	var p problems
	info := Info{EmbeddedOnly: true}
	k := koanf.New(".")
	if err := loadTOML(k, limiterd.DefaultConfig, embeddedName); err != nil {
		p.errs = append(p.errs, err)
		return nil, info, p.err()
	}
	// The file, the environment and the flags are read into layers of
	// their own first: their 2.9.7 names are renamed layer by layer, and
	// the version they ask for decides the defaults under them.
	var file map[string]any
	if src.Data != nil || src.Path != "" {
		b, err := src.Data, error(nil)
		if b == nil {
			b, err = readFile(src.Path)
		}
		switch {
		case err == nil:
			fk := koanf.New(".")
			if err := loadTOML(fk, b, src.Path); err != nil {
				p.errs = append(p.errs, err)
				return nil, info, p.err()
			}
			file = fk.Raw()
			info = Info{UsedFile: src.Path}
		case errors.Is(err, fs.ErrNotExist) && !src.Required:
			// Only the embedded default.
		default:
			var pe *fs.PathError
			problem := err.Error()
			if errors.As(err, &pe) {
				problem = "cannot read the config file: " + pe.Err.Error()
			}
			p.addErr(src.Path, problem, err)
			return nil, info, p.err()
		}
	}

	fields := schema()
	env, origin := fromEnv(&p, src.Env, fields)
	aliases := aliasOrigin{}
	normalizeAliases(&p, file, aliases)
	normalizeAliases(&p, env, aliases)
	version := limiter.Arweave296
	for _, layer := range []map[string]any{k.Raw(), file, env} {
		if v, ok := layerVersion(layer); ok {
			if s, ok := v.(string); ok {
				if pv, err := limiter.ParseArweaveVersion(s); err == nil {
					version = pv
				}
			}
		}
	}
	for _, l := range []struct {
		raw  map[string]any
		name string
	}{{versionDefaults(version), "the defaults of arweave.version " + version.String()}, {file, src.Path}, {env, "environment"}} {
		if err := loadLayer(k, l.raw, l.name); err != nil {
			return nil, info, err
		}
	}
	if src.DataDir != "" {
		flags := map[string]any{"server": map[string]any{"data_dir": src.DataDir}}
		if err := k.Load(confmap.Provider(flags, ""), nil); err != nil {
			return nil, info, fmt.Errorf("config: flags: %w", err)
		}
		delete(origin, "server.data_dir")
	}

	t := decode(&p, k.Raw(), fields, "")
	cfg := build(&p, t)
	for _, e := range p.errs {
		if alias, ok := aliases[e.Field]; ok {
			e.Field = alias
		}
		if name, ok := envOrigin(origin, e.Field); ok {
			e.Problem += " (environment variable " + name + ")"
		}
	}
	if err := p.err(); err != nil {
		return nil, info, err
	}
	resolvePaths(cfg, info.UsedFile, origin, src.DataDir != "")
	return cfg, info, nil
}

// loadTOML parses b as TOML into k. A syntax error is a problem keyed by
// name:line:column.
func loadTOML(k *koanf.Koanf, b []byte, name string) *limiter.FieldError {
	if err := checkShape(b); err != nil {
		return &limiter.FieldError{Field: name, Problem: err.Error(), Err: err}
	}
	err := k.Load(rawbytes.Provider(b), toml.Parser())
	if err == nil {
		return nil
	}
	var de *gotoml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return &limiter.FieldError{Field: fmt.Sprintf("%s:%d:%d", name, row, col), Problem: de.Error(), Err: err}
	}
	return &limiter.FieldError{Field: name, Problem: err.Error(), Err: err}
}

// envOrigin returns the environment variable that set key, or one of its
// list items.
func envOrigin(origin map[string]string, key string) (string, bool) {
	if name, ok := origin[key]; ok {
		return name, true
	}
	if i := strings.IndexByte(key, '['); i > 0 {
		name, ok := origin[key[:i]]
		return name, ok
	}
	return "", false
}

// Limiter returns the limiter core's configuration: the groups, the route
// rules, the exempt paths, the trusted proxies and exempt peers parsed with
// limiter.ParsePrefix, the IPv6 prefix and the tracking cap. Deny is empty:
// the deny list is live state only. The result shares nothing with c. The
// error, for a Config that Load did not validate, names the key.
func (c *Config) Limiter() (limiter.Config, error) {
	var p problems
	trusted := parsePrefixes(&p, "peers.trusted_proxies", c.Peers.TrustedProxies)
	exempt := parsePrefixes(&p, "peers.exempt", c.Peers.Exempt)
	header, err := peer.ParseForwardedHeader(c.Peers.ForwardedHeader)
	if err != nil {
		p.add("peers.forwarded_header", strings.TrimPrefix(err.Error(), "peers.forwarded_header: "))
	}
	if err := p.err(); err != nil {
		return limiter.Config{}, err
	}
	rules := make([]limiter.RouteRule, len(c.Routes.Rules))
	for i, r := range c.Routes.Rules {
		rules[i] = cloneRule(r)
	}
	return limiter.Config{
		Groups:          maps.Clone(c.Groups),
		Routes:          rules,
		ExemptPaths:     slices.Clone(c.Routes.ExemptPaths),
		TrustedProxies:  trusted,
		ForwardedHeader: header,
		IPv6Prefix:      c.Peers.IPv6Prefix,
		Exempt:          exempt,
		MaxTracked:      c.Peers.MaxTracked,
		ArweaveVersion:  c.Arweave.Version,
	}, nil
}

// Redacted returns a deep copy of c with the secrets (admin.token and
// cluster.redis.password, cluster.redis.sentinel.password), when set,
// replaced by "REDACTED", for printing.
func (c *Config) Redacted() *Config {
	r := c.clone()
	if r.Admin.Token != "" {
		r.Admin.Token = "REDACTED"
	}
	for i := range r.Admin.Tokens {
		if r.Admin.Tokens[i].Token != "" {
			r.Admin.Tokens[i].Token = "REDACTED"
		}
	}
	if r.Cluster.Redis.Password != "" {
		r.Cluster.Redis.Password = "REDACTED"
	}
	if r.Cluster.Redis.Sentinel.Password != "" {
		r.Cluster.Redis.Sentinel.Password = "REDACTED"
	}
	return r
}

// clone returns a deep copy of c.
func (c *Config) clone() *Config {
	r := *c
	r.Admin.Tokens = slices.Clone(c.Admin.Tokens)
	r.Peers.TrustedProxies = slices.Clone(c.Peers.TrustedProxies)
	r.Peers.Exempt = slices.Clone(c.Peers.Exempt)
	r.Routes.ExemptPaths = slices.Clone(c.Routes.ExemptPaths)
	r.Routes.Rules = nil
	for _, rule := range c.Routes.Rules {
		r.Routes.Rules = append(r.Routes.Rules, cloneRule(rule))
	}
	r.Groups = maps.Clone(c.Groups)
	r.Throttle.ExemptPeers = slices.Clone(c.Throttle.ExemptPeers)
	r.Throttle.ExemptPaths = slices.Clone(c.Throttle.ExemptPaths)
	r.Throttle.Rules = nil
	for _, rule := range c.Throttle.Rules {
		rule.Paths = slices.Clone(rule.Paths)
		r.Throttle.Rules = append(r.Throttle.Rules, rule)
	}
	r.Cluster.Redis.Addrs = slices.Clone(c.Cluster.Redis.Addrs)
	r.Cluster.Redis.Sentinel.Addrs = slices.Clone(c.Cluster.Redis.Sentinel.Addrs)
	return &r
}

// cloneRule returns a deep copy of r.
func cloneRule(r limiter.RouteRule) limiter.RouteRule {
	return limiter.RouteRule{
		Group:          r.Group,
		Paths:          slices.Clone(r.Paths),
		Methods:        slices.Clone(r.Methods),
		ReduceOnStatus: slices.Clone(r.ReduceOnStatus),
	}
}

// ThrottleConfig converts the [throttle] table into the outbound
// throttle's configuration, its patterns compiled by the core.
func (c *Config) ThrottleConfig() throttle.Config {
	t := throttle.Config{
		Compile: limiter.ThrottleMatcher,
		Mode:    c.Throttle.Mode,
		Period:  c.Throttle.Period, RetryInterval: c.Throttle.RetryInterval,
		ExemptPeers: c.Throttle.ExemptPeers, ExemptPaths: c.Throttle.ExemptPaths,
		DefaultType: c.Throttle.DefaultType, DefaultRPM: c.Throttle.DefaultRPM,
	}
	for _, r := range c.Throttle.Rules {
		t.Rules = append(t.Rules, throttle.Rule{Type: r.Type, RPM: r.RPM, Paths: r.Paths})
	}
	return t
}
