package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// Change says when a new value of a key takes effect.
type Change uint8

// The ways a key changes.
const (
	// Restart: the daemon reads the key at start only; a reload that
	// changes it says so and keeps the running value.
	Restart Change = iota + 1
	// Reload: a reload of the configuration (SIGHUP) applies it.
	Reload
	// Live: a reload applies it, and a live edit through the admin API
	// (PATCH /api/v1/groups/{group}) may change it.
	Live
)

var changeNames = [...]string{Restart: "restart", Reload: "reload", Live: "live"}

// String returns "restart", "reload" or "live".
func (c Change) String() string { return changeNames[c] }

// Type is the type of a key's value, as a file writes it.
type Type uint8

// The types of keys.
const (
	// String is a TOML string.
	String Type = iota + 1
	// Int is a TOML integer.
	Int
	// Bool is true or false.
	Bool
	// Duration is a Go duration string, "5s".
	Duration
	// Millis is an integer number of milliseconds.
	Millis
	// Size is a size string, "64MiB" (ParseSize).
	Size
	// Strings is an array of strings.
	Strings
	// Ints is an array of integers.
	Ints
	// Tables is an array of tables ([[name]]), whose keys are the keys
	// named name.<key>.
	Tables
	// Groups is a table of group tables ([http_api.limiter.<group>]),
	// whose keys are the keys named http_api.limiter.<group>.<key>.
	Groups
)

var typeNames = [...]string{String: "string", Int: "integer", Bool: "boolean", Duration: "duration",
	Millis: "integer (ms)", Size: "size", Strings: "array of strings", Ints: "array of integers",
	Tables: "array of tables", Groups: "tables"}

// String returns the type's name, for a person: "integer (ms)".
func (t Type) String() string { return typeNames[t] }

// Value is one of the values a key allows, with what it means when that
// needs saying.
type Value struct {
	Name string
	Help string
}

// Key is one key of the configuration: a row of Keys.
type Key struct {
	// Name is the dotted name, "server.listen". Below http_api.limiter,
	// "<group>" stands for the name of a group; below an array of tables,
	// the table's name is the array's ("routes.rule.group").
	Name string
	Type Type
	// Default is the shipped value as a file writes it (a string, an
	// int64, a bool, a []string), nil when there is none: the empty
	// arrays of tables, the shipped route and throttle rules, a group
	// key (each shipped group has its own, limiter.ArweaveGroups).
	Default any
	// Values are the values a string key allows (nil: any string the
	// key's checks pass).
	Values []Value
	// Bounds says, in words, what else a value must be: "1 to 16777216",
	// "≥ 1s", "host:port".
	Bounds string
	// Help says what the key does, in one line.
	Help string
	// Change says when a new value takes effect.
	Change Change
	// Alias, for an Arweave 2.9.7 name of a group key, is the key it
	// stands for (renamed before the layers merge).
	Alias string
	// Group, for a key of a group table, is the core's description of
	// it: its type and bounds.
	Group *limiter.GroupKey

	// build checks v, the key's value decoded as its Type, and sets the
	// Config's field; nil for a key its table builds (the keys of an
	// array of tables or of a group).
	build func(b *builder, key string, v any)
	// get returns the Config's value as a file writes it; nil for an
	// array of tables and the groups, printed by print.
	get func(c *Config) any
	// print writes an array of tables or the groups' tables.
	print func(w *tomlWriter, c *Config)
	// after checks the key against others, once it is built.
	after func(b *builder)
}

// groupPrefix is the name of the group keys' table, "<group>" standing
// for the group's name.
const groupPrefix = "http_api.limiter.<group>"

// keys is the configuration: every key, in the order of config.toml (the
// groups before the routes that name them), and the one place each key is
// declared. The decoding of the merged layers and of the environment
// (schema), the validation and the typed Config (build), the effective
// configuration's TOML and the dashboard's help of the group keys
// (GroupKeyHelp) are derived from it; config.toml's key lines and
// docs/config.md's key reference are written from it, and the live edits'
// vocabulary checked against it, by the tests (go test -update writes).
var keys = buildKeys()

// Keys returns every key of the configuration, in the order of
// config.toml. The slice is new on every call.
func Keys() []Key { return slices.Clone(keys) }

