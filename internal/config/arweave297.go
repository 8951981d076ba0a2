package config

import (
	"fmt"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"

	"github.com/limiterd/limiterd/limiter"
)

// The 2.9.7 names a group table may use instead of the 2.9.6 keys
// (SPEC §6.3). is_external_reduction_enabled is the inverse of
// is_manual_reduction_disabled, and no_limit = true is mode "off".
const (
	key297LeakyRateLimit           = "leaky_rate_limit"
	key297LeakyTickMs              = "leaky_tick_ms"
	key297TickReduction            = "tick_reduction"
	key297TimestampCleanupTickMs   = "timestamp_cleanup_tick_ms"
	key297ExternalReductionEnabled = "is_external_reduction_enabled"
	key297NoLimit                  = "no_limit"
)

// aliases297 maps each 2.9.7 name of a group key to the 2.9.6 key it
// stands for. The map is new on every call.
func aliases297() map[string]string {
	return map[string]string{
		key297LeakyRateLimit:           limiter.KeyLeakyLimit,
		key297LeakyTickMs:              limiter.KeyLeakyTickInterval,
		key297TickReduction:            limiter.KeyLeakyTickReduction,
		key297TimestampCleanupTickMs:   limiter.KeyCleanupInterval,
		key297ExternalReductionEnabled: limiter.KeyManualReductionOff,
		key297NoLimit:                  limiter.KeyMode,
	}
}

// Arweave is the [arweave] table.
type Arweave struct {
	// Version is which Arweave node's limiter limiterd reproduces, with
	// its defaults (SPEC §3, §6.3).
	Version limiter.ArweaveVersion
}

// groupFields297 are the 2.9.7 names of the 2.9.6 group keys (aliases,
// renamed by normalizeAliases before the layers are merged).
func groupFields297() []field {
	return []field{
		{name: key297LeakyRateLimit, kind: kindInt},
		{name: key297LeakyTickMs, kind: kindInt},
		{name: key297TickReduction, kind: kindInt},
		{name: key297TimestampCleanupTickMs, kind: kindInt},
		{name: key297ExternalReductionEnabled, kind: kindBool},
		{name: key297NoLimit, kind: kindBool},
	}
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
	aliases := aliases297()
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
			switch alias {
			case key297ExternalReductionEnabled, key297NoLimit:
				b, ok := v.(bool)
				if !ok {
					p.addErr(prefix+alias, "must be true or false, got "+describe(v), ErrWrongType)
					continue
				}
				if alias == key297NoLimit {
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
// (SPEC §6.3), worker-shard keys included, which config.toml does not
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

// checkVersion validates every group with the rules of version v beyond
// 2.9.6's (SPEC §6.3).
func checkVersion(p *problems, v limiter.ArweaveVersion, groups map[string]limiter.GroupSettings) {
	if v != limiter.Arweave297 {
		return
	}
	for _, name := range sortedKeys(groups) {
		if err := groups[name].Validate297(name); err != nil {
			p.addCore(err)
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
