package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"
)

// kind is the type of a configuration key.
type kind uint8

const (
	kindString   kind = iota + 1 // a TOML string
	kindInt                      // a TOML integer
	kindBool                     // a TOML boolean
	kindDuration                 // a Go duration string, "5s"
	kindStrings                  // an array of strings
	kindInts                     // an array of integers
	kindTable                    // a table with the fields given
	kindTables                   // an array of tables with the fields given
	kindGroups                   // a table of group tables, any names
)

// field is one key of the configuration schema.
type field struct {
	name   string
	kind   kind
	fields []field // of a kindTable or kindTables; of each group for kindGroups
}

// schema returns the configuration's fields for decoding, in the order
// of keys: the tree of tables their dotted names make, a group's keys
// below the http_api.limiter field, an array of tables' keys below it. It
// is what both the decoding of the merged layers and the reading of the
// environment go by.
func schema() []field {
	var root []field
	for _, k := range keys {
		insertField(&root, strings.Split(k.Name, "."), kindOf[k.Type])
	}
	return root
}

// kindOf is the kind a key's type decodes as.
var kindOf = [...]kind{String: kindString, Int: kindInt, Bool: kindBool, Duration: kindDuration,
	Millis: kindInt, Size: kindString, Strings: kindStrings, Ints: kindInts, Tables: kindTables, Groups: kindGroups}

// insertField adds the field at path to fs, with the tables on the way.
func insertField(fs *[]field, path []string, k kind) {
	if path[0] == "<group>" {
		// A group's key: a field of the groups' field itself.
		path = path[1:]
	}
	i := slices.IndexFunc(*fs, func(f field) bool { return f.name == path[0] })
	if i < 0 {
		*fs = append(*fs, field{name: path[0], kind: kindTable})
		i = len(*fs) - 1
	}
	if len(path) == 1 {
		(*fs)[i].kind = k
		return
	}
	insertField(&(*fs)[i].fields, path[1:], k)
}