// buildKeys returns the rows of keys.
func buildKeys() []Key {
	const restart, reload = Restart, Reload
	ks := []Key{
		str("server.listen", "0.0.0.0:1985", restart, "host:port of the public listener (the proxy in front of the node); under socket activation, limiterd.socket's first address must be the same",
			func(c *Config) *string { return &c.Server.Listen }, hostPort),
		str("server.upstream", "http://127.0.0.1:1984", restart, "absolute http(s) URL of the node's HTTP API",
			func(c *Config) *string { return &c.Server.Upstream }, upstreamURL),
		str("server.data_dir", "data", restart, "directory of the bbolt file <data_dir>/limiterd.db (relative: to this file's directory; -data-dir and the environment: to the working directory)",
			func(c *Config) *string { return &c.Server.DataDir }, nonEmpty),
		dur("server.shutdown_timeout", "15s", restart, `on SIGTERM/SIGINT, how long in-flight requests may drain ("0s": do not wait; a second signal stops at once)`,
			func(c *Config) *time.Duration { return &c.Server.ShutdownTimeout }, notNegative),
		word("server.ratelimit_headers", "both", reload, "rate-limit fields of limited replies",
			[]Value{{"ietf", "RateLimit-Policy and RateLimit"}, {"arweave", "the four ratelimit-* fields 2.9.7 nodes pace by"}, {"both", ""}, {"none", ""}},
			ratelimit.ParseSet, func(c *Config) *ratelimit.Set { return &c.Server.RateLimitHeaders }),
		size("server.max_request_body", "64MiB", restart, "a request body larger than this is answered 413, never buffered whole",
			func(c *Config) *int64 { return &c.Server.MaxRequestBody }),
		dur("server.read_header_timeout", "10s", restart, "a client slower than this to send a request's line and headers gets 408 and is cut off",
			func(c *Config) *time.Duration { return &c.Server.ReadHeaderTimeout }, positive),
		dur("server.idle_timeout", "120s", restart, "a keep-alive connection with no new request for this long is closed",
			func(c *Config) *time.Duration { return &c.Server.IdleTimeout }, positive),
		dur("server.client_body_timeout", "60s", restart, "a request body that stalls this long between two reads gets 408 and is cut off",
			func(c *Config) *time.Duration { return &c.Server.ClientBodyTimeout }, positive),
		dur("server.send_timeout", "60s", restart, "an answer the client stops reading for this long is cut off (no bound on the whole answer)",
			func(c *Config) *time.Duration { return &c.Server.SendTimeout }, positive),
		dur("server.upstream_connect_timeout", "5s", restart, "connecting to the node (or waiting for a free connection to it): 504 beyond",
			func(c *Config) *time.Duration { return &c.Server.UpstreamConnectTimeout }, positive),
		dur("server.upstream_header_timeout", "60s", restart, "the node's first byte of an answer once the request is sent: 504 beyond",
			func(c *Config) *time.Duration { return &c.Server.UpstreamHeaderTimeout }, positive),
		dur("server.upstream_read_timeout", "60s", restart, "a node that stalls this long mid-answer (or mid-upload) has the exchange cut off, freeing the slot",
			func(c *Config) *time.Duration { return &c.Server.UpstreamReadTimeout }, positive),
		num("server.upstream_max_conns", 1024, restart, "connections to the node, busy and idle (requests wait up to upstream_connect_timeout for one)",
			func(c *Config) *int { return &c.Server.UpstreamMaxConns }, between(1, maxConns, "")),
		num("server.max_conns", 16384, restart, "open client connections; more are answered 503 and closed (lowered to fit the open-files limit)",
			func(c *Config) *int { return &c.Server.MaxConns }, between(1, maxConns, "")),
		num("server.max_conns_per_ip", 512, restart, "open connections of one client address (IPv6: its peers.ipv6_prefix); more get 429 and are closed; trusted proxies and exempt peers are not capped; 0: no cap",
			func(c *Config) *int { return &c.Server.MaxConnsPerIP }, between(0, maxConns, "")),
		flag("server.http2", true, restart, "serve a connection that opens with the HTTP/2 preface as cleartext HTTP/2 (h2c, prior knowledge), on the same port; false: answer it 400, as HTTP/1.1",
			func(c *Config) *bool { return &c.Server.HTTP2 }),
		num("server.http2_max_concurrent_streams", 100, restart, "streams open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS); each stream is a request, and each beyond the first of a connection counts toward max_conns_per_ip",
			func(c *Config) *int { return &c.Server.HTTP2MaxConcurrentStreams }, between(1, maxConns, "")),
		sizeBetween("server.http2_max_header_list_size", "64KiB", restart, "a request whose decoded header list is larger is answered 431 (SETTINGS_MAX_HEADER_LIST_SIZE)",
			func(c *Config) *int64 { return &c.Server.HTTP2MaxHeaderListSize }, 1<<10, 16<<20),
		num("server.http2_conn_stream_rate", 1000, restart, "new streams per second one HTTP/2 connection may open, with a burst of as many; beyond, GOAWAY ENHANCE_YOUR_CALM",
			func(c *Config) *int { return &c.Server.HTTP2ConnStreamRate }, between(1, maxConns, "")),
		num("server.http2_peer_stream_rate", 2000, restart, "the same over all the HTTP/2 connections of one client address (keyed as max_conns_per_ip; trusted proxies and exempt peers are free of it); 0: no limit",
			func(c *Config) *int { return &c.Server.HTTP2PeerStreamRate }, between(0, maxConns, "")),
		oneOf("server.upstream_protocol", "http1", restart, "how the node is reached, for HTTP/1.1 requests and HTTP/2 streams alike (the node accepts both)",
			func(c *Config) *string { return &c.Server.UpstreamProtocol },
			Value{"http1", "HTTP/1.1, a pool of keep-alive connections"}, Value{"h2c", "cleartext HTTP/2 (prior knowledge), requests multiplexed"}),
		sizeBetween("server.answer_memory", "512KiB", restart, "memory one answer of the node may be held in while its client reads it slower than the node sends it; 0: none (with answer_disk 0 too, answers are not buffered and a slow client holds the node's connection)",
			func(c *Config) *int64 { return &c.Server.AnswerMemory }, 0, 1<<30),
		sizeBetween("server.answer_memory_total", "128MiB", restart, "memory all the answers held may take together; beyond, they go to temporary files",
			func(c *Config) *int64 { return &c.Server.AnswerMemoryTotal }, 0, 64<<30),
		sizeBetween("server.answer_disk", "1GiB", restart, "bytes of one answer held in a temporary file past answer_memory; beyond, the answer waits for its client, holding the node's connection; 0: no temporary files",
			func(c *Config) *int64 { return &c.Server.AnswerDisk }, 0, 1024<<30),
		sizeBetween("server.answer_disk_total", "4GiB", restart, "bytes all the temporary files of answers may hold together",
			func(c *Config) *int64 { return &c.Server.AnswerDiskTotal }, 0, 1024<<30),
		str("server.answer_temp_dir", "", restart, `directory of the answers' temporary files, each removed from it as soon as it is made ("": the system's, $TMPDIR or /tmp)`,
			func(c *Config) *string { return &c.Server.AnswerTempDir }, absOrEmpty),

		word("arweave.version", "2.9.6", reload, "which Arweave node's limiter to reproduce, with its group defaults (see the groups below)",
			[]Value{{"2.9.6", ""}, {"2.9.7", ""}}, limiter.ParseArweaveVersion, func(c *Config) *limiter.ArweaveVersion { return &c.Arweave.Version }),

		oneOf("log.format", "text", restart, "the log's format (log/slog, to standard error: journald under systemd)",
			func(c *Config) *string { return &c.Log.Format }, Value{"text", ""}, Value{"json", ""}),
		oneOf("log.level", "info", reload, "the least severe level logged",
			func(c *Config) *string { return &c.Log.Level }, Value{"debug", ""}, Value{"info", ""}, Value{"warn", ""}, Value{"error", ""}),
		oneOf("log.rejections", "sampled", reload, "which 429s and 403s are logged",
			func(c *Config) *string { return &c.Log.Rejections },
			Value{"off", ""}, Value{"sampled", "at most one line per peer and group a minute, with the count"}, Value{"all", ""}),

		after(str("admin.listen", "127.0.0.1:1986", restart, "host:port of the dashboard, /api/v1, /metrics, /healthz, /readyz; under socket activation, limiterd.socket's second address must be the same",
			func(c *Config) *string { return &c.Admin.Listen }, hostPort), func(b *builder) {
			// Port 0 asks the kernel for a free port: two of them never clash.
			if s := b.c.Admin.Listen; s != "" && s == b.c.Server.Listen && !strings.HasSuffix(s, ":0") {
				b.p.addf("admin.listen", "%q is also server.listen; the admin listener needs its own address", s)
			}
		}),
		str("admin.token", "", reload, "bearer token of scope admin; empty (and no token_file): one is generated on first start and stored in <data_dir>/admin.token (mode 0600; the log names the file, never the token)",
			func(c *Config) *string { return &c.Admin.Token }),
		after(str("admin.token_file", "", reload, "file holding the bearer token of scope admin instead (not readable by every user, at least 24 characters; relative: to this file's directory); set at most one of token and token_file, and one of them when listen is not a loopback address",
			func(c *Config) *string { return &c.Admin.TokenFile }), func(b *builder) {
			if b.c.Admin.Token != "" && b.c.Admin.TokenFile != "" {
				b.p.add("admin.token_file", "set only one of admin.token and admin.token_file")
			}
		}),
		dur("admin.check_lease", "30s", restart, "an in-flight slot taken by /api/v1/check is released after this if the caller does not",
			func(c *Config) *time.Duration { return &c.Admin.CheckLease }, positive),
		num("admin.audit_max_entries", 1_000_000, reload, "the audit log keeps the newest this many entries (about 200 bytes each), removing the oldest as new ones are written; 0 keeps every entry",
			func(c *Config) *int { return &c.Admin.AuditMaxEntries }, zeroOrBetween(MinAuditEntries, MaxAuditEntries, "keep every entry")),
		num("admin.max_conns", 1024, restart, "open connections to the admin listener at most (about 16 KiB each); at the cap a new one closes the keep-alive connection idle the longest, or is answered 503",
			func(c *Config) *int { return &c.Admin.MaxConns }, between(1, maxConns, "")),
		num("admin.expensive_calls", 0, restart, "expensive admin calls run at once (audit queries, peer searches, the what-if, the pages that grow with the tables); more wait up to 5s, then 503; 0: a quarter of the cores, at least 1",
			func(c *Config) *int { return &c.Admin.ExpensiveCalls }, between(0, 1024, "")),
		dur("admin.expensive_call_timeout", "10s", restart, "how long one expensive admin call may run before it is cut short",
			func(c *Config) *time.Duration { return &c.Admin.ExpensiveCallTimeout }, positive),
		dur("admin.now_window", "30s", reload, `what the dashboard's "who is hammering now", the fleet's rates and GET /api/v1/overview cover: the last this much`,
			func(c *Config) *time.Duration { return &c.Admin.NowWindow }, nowWindow),
		flag("admin.pprof", false, reload, "serve the Go runtime's profiles at /debug/pprof/ (heap, goroutine, profile, trace…) to tokens of scope admin, for diagnosing memory or CPU",
			func(c *Config) *bool { return &c.Admin.Pprof }),
		{Name: "admin.tokens", Type: Tables, Change: reload, Help: "more bearer tokens, each with a name and a scope; give nginx and the throttle client a data token",
			build: buildTokens, print: printTokens, after: checkAdminExposure},
		tableKey("admin.tokens.name", String, "shown in the audit log as token:<name>: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit; unique"),
		{Name: "admin.tokens.scope", Type: String, Help: "what the token may do",
			Values: []Value{{ScopeAdmin, "everything"}, {ScopeRead, "every GET and the dashboard, read-only"},
				{ScopeData, "only the calls a node and its proxies make: check, release, check/auth, throttle, throttle/observe"}}},
		tableKey("admin.tokens.token", String, "the secret, at least 24 characters"),
		tableKey("admin.tokens.token_file", String, "the file holding the secret instead (not readable by every user; relative: to this file's directory)"),

		strs("peers.trusted_proxies", []string{}, reload, "IPs or CIDRs whose forwarding header (forwarded_header, below) is believed",
			func(c *Config) *[]string { return &c.Peers.TrustedProxies }, prefix),
		after(word("peers.forwarded_header", "", reload, "the one header those proxies write (required with trusted_proxies; the other is never read)",
			[]Value{{"x-forwarded-for", ""}, {"forwarded", ""}}, parseForwardedHeader, func(c *Config) *string { return &c.Peers.ForwardedHeader }), func(b *builder) {
			if len(b.c.Peers.TrustedProxies) > 0 && b.c.Peers.ForwardedHeader == "" {
				b.p.addErr("peers.forwarded_header", "must be set when peers.trusted_proxies is not empty: name the header your proxies write, x-forwarded-for or forwarded (the other is never believed)", upgradeForwardedHeader)
			}
		}),
		num("peers.ipv6_prefix", 64, reload, "bits; IPv6 peers are keyed by this prefix (128: the whole address)",
			func(c *Config) *int { return &c.Peers.IPv6Prefix }, ipv6Prefix),
		strs("peers.exempt", []string{"127.0.0.1"}, reload, "IPs or CIDRs in the built-in group local_peers: never limited, never tracked",
			func(c *Config) *[]string { return &c.Peers.Exempt }, prefix),
		num("peers.max_tracked", 1_000_000, reload, "cap on tracked (peer, group) entries; at the cap the lightest state goes first, then the idlest (0: no cap)",
			func(c *Config) *int { return &c.Peers.MaxTracked }, notNegativeInt("no cap")),

		dur("snapshot.interval", "5s", restart, "how often per-peer state is written to the database",
			func(c *Config) *time.Duration { return &c.Snapshot.Interval }, loop(MinSnapshotInterval)),

		{Name: "http_api.limiter", Type: Groups, Change: reload, Help: "one table per group, [http_api.limiter.<group>]",
			build: buildGroups, print: printGroups, after: checkVersion},
	}
	ks = append(ks, groupKeys()...)
	ks = append(ks,
		strs("routes.exempt_paths", []string{}, reload, `path patterns (segment globs or "re:" regexps) that bypass the rate limits (the deny list still applies)`,
			func(c *Config) *[]string { return &c.Routes.ExemptPaths }, pattern),
		Key{Name: "routes.rule", Type: Tables, Change: reload, Help: `route rules, in order: the first whose paths (and methods) match decides the request's group; no match: "general"`,
			build: buildRouteRules, print: printRouteRules},
		tableKey("routes.rule.group", String, "the group (a [http_api.limiter.<group>] table, or general)"),
		tableKey("routes.rule.paths", Strings, `patterns: "*" is one segment, a last "**" any number (zero included), "re:<regexp>" an unanchored Go regexp on the path`),
		tableKey("routes.rule.methods", Strings, "upper-case HTTP methods; empty or omitted: any method"),
		tableKey("routes.rule.reduce_on_status", Ints, "upstream statuses on which the request gives its leaky-bucket token back (manual reduction); empty: none"),

		word("throttle.mode", "fixed", reload, "how the outbound throttle paces the node's calls",
			[]Value{{"fixed", "the rule table below (ar_rate_limiter, 2.9.6)"}, {"adaptive", "each peer's quota learned from the ratelimit-* fields of its replies (2.9.7; POST /api/v1/throttle/observe)"}},
			throttle.ParseMode, func(c *Config) *throttle.Mode { return &c.Throttle.Mode }),
		millis("throttle.period", 30000, reload, "the window over which a peer's calls of one type are counted",
			func(c *Config) *time.Duration { return &c.Throttle.Period }, 0),
		millis("throttle.retry_interval", 1000, reload, "how often a waiting call is re-evaluated",
			func(c *Config) *time.Duration { return &c.Throttle.RetryInterval }, MinRetryInterval),
		strs("throttle.exempt_peers", []string{}, reload, `peer names (compared exactly, e.g. "1.2.3.4:1984") never throttled`,
			func(c *Config) *[]string { return &c.Throttle.ExemptPeers }, nonEmptyItem),
		strs("throttle.exempt_paths", []string{}, reload, `path patterns never throttled; "re:" patterns are case-insensitive here`,
			func(c *Config) *[]string { return &c.Throttle.ExemptPaths }, throttlePattern),
		str("throttle.default_type", "default", reload, "type of a path no rule matches",
			func(c *Config) *string { return &c.Throttle.DefaultType }, nonEmpty),
		num("throttle.default_rpm", 900, reload, "requests per minute of that type",
			func(c *Config) *int { return &c.Throttle.DefaultRPM }, rpm),
		Key{Name: "throttle.rule", Type: Tables, Change: reload, Help: "throttle rules, in order: the first rule with a matching path gives the call's type and its rate",
			build: buildThrottleRules, print: printThrottleRules},
		tableKey("throttle.rule.type", String, "the calls' type"),
		tableKey("throttle.rule.rpm", Int, "requests per minute: a peer may make max(1, floor((rpm div 2) * 80 / 100)) calls of the type per period"),
		tableKey("throttle.rule.paths", Strings, `path patterns, at least one; "re:" patterns are case-insensitive here`),

		oneOf("cluster.backend", "local", restart, "where the peers' state is kept",
			func(c *Config) *string { return &c.Cluster.Backend }, Value{"local", "this instance only"}, Value{"redis", "shared in Redis"}),
		oneOf("cluster.mode", "strict", restart, "with redis: how decisions use Redis",
			func(c *Config) *string { return &c.Cluster.Mode }, Value{"strict", "one atomic script per decision"}, Value{"local_first", "batched"}),
		oneOf("cluster.on_failure", "local", restart, "Redis down or slower than timeout",
			func(c *Config) *string { return &c.Cluster.OnFailure },
			Value{"open", "admits"}, Value{"closed", "rejects with 503"}, Value{"local", "decides locally"}),
		dur("cluster.sync_interval", "100ms", restart, "local_first: how often local admissions are pushed to Redis",
			func(c *Config) *time.Duration { return &c.Cluster.SyncInterval }, loop(MinSyncInterval)),
		dur("cluster.timeout", "50ms", restart, "the longest a request waits for Redis (at most a third of lease)",
			func(c *Config) *time.Duration { return &c.Cluster.Timeout }, positive),
		after(dur("cluster.lease", "10s", restart, "in-flight slots of an instance that died are freed after this",
			func(c *Config) *time.Duration { return &c.Cluster.Lease }, lease), func(b *builder) {
			if t, l := b.c.Cluster.Timeout, b.c.Cluster.Lease; t > 0 && l > 0 && t > l/3 {
				b.p.addf("cluster.timeout", "must be at most a third of cluster.lease (%s), got %s", l/3, t)
			}
		}),
		num("cluster.max_unsynced", 0, restart, "local_first: admissions per key an instance may make on one read of the shared state (0: no cap)",
			func(c *Config) *int { return &c.Cluster.MaxUnsynced }, between(0, maxMillis, "")),
		after(strs("cluster.redis.addrs", []string{"127.0.0.1:6379"}, restart, "host:port of each Redis server",
			func(c *Config) *[]string { return &c.Cluster.Redis.Addrs }, hostPortItem), func(b *builder) {
			if b.c.Cluster.Backend == "redis" && len(b.c.Cluster.Redis.Addrs) == 0 {
				b.p.add("cluster.redis.addrs", `at least one address is needed when cluster.backend is "redis"`)
			}
		}),
		str("cluster.redis.username", "", restart, "ACL user name (empty: none)",
			func(c *Config) *string { return &c.Cluster.Redis.Username }),
		str("cluster.redis.password", "", restart, "password (empty: none)",
			func(c *Config) *string { return &c.Cluster.Redis.Password }),
		after(str("cluster.redis.password_file", "", restart, "file holding the password, read at start and on SIGHUP (empty: none)",
			func(c *Config) *string { return &c.Cluster.Redis.PasswordFile }), func(b *builder) {
			if b.c.Cluster.Redis.Password != "" && b.c.Cluster.Redis.PasswordFile != "" {
				b.p.add("cluster.redis.password_file", "give cluster.redis.password or cluster.redis.password_file, not both")
			}
		}),
		num("cluster.redis.db", 0, restart, "database number",
			func(c *Config) *int { return &c.Cluster.Redis.DB }, between(0, maxMillis, "")),
		flag("cluster.redis.tls", false, restart, "connect to Redis (and the sentinels) over TLS",
			func(c *Config) *bool { return &c.Cluster.Redis.TLS }),
		str("cluster.redis.ca_file", "", restart, "PEM certificates that sign the server's (empty: the system's roots); re-read on SIGHUP",
			func(c *Config) *string { return &c.Cluster.Redis.CAFile }),
		str("cluster.redis.cert_file", "", restart, "PEM client certificate, for mutual TLS (with key_file); re-read on SIGHUP",
			func(c *Config) *string { return &c.Cluster.Redis.CertFile }),
		after(str("cluster.redis.key_file", "", restart, "PEM key of cert_file",
			func(c *Config) *string { return &c.Cluster.Redis.KeyFile }), func(b *builder) {
			if (b.c.Cluster.Redis.CertFile == "") != (b.c.Cluster.Redis.KeyFile == "") {
				b.p.add("cluster.redis.key_file", "cluster.redis.cert_file and cluster.redis.key_file go together: give both or neither")
			}
		}),
		str("cluster.redis.server_name", "", restart, "the name the server's certificate must hold (empty: the host of the address)",
			func(c *Config) *string { return &c.Cluster.Redis.ServerName }),
		flag("cluster.redis.insecure_skip_verify", false, restart, "accept any server certificate (refused unless allow_insecure_skip_verify)",
			func(c *Config) *bool { return &c.Cluster.Redis.InsecureSkipVerify }),
		after(flag("cluster.redis.allow_insecure_skip_verify", false, restart, "the explicit allowance insecure_skip_verify needs",
			func(c *Config) *bool { return &c.Cluster.Redis.AllowInsecureSkipVerify }), func(b *builder) {
			r := &b.c.Cluster.Redis
			if r.InsecureSkipVerify && !r.AllowInsecureSkipVerify {
				b.p.add("cluster.redis.insecure_skip_verify", "accepts any certificate, so anyone on the path can read and change the limiter's state: refused unless cluster.redis.allow_insecure_skip_verify = true says it is meant")
			}
			if !r.TLS {
				for _, k := range []struct {
					name string
					set  bool
				}{{"ca_file", r.CAFile != ""}, {"cert_file", r.CertFile != ""}, {"server_name", r.ServerName != ""}, {"insecure_skip_verify", r.InsecureSkipVerify}} {
					if k.set {
						b.p.addf("cluster.redis."+k.name, "needs cluster.redis.tls = true")
					}
				}
			}
		}),
		str("cluster.redis.sentinel.master_name", "", restart, "with Sentinel: the name of the master the sentinels watch (empty: no Sentinel)",
			func(c *Config) *string { return &c.Cluster.Redis.Sentinel.MasterName }),
		after(strs("cluster.redis.sentinel.addrs", []string{}, restart, "with Sentinel: host:port of each sentinel (cluster.redis.addrs is then not used)",
			func(c *Config) *[]string { return &c.Cluster.Redis.Sentinel.Addrs }, hostPortItem), func(b *builder) {
			st := &b.c.Cluster.Redis.Sentinel
			if st.MasterName != "" && len(st.Addrs) == 0 {
				b.p.add("cluster.redis.sentinel.addrs", "cluster.redis.sentinel.master_name needs at least one sentinel address")
			}
			if st.MasterName == "" && len(st.Addrs) > 0 {
				b.p.add("cluster.redis.sentinel.master_name", "cluster.redis.sentinel.addrs needs the master's name")
			}
		}),
		str("cluster.redis.sentinel.password", "", restart, "the sentinels' own password (empty: none)",
			func(c *Config) *string { return &c.Cluster.Redis.Sentinel.Password }),
	)
	return ks
}

