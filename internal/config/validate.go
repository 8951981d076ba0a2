package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// maxMillis bounds the integer-millisecond keys and the rates, as the
// limiter core bounds group settings: about 24 days, or two billion.
const maxMillis = 1<<31 - 1

// builder turns a decoded tree into a Config, recording every problem. A
// key absent from the tree (only when decoding it failed, since the
// embedded layer has every key) is skipped: its problem is already known.
type builder struct {
	p *problems
	t tree
}

func (b *builder) str(keys ...string) (string, bool) {
	s, ok := b.t.at(keys...).(string)
	return s, ok
}

func (b *builder) num(keys ...string) (int64, bool) {
	n, ok := b.t.at(keys...).(int64)
	return n, ok
}

func (b *builder) dur(keys ...string) (time.Duration, bool) {
	d, ok := b.t.at(keys...).(time.Duration)
	return d, ok
}

func (b *builder) strs(keys ...string) []string {
	s, _ := b.t.at(keys...).([]string)
	return slices.Clip(s)
}

// build validates t and returns the Config it describes; the Config is
// meaningful only when p holds no problem.
func build(p *problems, t tree) *Config {
	b := &builder{p: p, t: t}
	c := &Config{}

	// [server]
	if s, ok := b.str("server", "listen"); ok {
		c.Server.Listen = s
		checkHostPort(p, "server.listen", s)
	}
	if s, ok := b.str("server", "upstream"); ok {
		c.Server.Upstream = s
		checkUpstream(p, "server.upstream", s)
	}
	if s, ok := b.str("server", "data_dir"); ok {
		c.Server.DataDir = s
		if s == "" {
			p.add("server.data_dir", "must not be empty")
		}
	}
	if d, ok := b.dur("server", "shutdown_timeout"); ok {
		c.Server.ShutdownTimeout = d
		if d < 0 {
			p.addf("server.shutdown_timeout", "must be ≥ 0, got %s", d)
		}
	}
	b.buildDataPlane(&c.Server)
	if s, ok := b.str("server", "ratelimit_headers"); ok {
		set, err := ratelimit.ParseSet(s)
		if err != nil {
			p.addErr("server.ratelimit_headers", err.Error(), err)
		}
		c.Server.RateLimitHeaders = set
	}

	// [arweave], before the groups whose defaults and checks it decides.
	if s, ok := b.str("arweave", "version"); ok {
		v, err := limiter.ParseArweaveVersion(s)
		if err != nil {
			p.addErr("arweave.version", err.Error(), err)
		}
		c.Arweave.Version = v
	}

	// [log]
	b.logTable(c)

	// [admin]
	if s, ok := b.str("admin", "listen"); ok {
		c.Admin.Listen = s
		checkHostPort(p, "admin.listen", s)
		// Port 0 asks the kernel for a free port: two of them never clash.
		if s == c.Server.Listen && !strings.HasSuffix(s, ":0") {
			p.addf("admin.listen", "%q is also server.listen; the admin listener needs its own address", s)
		}
	}
	c.Admin.Token, _ = b.str("admin", "token")
	c.Admin.TokenFile, _ = b.str("admin", "token_file")
	if c.Admin.Token != "" && c.Admin.TokenFile != "" {
		p.add("admin.token_file", "set only one of admin.token and admin.token_file")
	}
	c.Admin.CheckLease = b.positiveDuration("admin", "check_lease")
	if n, ok := b.num("admin", "audit_max_entries"); ok {
		c.Admin.AuditMaxEntries = int(n)
		if n != 0 && (n < MinAuditEntries || n > MaxAuditEntries) {
			p.addf("admin.audit_max_entries", "must be 0 (keep every entry) or an integer from %d to %d, got %d", MinAuditEntries, MaxAuditEntries, n)
		}
	}
	c.Admin.Pprof, _ = b.t.at("admin", "pprof").(bool)
	if n, ok := b.num("admin", "max_conns"); ok {
		c.Admin.MaxConns = int(n)
		if n < 1 || n > 1<<24 {
			p.addf("admin.max_conns", "must be an integer from 1 to %d, got %d", 1<<24, n)
		}
	}
	b.tokens(c)

	// [peers]
	c.Peers.TrustedProxies = b.strs("peers", "trusted_proxies")
	parsePrefixes(p, "peers.trusted_proxies", c.Peers.TrustedProxies)
	if h, ok := b.str("peers", "forwarded_header"); ok {
		if _, err := peer.ParseForwardedHeader(h); err != nil {
			p.add("peers.forwarded_header", strings.TrimPrefix(err.Error(), "peers.forwarded_header: "))
		}
		c.Peers.ForwardedHeader = h
	}
	if len(c.Peers.TrustedProxies) > 0 && c.Peers.ForwardedHeader == "" {
		p.add("peers.forwarded_header", "must be set when peers.trusted_proxies is not empty: name the header your proxies write, x-forwarded-for or forwarded (the other is never believed)")
	}
	if n, ok := b.num("peers", "ipv6_prefix"); ok {
		c.Peers.IPv6Prefix = int(n)
		if (n < 1 || n > 120) && n != 128 {
			p.addf("peers.ipv6_prefix", "must be 1 to 120, or 128 for whole addresses, got %d", n)
		}
	}
	c.Peers.Exempt = b.strs("peers", "exempt")
	parsePrefixes(p, "peers.exempt", c.Peers.Exempt)
	if n, ok := b.num("peers", "max_tracked"); ok {
		c.Peers.MaxTracked = int(n)
		if n < 0 {
			p.addf("peers.max_tracked", "must be an integer ≥ 0 (0: no cap), got %d", n)
		}
	}

	// [snapshot]
	c.Snapshot.Interval = b.loopDuration(MinSnapshotInterval, "snapshot", "interval")

	// [http_api.limiter.*], before the routes that name the groups.
	groups, names := b.groups()
	c.Groups = groups
	checkVersion(p, c.Arweave.Version, groups)

	// [routes]
	c.Routes.ExemptPaths = b.strs("routes", "exempt_paths")
	for i, s := range c.Routes.ExemptPaths {
		if _, err := limiter.ParsePattern(s); err != nil {
			p.addErr(fmt.Sprintf("routes.exempt_paths[%d]", i), err.Error(), err)
		}
	}
	c.Routes.Rules = b.routeRules(names)

	// [throttle]
	if s, ok := b.str("throttle", "mode"); ok {
		m, err := throttle.ParseMode(s)
		if err != nil {
			p.addErr("throttle.mode", err.Error(), err)
		}
		c.Throttle.Mode = m
	}
	c.Throttle.Period = b.millis("throttle", "period")
	c.Throttle.RetryInterval = b.millis("throttle", "retry_interval")
	b.atLeast(c.Throttle.RetryInterval, MinRetryInterval, "throttle", "retry_interval")
	c.Throttle.ExemptPeers = b.strs("throttle", "exempt_peers")
	for i, s := range c.Throttle.ExemptPeers {
		if s == "" {
			p.add(fmt.Sprintf("throttle.exempt_peers[%d]", i), "must not be empty")
		}
	}
	c.Throttle.ExemptPaths = b.strs("throttle", "exempt_paths")
	for i, s := range c.Throttle.ExemptPaths {
		if _, err := limiter.ParseThrottlePattern(s); err != nil {
			p.addErr(fmt.Sprintf("throttle.exempt_paths[%d]", i), err.Error(), err)
		}
	}
	if s, ok := b.str("throttle", "default_type"); ok {
		c.Throttle.DefaultType = s
		if s == "" {
			p.add("throttle.default_type", "must not be empty")
		}
	}
	if n, ok := b.num("throttle", "default_rpm"); ok {
		c.Throttle.DefaultRPM = checkRPM(p, "throttle.default_rpm", n)
	}
	c.Throttle.Rules = b.throttleRules()

	// [cluster]
	c.Cluster.Backend = b.oneOf("cluster.backend", "local", "redis")
	c.Cluster.Mode = b.oneOf("cluster.mode", "strict", "local_first")
	c.Cluster.OnFailure = b.oneOf("cluster.on_failure", "open", "closed", "local")
	c.Cluster.SyncInterval = b.loopDuration(MinSyncInterval, "cluster", "sync_interval")
	c.Cluster.Timeout = b.positiveDuration("cluster", "timeout")
	c.Cluster.Lease = b.positiveDuration("cluster", "lease")
	if c.Cluster.Lease > 0 && c.Cluster.Lease < time.Second {
		p.addf("cluster.lease", "must be at least 1s (it is renewed every third of it), got %s", c.Cluster.Lease)
	}
	if c.Cluster.Timeout > 0 && c.Cluster.Lease > 0 && c.Cluster.Timeout > c.Cluster.Lease/3 {
		p.addf("cluster.timeout", "must be at most a third of cluster.lease (%s), got %s", c.Cluster.Lease/3, c.Cluster.Timeout)
	}
	if n, ok := b.num("cluster", "max_unsynced"); ok {
		c.Cluster.MaxUnsynced = int(n)
		if n < 0 || n > maxMillis {
			p.addf("cluster.max_unsynced", "must be an integer from 0 to %d, got %d", maxMillis, n)
		}
	}
	c.Cluster.Redis.Addrs = b.strs("cluster", "redis", "addrs")
	for i, s := range c.Cluster.Redis.Addrs {
		checkHostPort(p, fmt.Sprintf("cluster.redis.addrs[%d]", i), s)
	}
	if c.Cluster.Backend == "redis" && len(c.Cluster.Redis.Addrs) == 0 {
		p.add("cluster.redis.addrs", `at least one address is needed when cluster.backend is "redis"`)
	}
	c.Cluster.Redis.Username, _ = b.str("cluster", "redis", "username")
	c.Cluster.Redis.Password, _ = b.str("cluster", "redis", "password")
	if n, ok := b.num("cluster", "redis", "db"); ok {
		c.Cluster.Redis.DB = int(n)
		if n < 0 || n > maxMillis {
			p.addf("cluster.redis.db", "must be an integer from 0 to %d, got %d", maxMillis, n)
		}
	}
	return c
}