// lookup returns the field named name among fs.
func lookup(fs []field, name string) (field, bool) {
	for _, f := range fs {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

// tree is a decoded table: every value has the Go type of its field's kind
// (string, int64, bool, time.Duration, []string, []int64, tree, []tree; a
// kindGroups value is a tree of trees). A key is absent when the merged
// layers do not have it or its value was wrong.
type tree map[string]any

// at returns the value at the path of keys, or nil.
func (t tree) at(keys ...string) any {
	var v any = t
	for _, k := range keys {
		m, ok := v.(tree)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// decode checks raw, the merged layers, against fs and returns its typed
// values. Every unknown key and every value of the wrong type is a problem;
// the rest is decoded.
func decode(p *problems, raw map[string]any, fs []field, prefix string) tree {
	out := make(tree, len(raw))
	for _, f := range fs {
		v, ok := raw[f.name]
		if !ok {
			continue
		}
		if tv, ok := decodeValue(p, v, f, join(prefix, f.name)); ok {
			out[f.name] = tv
		}
	}
	var unknown []string
	for k := range raw {
		if _, ok := lookup(fs, k); !ok {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		p.addErr(join(prefix, k), ErrUnknownKey.Error(), ErrUnknownKey)
	}
	return out
}

// decodeValue checks one value against f.
func decodeValue(p *problems, v any, f field, key string) (any, bool) {
	wrong := func(want string) (any, bool) {
		p.addErr(key, fmt.Sprintf("must be %s, got %s", want, describe(v)), ErrWrongType)
		return nil, false
	}
	switch f.kind {
	case kindString:
		if s, ok := v.(string); ok {
			return s, true
		}
		return wrong("a string")
	case kindInt:
		if n, ok := asInt(v); ok {
			return n, true
		}
		return wrong("an integer")
	case kindBool:
		if b, ok := v.(bool); ok {
			return b, true
		}
		return wrong("true or false")
	case kindDuration:
		s, ok := v.(string)
		if !ok {
			return wrong(`a duration string such as "5s"`)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			p.addErr(key, fmt.Sprintf(`must be a duration such as "5s", "100ms" or "1m30s", got %q`, s), ErrWrongType)
			return nil, false
		}
		return d, true
	case kindStrings, kindInts:
		list, ok := v.([]any)
		if !ok {
			if f.kind == kindStrings {
				return wrong("an array of strings")
			}
			return wrong("an array of integers")
		}
		good := true
		var ss []string
		var ns []int64
		for i, x := range list {
			ik := fmt.Sprintf("%s[%d]", key, i)
			if f.kind == kindStrings {
				s, ok := x.(string)
				if !ok {
					p.addErr(ik, "must be a string, got "+describe(x), ErrWrongType)
					good = false
				}
				ss = append(ss, s)
				continue
			}
			n, ok := asInt(x)
			if !ok {
				p.addErr(ik, "must be an integer, got "+describe(x), ErrWrongType)
				good = false
			}
			ns = append(ns, n)
		}
		if !good {
			return nil, false
		}
		if f.kind == kindStrings {
			return ss, true
		}
		return ns, true
	case kindTable:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("a table")
		}
		return decode(p, m, f.fields, key), true
	case kindTables:
		list, ok := v.([]any)
		if !ok {
			return wrong("an array of tables ([[" + key + "]])")
		}
		out := make([]tree, 0, len(list))
		good := true
		for i, x := range list {
			ik := fmt.Sprintf("%s[%d]", key, i)
			m, ok := x.(map[string]any)
			if !ok {
				p.addErr(ik, "must be a table, got "+describe(x), ErrWrongType)
				good = false
				continue
			}
			out = append(out, decode(p, m, f.fields, ik))
		}
		if !good {
			return nil, false
		}
		return out, true
	case kindGroups:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("a table of group tables")
		}
		out := make(tree, len(m))
		for _, name := range sortedKeys(m) {
			gk := join(key, name)
			g, ok := m[name].(map[string]any)
			if !ok {
				p.addErr(gk, "must be a table, got "+describe(m[name]), ErrWrongType)
				out[name] = tree{} // still a group's name, for the routes that name it
				continue
			}
			out[name] = decode(p, g, f.fields, gk)
		}
		return out, true
	}
	panic(fmt.Sprintf("config: field %s has no kind", key))
}

// asInt returns v as an integer if it is one (a TOML integer is an int64;
// other integer types come from maps built in code).
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	}
	return 0, false
}

// describe says what v is, for a wrong-type message: `string "450"`,
// `float 1.5`.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case float32, float64:
		return fmt.Sprintf("float %v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	case time.Time:
		return "date-time " + x.Format(time.RFC3339Nano)
	case gotoml.LocalDate, gotoml.LocalTime, gotoml.LocalDateTime:
		return fmt.Sprintf("date or time %v", x)
	}
	if _, ok := asInt(v); ok {
		return fmt.Sprintf("integer %v", v)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// join returns prefix.name, or name for an empty prefix.
func join(prefix, name string) string {
	if !bareKey(name) {
		// As TOML writes it, so that an empty or dotted name still names
		// a key: `""`, `server."a.b"`.
		name = strconv.Quote(name)
	}
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// bareKey reports whether name is a TOML bare key: A-Z a-z 0-9 _ -, at
// least one.
func bareKey(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return name != ""
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// envPrefix starts the name of every environment variable Load reads.
const envPrefix = "LIMITERD_"

// fromEnv turns the LIMITERD_ variables of env (os.Environ style) into a
// nested map for koanf, converting each value by its key's type. It also
// returns, for each key it set, the variable that set it. A variable naming
// no key, a table or a list of tables, or with a value of the wrong type,
// is a problem naming the variable and the key. Of two variables for the
// same key, the later wins.
func fromEnv(p *problems, env []string, fs []field) (map[string]any, map[string]string) {
	out := map[string]any{}
	origin := map[string]string{}
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		path := strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__")
		key := strings.Join(path, ".")
		f, ok := envField(fs, path)
		if !ok {
			p.addErr(key, fmt.Sprintf("unknown key (environment variable %s)", name), ErrUnknownKey)
			continue
		}
		v, problem := envValue(f, val)
		if problem != "" {
			p.addErr(key, fmt.Sprintf("%s (environment variable %s=%q)", problem, name, val), ErrWrongType)
			continue
		}
		m := out
		for _, k := range path[:len(path)-1] {
			sub, ok := m[k].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[k] = sub
			}
			m = sub
		}
		m[path[len(path)-1]] = v
		origin[key] = name
	}
	return out, origin
}

// envField returns the field a variable's lower-cased path names. Below
// http_api.limiter, the first name is a group's (any).
func envField(fs []field, path []string) (field, bool) {
	var f field
	for i := 0; i < len(path); i++ {
		var ok bool
		if f, ok = lookup(fs, path[i]); !ok {
			return field{}, false
		}
		if f.kind == kindGroups {
			if i+1 == len(path) {
				return f, true // the table of groups itself: refused by envValue
			}
			i++ // the group's name
		}
		fs = f.fields
	}
	return f, true
}

// envValue converts a variable's value to the type of f, or says why not.
func envValue(f field, s string) (any, string) {
	switch f.kind {
	case kindString, kindDuration:
		return s, ""
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, "must be an integer"
		}
		return n, ""
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, "must be true or false"
		}
		return b, ""
	case kindStrings, kindInts:
		list := []any{}
		if strings.TrimSpace(s) == "" {
			return list, ""
		}
		for _, item := range strings.Split(s, ",") {
			item = strings.TrimSpace(item)
			if f.kind == kindStrings {
				list = append(list, item)
				continue
			}
			n, err := strconv.ParseInt(item, 10, 64)
			if err != nil {
				return nil, "must be a comma-separated list of integers"
			}
			list = append(list, n)
		}
		return list, ""
	}
	return nil, "is a table or a list of tables, which cannot be set from the environment; set it in the file"
}