// The help of the group keys, and who may change them: a live edit, but
// for the worker shards'. Their types and bounds are the core's
// (limiter.GroupKeyTable).
var groupHelp = map[string]struct {
	help   string
	values []Value
}{
	limiter.KeySlidingWindowLimit:    {help: "requests admitted per window without a token (0: every request takes a token)"},
	limiter.KeySlidingWindowDuration: {help: "ms; length of the sliding window"},
	limiter.KeyCleanupInterval:       {help: "ms; how often old window timestamps are dropped"},
	limiter.KeyCleanupExpiry:         {help: "ms; age past which a cleanup drops a timestamp (unused with 2.9.7: a cleanup drops what has left the window)"},
	limiter.KeyLeakyLimit:            {help: "tokens a peer may hold consumed (0: reject every window overflow)"},
	limiter.KeyLeakyTickInterval:     {help: "ms; how often consumed tokens leak away"},
	limiter.KeyLeakyTickReduction:    {help: "tokens removed per tick"},
	limiter.KeyConcurrencyLimit:      {help: `requests in flight per peer (per worker shard, all its peers, with concurrency_scope = "shard")`},
	limiter.KeyManualReductionOff:    {help: "true: reduce_on_status and the admin reduce call do nothing"},
	limiter.KeyMode: {help: "how the group applies its decisions",
		values: []Value{{"enforce", ""}, {"dry_run", "decide, count, never reject"}, {"off", ""}}},
	limiter.KeyAlgorithm: {help: `what decides after the concurrency check (docs/limiting.md, "Other algorithms")`, values: []Value{
		{"hybrid", "the Arweave node's window then leaky bucket (the keys above)"},
		{"token_bucket", "tokens refilled at limit/period, a bucket of burst"},
		{"gcra", "the same admissions, kept as one time (TAT)"},
		{"fixed_window", "limit per clock-aligned period (bursts of 2×limit at a boundary)"},
		{"sliding_log", "limit in any period ms; one timestamp per admission per peer"},
		{"sliding_window", "the estimate over the current and previous fixed windows"},
	}},
	limiter.KeyLimit:           {help: "requests per period (not the hybrid); sliding_log at most 10000"},
	limiter.KeyPeriod:          {help: "ms (not the hybrid); at most about 24.8 days"},
	limiter.KeyBurst:           {help: "token_bucket and gcra only: the bucket's size (0 or absent: = limit)"},
	limiter.KeyNumberOfWorkers: {help: "worker shards of the group (default 5, metrics 1)"},
	limiter.KeyConcurrencyScope: {help: "what concurrency_limit counts", values: []Value{
		{"peer", "the peer's requests in flight"}, {"shard", "those of every peer of its worker shard (2.9.7)"}}},
	limiter.KeyAdaptiveConcurrency: {help: `true: the group's requests in flight, all peers together, are limited by a limit that follows the node's latency (docs/limiting.md, "Adaptive concurrency")`},
	limiter.KeyAdaptiveAlgorithm: {help: "what sets the adaptive limit", values: []Value{
		{"gradient", "Envoy's gradient controller: (unloaded latency × (1 + buffer)) / the window's latency, the unloaded latency measured now and then at the minimum"}}},
	limiter.KeyAdaptiveMinLimit:      {help: "the adaptive limit's floor, and the limit while the unloaded latency is measured"},
	limiter.KeyAdaptiveMaxLimit:      {help: "the adaptive limit's ceiling"},
	limiter.KeyAdaptiveWindow:        {help: "ms; how often the adaptive limit is updated from the latencies of the window"},
	limiter.KeyAdaptivePercentile:    {help: "the percentile of a window's latencies the limit follows (50: the median)"},
	limiter.KeyAdaptiveBuffer:        {help: "percent above the unloaded latency that the window's latency may be before the limit shrinks"},
	limiter.KeyAdaptiveSmoothing:     {help: "percent of each window's step the limit takes (100: no smoothing)"},
	limiter.KeyAdaptiveProbeInterval: {help: "ms between two measurements of the node's unloaded latency (each starts up to 15 % later)"},
	limiter.KeyAdaptiveProbeSamples:  {help: "answers a measurement of the unloaded latency takes"},
}

