package config

import (
	"fmt"
	"slices"
	"strings"
)

// Edit is one key a file edit sets: in the table Table
// ("http_api.limiter.general"), the first of Forms whose key the table
// already has is given its value; when it has none of them, the first form
// is added. Forms are a key and its value as TOML writes it (`900`,
// `"2.9.7"`, `["10.0.0.12"]`): two forms name one setting two ways, such
// as an Arweave 2.9.7 name and limiterd's (docs/arweave297.md).
type Edit struct {
	Table string
	Forms []KeyValue
}

// KeyValue is a key of a table and its value as TOML writes it.
type KeyValue struct{ Key, Value string }

// EditTOML returns the TOML document b with every edit made, and nothing
// else changed: a key the file has keeps its line (its indentation and
// its comment; a value over several lines becomes one line), a key the
// table lacks is added after the table's last key, a table the file lacks
// is appended at its end. Comments, blank lines, the order of tables and
// keys, and every other value stay as they are. It fails, naming the key,
// when the file sets an edited key, or its table, in a form it does not
// edit (a dotted key, an inline table, an array of tables): then the
// caller should not guess.
func EditTOML(b []byte, edits []Edit) ([]byte, error) {
	lines := strings.SplitAfter(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	doc := scanTOML(lines)
	type insert struct {
		after int // insert after this line index (-1: at the end)
		text  string
	}
	replace := map[int][2]int{} // first line → [last line, edit index]
	var inserts []insert
	var appendix []string
	appended := map[string]int{} // table → index into appendix
	for i, e := range edits {
		if e.Table == "" || len(e.Forms) == 0 {
			return nil, fmt.Errorf("edit %d: no table or no key", i)
		}
		for _, f := range e.Forms {
			full := e.Table + "." + f.Key
			for _, k := range doc.keys {
				if k.full == full {
					continue
				}
				if strings.HasPrefix(full, k.full+".") || (k.dotted && strings.HasPrefix(k.full, e.Table+".")) {
					return nil, fmt.Errorf("line %d sets %s in a form this edit does not change (a dotted key or an inline table): edit it by hand", k.first+1, full)
				}
			}
			if slices.Contains(doc.arrays, e.Table) {
				return nil, fmt.Errorf("[[%s]] is an array of tables: edit it by hand", e.Table)
			}
		}
		done := false
		for _, f := range e.Forms {
			full := e.Table + "." + f.Key
			for _, k := range doc.keys {
				if k.full == full {
					if _, dup := replace[k.first]; dup {
						return nil, fmt.Errorf("line %d: %s is edited twice", k.first+1, full)
					}
					replace[k.first] = [2]int{k.last, i}
					done = true
				}
			}
			if done {
				break
			}
		}
		if done {
			continue
		}
		line := e.Forms[0].Key + " = " + e.Forms[0].Value + "\n"
		if t, ok := doc.tables[e.Table]; ok {
			inserts = append(inserts, insert{after: t.lastKey, text: line})
			continue
		}
		if j, ok := appended[e.Table]; ok {
			appendix[j] += line
			continue
		}
		appended[e.Table] = len(appendix)
		appendix = append(appendix, "\n["+e.Table+"]\n"+line)
	}

	var out strings.Builder
	emitInserts := func(after int) {
		for _, in := range inserts {
			if in.after == after {
				out.WriteString(in.text)
			}
		}
	}
	emitInserts(-2) // keys of the top level, before any table
	for i := 0; i < len(lines); i++ {
		if r, ok := replace[i]; ok {
			e := edits[r[1]]
			k := doc.keyAt(i)
			f := formOf(e, k.full)
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
			comment := ""
			if k.first == k.last {
				comment = k.comment
			}
			out.WriteString(indent + k.name + " = " + f.Value + comment + "\n")
			i = r[0]
			emitInserts(i)
			continue
		}
		out.WriteString(lines[i])
		if !strings.HasSuffix(lines[i], "\n") {
			out.WriteString("\n")
		}
		emitInserts(i)
	}
	for _, a := range appendix {
		out.WriteString(a)
	}
	return []byte(out.String()), nil
}

// formOf returns the form of e whose full key is full.
func formOf(e Edit, full string) KeyValue {
	for _, f := range e.Forms {
		if e.Table+"."+f.Key == full {
			return f
		}
	}
	return e.Forms[0]
}

// tomlDoc is what EditTOML needs of a document: its key lines and its
// tables.
type tomlDoc struct {
	keys   []tomlKey
	tables map[string]tomlTable
	arrays []string // the names of arrays of tables
}

// tomlKey is one key's line(s).
type tomlKey struct {
	full        string // table and key, dotted
	name        string // the key as written
	dotted      bool   // the key itself is dotted (a.b = 1)
	first, last int    // its lines
	comment     string // a single-line value's comment, with the spaces before it
}

// tomlTable is a table's header line and its last key's last line (the
// header's when it has none).
type tomlTable struct{ header, lastKey int }

func (d *tomlDoc) keyAt(line int) tomlKey {
	for _, k := range d.keys {
		if k.first == line {
			return k
		}
	}
	return tomlKey{}
}

// scanTOML reads the structure of a TOML document line by line: headers,
// key lines and where a value over several lines (an array, a multi-line
// string) ends. It trusts the document to be valid TOML (the caller loads
// it first).
func scanTOML(lines []string) tomlDoc {
	d := tomlDoc{tables: map[string]tomlTable{"": {header: -2, lastKey: -2}}}
	table := ""
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case line == "" || line[0] == '#':
			continue
		case strings.HasPrefix(line, "[["):
			name := tableName(strings.TrimPrefix(line, "[["), "]]")
			d.arrays = append(d.arrays, name)
			table = "[[" + name + "]]"
			continue
		case line[0] == '[':
			table = tableName(line[1:], "]")
			d.tables[table] = tomlTable{header: i, lastKey: i}
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			continue
		}
		name := strings.TrimSpace(line[:eq])
		key := normalizeKey(name)
		last, comment := valueEnd(lines, i, strings.TrimSpace(line[eq+1:]))
		full := key
		if table != "" {
			full = table + "." + key
		}
		d.keys = append(d.keys, tomlKey{full: full, name: name, dotted: strings.Contains(key, "."), first: i, last: last, comment: comment})
		if t, ok := d.tables[table]; ok {
			t.lastKey = last
			d.tables[table] = t
		}
		i = last
	}
	return d
}

