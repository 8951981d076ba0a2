package config

import (
	"fmt"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"

	"github.com/limiterd/limiterd/limiter"
)

// Arweave is the [arweave] table.
type Arweave struct {
	// Version is which Arweave node's limiter limiterd reproduces, with
	// its defaults (docs/config.md, docs/arweave297.md).
	Version limiter.ArweaveVersion
}

// aliasOrigin maps a canonical group key that a layer set through its
// 2.9.7 name ("http_api.limiter.general.leaky_limit") to that name
// ("http_api.limiter.general.leaky_rate_limit"), so that a problem with
// the value names the key as the operator wrote it.
type aliasOrigin map[string]string

// normalizeAliases rewrites, in one layer's raw map, every 2.9.7 name of
// a group key into its 2.9.6 key (is_external_reduction_enabled inverted,
// no_limit as a mode), so that the layers merge on one name. Both names
// of one key in the same table is a problem naming both. A layer that
// sets a key by its 2.9.6 name clears the alias origin of a lower layer.
func normalizeAliases(p *problems, raw map[string]any, origin aliasOrigin) {
	api, _ := raw["http_api"].(map[string]any)
	groups, _ := api["limiter"].(map[string]any)
	aliases := map[string]string{}
	for _, a := range aliases297 {
		aliases[a.name] = a.key
	}
	for _, name := range sortedKeys(groups) {
		g, ok := groups[name].(map[string]any)
		if !ok {
			continue
		}
		prefix := "http_api.limiter." + name + "."
		for k := range g {
			if _, isAlias := aliases[k]; !isAlias {
				delete(origin, prefix+k)
			}
		}
		for _, alias := range sortedKeys(aliases) {
			canon := aliases[alias]
			v, ok := g[alias]
			if !ok {
				continue
			}
			delete(g, alias)
			if _, both := g[canon]; both {
				p.addf(prefix+alias, "%s is the Arweave 2.9.7 name of %s: give only one of %s and %s", alias, canon, canon, alias)
				continue
			}
			switch canon {
			case limiter.KeyManualReductionOff, limiter.KeyMode:
				// is_external_reduction_enabled is its inverse, no_limit
				// = true is mode "off".
				b, ok := v.(bool)
				if !ok {
					p.addErr(prefix+alias, "must be true or false, got "+describe(v), ErrWrongType)
					continue
				}
				if canon == limiter.KeyMode {
					v = limiter.ModeEnforce.String()
					if b {
						v = limiter.ModeOff.String()
					}
				} else {
					v = !b
				}
			}
			g[canon] = v
			origin[prefix+canon] = prefix + alias
		}
	}
}

// layerVersion returns the arweave.version a layer sets, if any.
func layerVersion(raw map[string]any) (any, bool) {
	a, ok := raw["arweave"].(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := a["version"]
	return v, ok
}

// versionDefaults is the layer between the embedded config.toml and the
// file: every key of every shipped group at the default of version v
// (docs/arweave297.md), worker-shard keys included, which config.toml does not
// list. For 2.9.6 it changes no value config.toml gives.
func versionDefaults(v limiter.ArweaveVersion) map[string]any {
	groups := map[string]any{}
	for name, g := range groupDefaults(v) {
		t := map[string]any{}
		for _, k := range limiter.GroupKeyTable() {
			v, _ := g.Value(k.Name)
			if v == int64(0) && k.Part == limiter.PartLimits {
				continue // a hybrid's unset limits, which a file cannot say
			}
			t[k.Name] = v
		}
		groups[name] = t
	}
	return map[string]any{"http_api": map[string]any{"limiter": groups}}
}

// loadLayer merges raw into k.
func loadLayer(k *koanf.Koanf, raw map[string]any, name string) error {
	if len(raw) == 0 {
		return nil
	}
	if err := k.Load(confmap.Provider(raw, ""), nil); err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	return nil
}

// checkVersion validates every group with the rules of arweave.version
// beyond 2.9.6's (docs/arweave297.md).
func checkVersion(b *builder) {
	if b.c.Arweave.Version != limiter.Arweave297 {
		return
	}
	for _, name := range sortedKeys(b.c.Groups) {
		if err := b.c.Groups[name].Validate297(name); err != nil {
			b.p.addCore(err)
		}
	}
}

// groupDefaults returns the group defaults of version v.
func groupDefaults(v limiter.ArweaveVersion) map[string]limiter.GroupSettings {
	if v == limiter.Arweave297 {
		return limiter.ArweaveGroups297()
	}
	return limiter.ArweaveGroups()
}