// The 2.9.7 names a group table may use instead of the 2.9.6 keys
// (docs/arweave297.md), in the order config.toml lists them: the key each
// stands for and, for the two that do not mean the same value, what it
// means.
var aliases297 = []struct {
	name, key string
	help      string // "": the same value
}{
	{"leaky_rate_limit", limiter.KeyLeakyLimit, ""},
	{"leaky_tick_ms", limiter.KeyLeakyTickInterval, ""},
	{"tick_reduction", limiter.KeyLeakyTickReduction, ""},
	{"timestamp_cleanup_tick_ms", limiter.KeyCleanupInterval, ""},
	{"is_external_reduction_enabled", limiter.KeyManualReductionOff, "true is is_manual_reduction_disabled = false"},
	{"no_limit", limiter.KeyMode, `true is mode = "off", false mode = "enforce"`},
}

// groupKeys are the keys of a group table: the core's, then their 2.9.7
// names.
func groupKeys() []Key {
	var ks []Key
	general := limiter.ArweaveGroups()[limiter.GroupGeneral]
	for _, gk := range limiter.GroupKeyTable() {
		h, ok := groupHelp[gk.Name]
		if !ok {
			panic("config: no help for the group key " + gk.Name)
		}
		k := Key{Name: groupPrefix + "." + gk.Name, Group: &gk, Help: h.help, Values: h.values, Change: Live}
		if gk.Part == limiter.PartShards {
			k.Change = Reload
		}
		switch gk.Type {
		case limiter.IntKey:
			k.Type, k.Bounds = Int, fmt.Sprintf("%d to %d", gk.Min, gk.Max)
		case limiter.BoolKey:
			k.Type = Bool
		case limiter.WordKey:
			k.Type = String
			if k.Values == nil {
				for _, w := range gk.Words {
					k.Values = append(k.Values, Value{Name: w})
				}
			}
		}
		if v, _ := general.Value(gk.Name); v != int64(0) || gk.Part != limiter.PartLimits {
			k.Default = v
		}
		ks = append(ks, k)
	}
	for _, a := range aliases297 {
		canon := keyNamed(ks, groupPrefix+"."+a.key)
		k := Key{Name: groupPrefix + "." + a.name, Type: canon.Type, Bounds: canon.Bounds, Alias: a.key, Change: Reload,
			Help: "the Arweave 2.9.7 name of " + a.key}
		if a.help != "" {
			// Not the same value: both are booleans.
			k.Type, k.Bounds, k.Help = Bool, "", k.Help+": "+a.help
		}
		ks = append(ks, k)
	}
	return ks
}

