package config

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	gotoml "github.com/pelletier/go-toml/v2"

	"github.com/limiterd/limiterd/limiter"
)

// tomlHeader starts the output of TOML.
const tomlHeader = `# The effective limiterd configuration: the built-in default, the config
# file, the environment and the flags, merged. Same keys and units as
# config.toml; every list is given whole, so loading this file alone gives
# the same configuration.
`

// TOML returns the configuration as a TOML document with the key names
// and units of config.toml (integer milliseconds for the Arweave keys and
// the throttle, Go duration strings elsewhere), key by key in the order of
// keys, for limiterd check-config. Loading it as the config file gives a
// Config equal to c. It includes the secrets; print c.Redacted().TOML() to
// show it to people.
func (c *Config) TOML() ([]byte, error) {
	w := &tomlWriter{}
	w.buf.WriteString(tomlHeader)
	for _, k := range keys {
		switch {
		case k.print != nil:
			k.print(w, c)
		case k.get != nil:
			i := strings.LastIndexByte(k.Name, '.')
			w.table(k.Name[:i])
			w.key(k.Name[i+1:], k.get(c))
		}
	}
	return w.buf.Bytes(), w.err
}

// tomlWriter writes a TOML document table by table.
type tomlWriter struct {
	buf bytes.Buffer
	cur string // the table the next key goes into
	err error
}

// table starts the table [name], unless the last one written is it.
func (w *tomlWriter) table(name string) {
	if w.cur != name {
		w.header("[" + name + "]")
		w.cur = name
	}
}

// header starts a table with the header h: "[a.b]", "[[a.b]]".
func (w *tomlWriter) header(h string) {
	w.buf.WriteString("\n" + h + "\n")
	w.cur = ""
}

// key writes name = v, v as the encoder writes values.
func (w *tomlWriter) key(name string, v any) {
	b, err := gotoml.Marshal(map[string]any{name: v})
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf.Write(b)
}

// printTokens writes the [[admin.tokens]] tables.
func printTokens(w *tomlWriter, c *Config) {
	for _, t := range c.Admin.Tokens {
		w.header("[[admin.tokens]]")
		w.key("name", t.Name)
		w.key("scope", t.Scope)
		if t.Token != "" {
			w.key("token", t.Token)
		}
		if t.TokenFile != "" {
			w.key("token_file", t.TokenFile)
		}
	}
}

// printRouteRules writes the [[routes.rule]] tables, or "rule = []" for
// none: it replaces the shipped rules.
func printRouteRules(w *tomlWriter, c *Config) {
	if len(c.Routes.Rules) == 0 {
		w.table("routes")
		w.key("rule", []any{})
	}
	for _, r := range c.Routes.Rules {
		w.header("[[routes.rule]]")
		w.key("group", r.Group)
		w.key("paths", list(r.Paths))
		if len(r.Methods) > 0 {
			w.key("methods", r.Methods)
		}
		if len(r.ReduceOnStatus) > 0 {
			w.key("reduce_on_status", r.ReduceOnStatus)
		}
	}
}

// printGroups writes a table of every group's settings, in name order,
// its keys in the order of limiter.GroupKeyTable.
func printGroups(w *tomlWriter, c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.Groups)) {
		g := c.Groups[name]
		w.header("[http_api.limiter." + name + "]")
		for _, k := range limiter.GroupKeyTable() {
			v, _ := g.Value(k.Name)
			switch {
			case k.Part == limiter.PartLimits && v == int64(0):
				continue // "unset" (a hybrid group's), which the file cannot say
			case k.Name == limiter.KeyNumberOfWorkers && v == int64(0):
				v = int64(1) // settings built in code: 0 counts as 1
			}
			w.key(k.Name, v)
		}
	}
}

// printThrottleRules writes the [[throttle.rule]] tables, or "rule = []"
// for none.
func printThrottleRules(w *tomlWriter, c *Config) {
	if len(c.Throttle.Rules) == 0 {
		w.table("throttle")
		w.key("rule", []any{})
	}
	for _, r := range c.Throttle.Rules {
		w.header("[[throttle.rule]]")
		w.key("type", r.Type)
		w.key("rpm", int64(r.RPM))
		w.key("paths", list(r.Paths))
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