// tableName returns the name of a header's rest (after "[" or "[["), its
// parts without the spaces around their dots.
func tableName(rest, closing string) string {
	if j := strings.Index(rest, closing); j >= 0 {
		rest = rest[:j]
	}
	return normalizeKey(rest)
}

// normalizeKey returns a (dotted) key without spaces around its parts.
func normalizeKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return strings.Join(parts, ".")
}

// valueEnd returns the last line of the value that starts on line first
// as v, and, for a value on one line, its comment with the spaces before
// it.
func valueEnd(lines []string, first int, v string) (int, string) {
	depth := 0     // of brackets and braces
	var quote byte // the string the scan is in: '"', '\'', or 0
	multi := false // a multi-line string
	i, s := first, v
	for {
		for j := 0; j < len(s); j++ {
			c := s[j]
			switch {
			case quote != 0 && multi && strings.HasPrefix(s[j:], strings.Repeat(string(quote), 3)):
				quote, multi = 0, false
				j += 2
			case quote != 0 && !multi && c == quote:
				quote = 0
			case quote == '"' && c == '\\':
				j++
			case quote != 0:
			case strings.HasPrefix(s[j:], `"""`) || strings.HasPrefix(s[j:], "'''"):
				quote, multi = c, true
				j += 2
			case c == '"' || c == '\'':
				quote = c
			case c == '[' || c == '{':
				depth++
			case c == ']' || c == '}':
				depth--
			case c == '#':
				if depth == 0 && i == first {
					raw := strings.TrimRight(lines[i], "\r\n")
					at := strings.LastIndex(raw, s[j:])
					start := at
					for start > 0 && (raw[start-1] == ' ' || raw[start-1] == '\t') {
						start--
					}
					return i, raw[start:]
				}
				j = len(s) // a comment in a value over several lines
			}
		}
		if (depth <= 0 && !multi) || i+1 >= len(lines) {
			return i, ""
		}
		i++
		s = lines[i]
	}
}