// keyNamed returns the key of ks named name.
func keyNamed(ks []Key, name string) Key {
	i := slices.IndexFunc(ks, func(k Key) bool { return k.Name == name })
	if i < 0 {
		panic("config: no key " + name)
	}
	return ks[i]
}

// maxConns bounds the connection caps.
const maxConns = 1 << 24

// tableKey is a key of an array of tables, built by the array's key.
func tableKey(name string, t Type, help string) Key {
	return Key{Name: name, Type: t, Help: help}
}

// after returns k with check run once k is built.
func after(k Key, check func(b *builder)) Key {
	k.after = check
	return k
}

// A check of a string value, with what it asks in words.
type strCheck struct {
	bounds string
	check  func(p *problems, key, s string)
}

var (
	hostPort    = strCheck{"host:port", checkHostPort}
	upstreamURL = strCheck{"absolute http(s) URL", checkUpstream}
	nonEmpty    = strCheck{"not empty", func(p *problems, key, s string) {
		if s == "" {
			p.add(key, "must not be empty")
		}
	}}
	absOrEmpty = strCheck{"an absolute path or empty", func(p *problems, key, s string) {
		if s != "" && !filepath.IsAbs(s) {
			p.addf(key, "must be an absolute path or empty, got %q", s)
		}
	}}
)

