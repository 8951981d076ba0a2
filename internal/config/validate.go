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

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// maxMillis bounds the integer-millisecond keys and the rates, as the
// limiter core bounds group settings: about 24 days, or two billion.
const maxMillis = 1<<31 - 1

// builder turns a decoded tree into a Config, recording every problem.
type builder struct {
	p *problems
	t tree
	c *Config
}

// build validates t and returns the Config it describes, key by key in
// the order of keys: each key's checks, then its checks against the keys
// before it. A key absent from the tree (only when decoding it failed,
// since the embedded layer has every key) is skipped: its problem is
// already known. The Config is meaningful only when p holds no problem.
func build(p *problems, t tree) *Config {
	b := &builder{p: p, t: t, c: &Config{}}
	for _, k := range keys {
		if k.build != nil {
			if v := t.at(strings.Split(k.Name, ".")...); v != nil {
				k.build(b, k.Name, v)
			}
		}
		if k.after != nil {
			k.after(b)
		}
	}
	return b.c
}

// buildGroups resolves the group tables (http_api.limiter) with the
// core's ResolveGroups; Groups stays nil after a problem.
func buildGroups(b *builder, _ string, v any) {
	all, _ := v.(tree)
	before := len(b.p.errs)
	tables := make(map[string]limiter.PartialGroup, len(all))
	for _, name := range sortedKeys(all) {
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
		return
	}
	groups, err := limiter.ResolveGroups(tables)
	if err != nil {
		b.p.addCore(err)
		return
	}
	b.c.Groups = groups
}

// groupNames returns the names of all group tables, valid or not, so that
// the route rules can be checked against them without cascading errors.
func (b *builder) groupNames() []string {
	all, ok := b.t.at("http_api", "limiter").(tree)
	if !ok {
		return []string{limiter.GroupGeneral}
	}
	return sortedKeys(all)
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

// buildRouteRules converts and checks the [[routes.rule]] tables: each
// with limiter.NewRouteTable, so that every bad rule is reported, and each
// group against the group tables.
func buildRouteRules(b *builder, _ string, v any) {
	list, _ := v.([]tree)
	groups := b.groupNames()
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
	b.c.Routes.Rules = rules
}

// buildThrottleRules converts and checks the [[throttle.rule]] tables.
func buildThrottleRules(b *builder, _ string, v any) {
	list, _ := v.([]tree)
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
			rpm.check(b.p, key+".rpm", n)
			if n >= 0 && n <= maxMillis {
				r.RPM = int(n)
			}
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
	b.c.Throttle.Rules = rules
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