// positiveDuration returns the duration at keys, checking that it is > 0.
func (b *builder) positiveDuration(keys ...string) time.Duration {
	d, ok := b.dur(keys...)
	if ok && d <= 0 {
		b.p.addf(strings.Join(keys, "."), "must be a duration > 0, got %s", d)
	}
	return d
}

// millis returns the integer milliseconds at keys as a duration, checking
// that they are > 0.
func (b *builder) millis(keys ...string) time.Duration {
	n, ok := b.num(keys...)
	if !ok {
		return 0
	}
	if n < 1 || n > maxMillis {
		b.p.addf(strings.Join(keys, "."), "must be an integer number of milliseconds from 1 to %d, got %d", maxMillis, n)
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// oneOf returns the string at the dotted key, checking that it is one of
// allowed.
func (b *builder) oneOf(key string, allowed ...string) string {
	s, ok := b.str(strings.Split(key, ".")...)
	if ok && !slices.Contains(allowed, s) {
		b.p.addf(key, "must be one of %s, got %q", strings.Join(allowed, ", "), s)
	}
	return s
}

// checkRPM checks a rate in requests per minute.
func checkRPM(p *problems, key string, n int64) int {
	if n < 0 || n > maxMillis {
		p.addf(key, "must be an integer from 0 to %d requests per minute, got %d", maxMillis, n)
		return 0
	}
	return int(n)
}

// groups resolves the group tables. It returns the settings (nil after a
// problem) and the names of all group tables, valid or not, so that the
// route rules can be checked against them without cascading errors.
func (b *builder) groups() (map[string]limiter.GroupSettings, []string) {
	all, ok := b.t.at("http_api", "limiter").(tree)
	if !ok {
		return nil, []string{limiter.GroupGeneral}
	}
	names := sortedKeys(all)
	before := len(b.p.errs)
	tables := make(map[string]limiter.PartialGroup, len(all))
	for _, name := range names {
		// The core's own check of the name (and of local_peers).
		if _, err := limiter.ResolveGroups(map[string]limiter.PartialGroup{name: {}}); err != nil {
			b.p.addCore(err)
			continue
		}
		g, _ := all[name].(tree)
		tables[name] = partialGroup(b.p, name, g)
	}
	if _, ok := all[limiter.GroupGeneral]; !ok {
		b.p.add("http_api.limiter.general", "the general group is required")
	}
	if len(b.p.errs) > before {
		return nil, names
	}
	groups, err := limiter.ResolveGroups(tables)
	if err != nil {
		b.p.addCore(err)
		return nil, names
	}
	return groups, names
}

// partialGroup converts one group table, checking each key on its own
// against the core's validation, so that every bad key is reported.
func partialGroup(p *problems, name string, g tree) limiter.PartialGroup {
	pg := limiter.PartialGroup{}
	// A known-good base: a key that fails over it is the one bad. Its
	// algorithm is the table's, else one that takes every key (whether an
	// inherited algorithm takes it is ResolveGroups' to say).
	base := limiter.ArweaveGroups()[limiter.GroupGeneral]
	base.Algorithm, base.Limit, base.Period = algo.TokenBucket, 1, 1000
	if v, ok := g[limiter.KeyAlgorithm]; ok {
		one := limiter.PartialGroup{limiter.KeyAlgorithm: v}
		if err := one.Check(func(key string) string { return limiter.GroupField(name, key) }); err != nil {
			p.addCore(err)
		} else {
			pg[limiter.KeyAlgorithm], base = v, one.Over(base)
		}
	}
	for _, k := range limiter.GroupKeyTable() {
		v, ok := g[k.Name]
		if !ok || k.Name == limiter.KeyAlgorithm {
			continue
		}
		if _, err := (limiter.PartialGroup{k.Name: v}).Resolve(name, base); err != nil {
			p.addCore(err)
			continue
		}
		pg[k.Name] = v
	}
	return pg
}

// routeRules converts and checks the [[routes.rule]] tables: each with
// limiter.NewRouteTable, so that every bad rule is reported, and each
// group against the group tables.
func (b *builder) routeRules(groups []string) []limiter.RouteRule {
	list, _ := b.t.at("routes", "rule").([]tree)
	var rules []limiter.RouteRule
	for i, rt := range list {
		key := fmt.Sprintf("routes.rule[%d]", i)
		var r limiter.RouteRule
		var ok bool
		complete := true
		if r.Group, ok = rt["group"].(string); !ok {
			complete = false
			if _, present := rt["group"]; !present {
				b.p.add(key+".group", "required")
			}
		}
		if r.Paths, ok = rt["paths"].([]string); !ok {
			complete = false
			if _, present := rt["paths"]; !present {
				b.p.add(key+".paths", "required")
			}
		}
		r.Methods, _ = rt["methods"].([]string)
		if ns, ok := rt["reduce_on_status"].([]int64); ok {
			for _, n := range ns {
				// NewRouteTable checks the range; keep a huge n huge.
				r.ReduceOnStatus = append(r.ReduceOnStatus, int(max(min(n, math.MaxInt32), math.MinInt32)))
			}
		}
		rules = append(rules, r)
		if !complete {
			continue
		}
		if _, err := limiter.NewRouteTable([]limiter.RouteRule{r}); err != nil {
			var fe *limiter.FieldError
			if errors.As(err, &fe) {
				k := key + strings.TrimPrefix(fe.Field, "routes.rule[0]")
				b.p.addErr(k, fe.Problem, fe.Err)
			} else {
				b.p.addCore(err)
			}
			continue
		}
		switch {
		case r.Group == limiter.GroupLocalPeers:
			b.p.add(key+".group", `local_peers is the built-in group of exempt peers and cannot be routed to; use routes.exempt_paths to let paths bypass the limiter`)
		case !slices.Contains(groups, r.Group):
			b.p.addf(key+".group", "unknown group %q: no [http_api.limiter.%s] table", r.Group, r.Group)
		}
	}
	return rules
}

// throttleRules converts and checks the [[throttle.rule]] tables.
func (b *builder) throttleRules() []ThrottleRule {
	list, _ := b.t.at("throttle", "rule").([]tree)
	var rules []ThrottleRule
	for i, rt := range list {
		key := fmt.Sprintf("throttle.rule[%d]", i)
		var r ThrottleRule
		if s, ok := rt["type"].(string); ok {
			r.Type = s
			if s == "" {
				b.p.add(key+".type", "must not be empty")
			}
		} else if _, present := rt["type"]; !present {
			b.p.add(key+".type", "required")
		}
		if n, ok := rt["rpm"].(int64); ok {
			r.RPM = checkRPM(b.p, key+".rpm", n)
		} else if _, present := rt["rpm"]; !present {
			b.p.add(key+".rpm", "required")
		}
		if ps, ok := rt["paths"].([]string); ok {
			r.Paths = ps
			if len(ps) == 0 {
				b.p.add(key+".paths", "at least one pattern")
			}
			for j, s := range ps {
				if _, err := limiter.ParseThrottlePattern(s); err != nil {
					b.p.addErr(fmt.Sprintf("%s.paths[%d]", key, j), err.Error(), err)
				}
			}
		} else if _, present := rt["paths"]; !present {
			b.p.add(key+".paths", "required")
		}
		rules = append(rules, r)
	}
	return rules
}

// parsePrefixes parses an address list with limiter.ParsePrefix, recording
// a problem per bad item.
func parsePrefixes(p *problems, key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range list {
		pr, err := peer.ParsePrefix(s)
		if err != nil {
			p.addErr(fmt.Sprintf("%s[%d]", key, i), err.Error(), err)
			continue
		}
		out = append(out, pr)
	}
	return out
}

// checkHostPort checks a listen or dial address: host:port, the host
// possibly empty (all interfaces), the port a number from 0 to 65535.
func checkHostPort(p *problems, key, s string) {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		p.addf(key, `must be host:port, such as "127.0.0.1:1986" or "[::1]:1986", got %q`, s)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		p.addf(key, "port %q of %q is not a number from 0 to 65535", port, s)
	}
}

// checkUpstream checks the node's URL: absolute, http or https, with a
// host, without query or fragment.
func checkUpstream(p *problems, key, s string) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		p.addErr(key, fmt.Sprintf("must be an absolute http:// or https:// URL, got %q: %v", s, errors.Unwrap(err)), err)
	case u.Scheme != "http" && u.Scheme != "https":
		p.addf(key, "must be an absolute http:// or https:// URL, got %q", s)
	case u.Hostname() == "":
		p.addf(key, "must be an absolute http:// or https:// URL with a host, got %q", s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		p.addf(key, "must not have a query or a fragment, got %q", s)
	}
}

// addCore records an error of the limiter core under the key it names
// (a *limiter.FieldError's field, else the text before ": ").
func (p *problems) addCore(err error) {
	var fe *limiter.FieldError
	if errors.As(err, &fe) && fe.Field != "" {
		p.addErr(fe.Field, fe.Problem, err)
		return
	}
	if key, problem, ok := strings.Cut(err.Error(), ": "); ok && !strings.Contains(key, " ") {
		p.addErr(key, problem, err)
		return
	}
	p.addErr("http_api.limiter", err.Error(), err)
}