// str is a string key held in the field at returns.
func str(name, def string, ch Change, help string, at func(*Config) *string, checks ...strCheck) Key {
	k := Key{Name: name, Type: String, Default: def, Change: ch, Help: help,
		build: func(b *builder, key string, v any) {
			s := v.(string)
			*at(b.c) = s
			for _, c := range checks {
				c.check(b.p, key, s)
			}
		},
		get: func(c *Config) any { return *at(c) },
	}
	for _, c := range checks {
		k.Bounds = joinWords(k.Bounds, c.bounds)
	}
	return k
}

// oneOf is a string key that is one of values.
func oneOf(name, def string, ch Change, help string, at func(*Config) *string, values ...Value) Key {
	var names []string
	for _, v := range values {
		names = append(names, v.Name)
	}
	return word(name, def, ch, help, values, func(s string) (string, error) {
		if !slices.Contains(names, s) {
			return s, fmt.Errorf("must be one of %s, got %q", strings.Join(names, ", "), s)
		}
		return s, nil
	}, at)
}

// word is a string key that parse turns into the value of the field at
// returns; its error is the problem.
func word[T comparable](name, def string, ch Change, help string, values []Value, parse func(string) (T, error), at func(*Config) *T) Key {
	return Key{Name: name, Type: String, Default: def, Change: ch, Help: help, Values: values,
		build: func(b *builder, key string, v any) {
			t, err := parse(v.(string))
			if err != nil {
				b.p.addErr(key, err.Error(), err)
			}
			*at(b.c) = t
		},
		get: func(c *Config) any { return fmt.Sprint(*at(c)) },
	}
}

// parseForwardedHeader checks peers.forwarded_header, "" included, and
// keeps it as written.
func parseForwardedHeader(s string) (string, error) {
	if _, err := peer.ParseForwardedHeader(s); err != nil {
		msg := strings.TrimPrefix(err.Error(), "peers.forwarded_header: ")
		if strings.EqualFold(s, "auto") {
			return s, &upgradeProblem{msg: msg, u: upgradeForwardedAuto}
		}
		return s, fmt.Errorf("%s", msg)
	}
	return s, nil
}

// A check of an integer value, with its bounds in words.
type intCheck struct {
	bounds string
	check  func(p *problems, key string, n int64)
}

// between allows lo to hi; unit follows the bounds in the problem.
func between(lo, hi int64, unit string) intCheck {
	return intCheck{fmt.Sprintf("%d to %d", lo, hi), func(p *problems, key string, n int64) {
		if n < lo || n > hi {
			p.addf(key, "must be an integer from %d to %d%s, got %d", lo, hi, unit, n)
		}
	}}
}

// zeroOrBetween allows 0, meaning zero, or lo to hi.
func zeroOrBetween(lo, hi int64, zero string) intCheck {
	return intCheck{fmt.Sprintf("0, or %d to %d", lo, hi), func(p *problems, key string, n int64) {
		if n != 0 && (n < lo || n > hi) {
			p.addf(key, "must be 0 (%s) or an integer from %d to %d, got %d", zero, lo, hi, n)
		}
	}}
}

// notNegativeInt allows 0, meaning zero, and more.
func notNegativeInt(zero string) intCheck {
	return intCheck{"≥ 0", func(p *problems, key string, n int64) {
		if n < 0 {
			p.addf(key, "must be an integer ≥ 0 (0: %s), got %d", zero, n)
		}
	}}
}

var (
	ipv6Prefix = intCheck{"1 to 120, or 128", func(p *problems, key string, n int64) {
		if (n < 1 || n > 120) && n != 128 {
			p.addf(key, "must be 1 to 120, or 128 for whole addresses, got %d", n)
		}
	}}
	rpm = between(0, maxMillis, " requests per minute")
)

// num is an integer key held in the field at returns.
func num(name string, def int64, ch Change, help string, at func(*Config) *int, c intCheck) Key {
	return Key{Name: name, Type: Int, Default: def, Change: ch, Help: help, Bounds: c.bounds,
		build: func(b *builder, key string, v any) {
			n := v.(int64)
			*at(b.c) = int(n)
			c.check(b.p, key, n)
		},
		get: func(c *Config) any { return int64(*at(c)) },
	}
}

// millis is an integer number of milliseconds from 1 to maxMillis, at
// least min when min > 0 (a loop's interval), held as a duration.
func millis(name string, def int64, ch Change, help string, at func(*Config) *time.Duration, min time.Duration) Key {
	bounds := fmt.Sprintf("1 to %d ms", maxMillis)
	if min > 0 {
		bounds = fmt.Sprintf("%d to %d ms", min.Milliseconds(), maxMillis)
	}
	return Key{Name: name, Type: Millis, Default: def, Change: ch, Help: help, Bounds: bounds,
		build: func(b *builder, key string, v any) {
			n := v.(int64)
			if n < 1 || n > maxMillis {
				b.p.addf(key, "must be an integer number of milliseconds from 1 to %d, got %d", maxMillis, n)
				*at(b.c) = 0
				return
			}
			d := time.Duration(n) * time.Millisecond
			*at(b.c) = d
			atLeast(b.p, key, d, min)
		},
		get: func(c *Config) any { return int64(*at(c) / time.Millisecond) },
	}
}

// A check of a duration, with its bounds in words.
type durCheck struct {
	bounds string
	check  func(p *problems, key string, d time.Duration)
}

var (
	positive = durCheck{"> 0", func(p *problems, key string, d time.Duration) {
		if d <= 0 {
			p.addf(key, "must be a duration > 0, got %s", d)
		}
	}}
	notNegative = durCheck{"≥ 0", func(p *problems, key string, d time.Duration) {
		if d < 0 {
			p.addf(key, "must be ≥ 0, got %s", d)
		}
	}}
	lease = durCheck{"≥ 1s", func(p *problems, key string, d time.Duration) {
		positive.check(p, key, d)
		if d > 0 && d < time.Second {
			p.addf(key, "must be at least 1s (it is renewed every third of it), got %s", d)
		}
	}}
)

// nowWindow bounds admin.now_window: whole 10 s steps (the top talkers'
// buckets, insight.TalkersBucket) from 10 s to their 5 minutes.
var nowWindow = durCheck{"10s to 5m, in steps of 10s", func(p *problems, key string, d time.Duration) {
	if d < 10*time.Second || d > 5*time.Minute || d%(10*time.Second) != 0 {
		p.addf(key, "must be 10s to 5m in steps of 10s, got %s", d)
	}
}}

// loop is a duration that drives a loop: > 0 and at least min.
func loop(min time.Duration) durCheck {
	return durCheck{"≥ " + min.String(), func(p *problems, key string, d time.Duration) {
		positive.check(p, key, d)
		atLeast(p, key, d, min)
	}}
}

// dur is a duration key held in the field at returns.
func dur(name, def string, ch Change, help string, at func(*Config) *time.Duration, c durCheck) Key {
	return Key{Name: name, Type: Duration, Default: def, Change: ch, Help: help, Bounds: c.bounds,
		build: func(b *builder, key string, v any) {
			d := v.(time.Duration)
			*at(b.c) = d
			c.check(b.p, key, d)
		},
		get: func(c *Config) any { return (*at(c)).String() },
	}
}

// size is a size key held, in bytes, in the field at returns.
func size(name, def string, ch Change, help string, at func(*Config) *int64) Key {
	return Key{Name: name, Type: Size, Default: def, Change: ch, Help: help, Bounds: "≥ 1 byte",
		build: func(b *builder, key string, v any) {
			s := v.(string)
			n, err := ParseSize(s)
			switch {
			case err != nil:
				b.p.add(key, err.Error())
			case n < 1:
				b.p.addf(key, "must be at least 1 byte, got %q", s)
			}
			*at(b.c) = n
		},
		get: func(c *Config) any { return FormatSize(*at(c)) },
	}
}

// sizeBetween is a size key from lo to hi bytes.
func sizeBetween(name, def string, ch Change, help string, at func(*Config) *int64, lo, hi int64) Key {
	return Key{Name: name, Type: Size, Default: def, Change: ch, Help: help, Bounds: FormatSize(lo) + " to " + FormatSize(hi),
		build: func(b *builder, key string, v any) {
			s := v.(string)
			n, err := ParseSize(s)
			switch {
			case err != nil:
				b.p.add(key, err.Error())
			case n < lo || n > hi:
				b.p.addf(key, "must be from %s to %s, got %q", FormatSize(lo), FormatSize(hi), s)
			}
			*at(b.c) = n
		},
		get: func(c *Config) any { return FormatSize(*at(c)) },
	}
}

// flag is a boolean key held in the field at returns.
func flag(name string, def bool, ch Change, help string, at func(*Config) *bool) Key {
	return Key{Name: name, Type: Bool, Default: def, Change: ch, Help: help,
		build: func(b *builder, _ string, v any) { *at(b.c) = v.(bool) },
		get:   func(c *Config) any { return *at(c) },
	}
}

// A check of each item of a list of strings, with what it asks in words.
type itemCheck struct {
	bounds string
	check  func(p *problems, key, s string)
}

var (
	prefix = itemCheck{"IPs or CIDRs", func(p *problems, key, s string) {
		if _, err := peer.ParsePrefix(s); err != nil {
			p.addErr(key, err.Error(), err)
		}
	}}
	pattern = itemCheck{"path patterns", func(p *problems, key, s string) {
		if _, err := limiter.ParsePattern(s); err != nil {
			p.addErr(key, err.Error(), err)
		}
	}}
	throttlePattern = itemCheck{"path patterns", func(p *problems, key, s string) {
		if _, err := limiter.ParseThrottlePattern(s); err != nil {
			p.addErr(key, err.Error(), err)
		}
	}}
	nonEmptyItem = itemCheck{"each not empty", nonEmpty.check}
	hostPortItem = itemCheck{"each host:port", checkHostPort}
)

// strs is a list of strings held in the field at returns, each checked.
func strs(name string, def []string, ch Change, help string, at func(*Config) *[]string, item itemCheck) Key {
	return Key{Name: name, Type: Strings, Default: def, Change: ch, Help: help, Bounds: item.bounds,
		build: func(b *builder, key string, v any) {
			list := slices.Clip(v.([]string))
			*at(b.c) = list
			for i, s := range list {
				item.check(b.p, fmt.Sprintf("%s[%d]", key, i), s)
			}
		},
		get: func(c *Config) any { return list(*at(c)) },
	}
}

// joinWords joins two descriptions with "; ".
func joinWords(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// Changed returns the keys whose value differs between a and b, of those
// that take a new value the way ch says (Restart: the keys a reload from
// a to b cannot apply), in the order of keys.
func Changed(a, b *Config, ch Change) []string {
	var out []string
	for _, k := range keys {
		if k.Change == ch && k.get != nil && !reflect.DeepEqual(k.get(a), k.get(b)) {
			out = append(out, k.Name)
		}
	}
	return out
}
