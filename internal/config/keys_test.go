package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

// update rewrites config.toml's key lines and docs/config.md's key
// reference from the table of keys: go test ./internal/config -update.
var update = flag.Bool("update", false, "write config.toml's key lines and docs/config.md's key reference from config.Keys")

// The files written from the table of keys.
const (
	shippedPath = "../../config.toml"
	docsPath    = "../../docs/config.md"
)

// checkWritten compares what the table of keys makes of the file at path
// with the file, or writes it with -update.
func checkWritten(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if !bytes.Equal(got, want) {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the table of keys (config.Keys) makes of it; run go test ./internal/config -update, and read the diff:\n%s",
			path, lineDiff(string(got), string(want)))
	}
}

// lineDiff lists the lines of a that b does not have at the same place
// ("-") and those of b that a does not ("+"), around the first change.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	i := 0
	for i < len(la) && i < len(lb) && la[i] == lb[i] {
		i++
	}
	var out strings.Builder
	for j := i; j < len(la) && j < i+12; j++ {
		fmt.Fprintf(&out, "%d -%s\n", j+1, la[j])
	}
	for j := i; j < len(lb) && j < i+12; j++ {
		fmt.Fprintf(&out, "%d +%s\n", j+1, lb[j])
	}
	return out.String()
}

// TestShippedConfig: every key line of config.toml (one key per line, in
// the tables that are not arrays of tables or groups) is the key's line
// as the table of keys writes it, its default and its comment; every
// "# Keys of [table]:" block lists the keys of that table with their
// help, and the block of the 2.9.7 names lists them; no key of the table
// is missing from the file, and the file names no key the table lacks.
// The embedded default is the file.
func TestShippedConfig(t *testing.T) {
	file, err := os.ReadFile(shippedPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, limiterd.DefaultConfig) {
		t.Fatal("limiterd.DefaultConfig is not config.toml")
	}
	checkWritten(t, shippedPath, []byte(shipped(t, string(file))))
}

// The layout of config.toml's comments.
const (
	commentColumn = 34  // a key line's comment starts here
	lineWidth     = 132 // comments wrap before this column
)

var (
	tableLine = regexp.MustCompile(`^\[([a-z0-9_.]+)\]`)
	arrayLine = regexp.MustCompile(`^\[\[([a-z0-9_.]+)\]\]`)
	keyLine   = regexp.MustCompile(`^([a-z0-9_]+) *=`)
	blockLine = regexp.MustCompile(`^# (Keys of|Arweave 2\.9\.7 names of) \[+([^\]]+)\]+`)
)

// shipped returns config.toml with its key lines and key blocks written
// from the table of keys, the rest (prose, rules, group tables) as it is.
func shipped(t *testing.T, file string) string {
	t.Helper()
	keys := config.Keys()
	byName := map[string]config.Key{}
	for _, k := range keys {
		byName[k.Name] = k
	}
	seen := map[string]bool{}
	lines := strings.Split(file, "\n")
	var out []string
	table, plain := "", false // plain: a table of one key per line
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := arrayLine.FindStringSubmatch(line); m != nil {
			table, plain = m[1], false
		} else if m := tableLine.FindStringSubmatch(line); m != nil {
			table, plain = m[1], !strings.HasPrefix(m[1], "http_api.limiter.")
		}
		// What a generated line or block replaces: the line, and the
		// comment lines under it.
		skip := func() {
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimLeft(lines[i+1], " "), "#") &&
				(strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "#  ")) {
				i++
			}
		}
		if m := keyLine.FindStringSubmatch(line); m != nil && plain {
			name := table + "." + m[1]
			k, ok := byName[name]
			if !ok {
				t.Errorf("config.toml:%d: %s is not a key of the table of keys", i+1, name)
				out = append(out, line)
				continue
			}
			seen[name] = true
			out = append(out, keyLines(k)...)
			skip()
			continue
		}
		if m := blockLine.FindStringSubmatch(line); m != nil {
			out = append(out, line)
			aliases := m[1] != "Keys of"
			var block []config.Key
			for _, k := range keys {
				if name, ok := strings.CutPrefix(k.Name, m[2]+"."); ok && !strings.Contains(name, ".") && (k.Alias != "") == aliases {
					block = append(block, k)
					seen[k.Name] = true
				}
			}
			if len(block) == 0 {
				t.Errorf("config.toml:%d: no key of %s", i+1, m[2])
			}
			out = append(out, blockLines(block)...)
			skip()
			continue
		}
		out = append(out, line)
	}
	for _, k := range keys {
		if !seen[k.Name] && k.Type != config.Tables && k.Type != config.Groups {
			t.Errorf("config.toml does not have the key %s", k.Name)
		}
	}
	return strings.Join(out, "\n")
}

// keyLines is k's line in its table: "name = default", its comment in
// the comment column, wrapped under it.
func keyLines(k config.Key) []string {
	head := last(k.Name) + " = " + literal(k.Default)
	head += strings.Repeat(" ", max(commentColumn-len(head), 1))
	return comment(head+"# ", strings.Repeat(" ", len(head))+"#   ", help(k))
}

// blockLines lists keys as "#   name  help", the help wrapped under it.
func blockLines(keys []config.Key) []string {
	width := 0
	for _, k := range keys {
		width = max(width, len(last(k.Name)))
	}
	var out []string
	for _, k := range keys {
		head := "#   " + last(k.Name) + strings.Repeat(" ", width+1-len(last(k.Name)))
		out = append(out, comment(head, "#"+strings.Repeat(" ", len(head)-1), help(k))...)
	}
	return out
}

// comment writes the lines of text, the first after first, the others
// after cont, each wrapped before lineWidth: a line keeps its own spacing,
// its wrapped part goes under its first word's end when it begins with
// spaces (a value and its help), else under its start.
func comment(first, cont string, text []string) []string {
	var out []string
	for _, t := range text {
		chunks := chunk.FindAllString(t, -1)
		wrap := ""
		if strings.HasPrefix(t, " ") && len(chunks) > 1 {
			// Under the value's help.
			wrap = strings.Repeat(" ", len(chunks[0])+len(chunks[1])-len(strings.TrimLeft(chunks[1], " ")))
		}
		for len(chunks) > 0 {
			prefix := cont
			if len(out) == 0 {
				prefix = first
			}
			line := prefix + chunks[0]
			for chunks = chunks[1:]; len(chunks) > 0 && len([]rune(line+chunks[0])) < lineWidth; chunks = chunks[1:] {
				line += chunks[0]
			}
			out = append(out, line)
			if len(chunks) > 0 {
				chunks[0] = wrap + strings.TrimLeft(chunks[0], " ")
			}
		}
	}
	return out
}

// chunk is a word with the spaces before it; a bracketed note is one.
var chunk = regexp.MustCompile(` *\[[^\]]*\]| *\S+`)

// help is k's comment: its help, in brackets what its value may be and
// how a new value takes effect (the keys of an array of tables: only the
// former), then its values, each on a line of its own when they need
// saying.
func help(k config.Key) []string {
	var facts []string
	if k.Bounds != "" {
		facts = append(facts, typeWord(k)+k.Bounds)
	} else if w := typeWord(k); w != "" {
		facts = append(facts, strings.TrimSpace(w))
	}
	if k.Change != 0 {
		facts = append(facts, k.Change.String())
	}
	brackets := ""
	if len(facts) > 0 {
		brackets = " [" + strings.Join(facts, "; ") + "]"
	}
	var text []string
	if slices.ContainsFunc(k.Values, func(v config.Value) bool { return v.Help != "" }) {
		text = append(text, k.Help+brackets+":")
		width := 0
		for _, v := range k.Values {
			width = max(width, len(strconv.Quote(v.Name)))
		}
		for _, v := range k.Values {
			q := strconv.Quote(v.Name)
			text = append(text, "  "+q+strings.Repeat(" ", width+2-len(q))+v.Help)
		}
		return text
	}
	return []string{k.HelpLine() + brackets}
}

// typeWord is the word a key line's brackets say its type with, when its
// default does not say it: "duration ", "size ".
func typeWord(k config.Key) string {
	switch k.Type {
	case config.Duration:
		return "duration "
	case config.Size:
		return "size "
	}
	return ""
}

// last is the last part of a dotted name.
func last(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// literal writes a default as config.toml does.
func literal(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// TestKeys checks the table of keys against what it stands for: each
// key's default is the shipped one (Load of the embedded file alone), the
// values of a word are those its parser takes, a group key's are the
// core's, and every key has its help.
func TestKeys(t *testing.T) {
	for _, k := range config.Keys() {
		if k.Help == "" {
			t.Errorf("%s: no help", k.Name)
		}
		if k.Type == 0 {
			t.Errorf("%s: no type", k.Name)
		}
		if k.Group != nil {
			var words []string
			for _, v := range k.Values {
				words = append(words, v.Name)
			}
			if k.Group.Type == limiter.WordKey && !slices.Equal(words, k.Group.Words) {
				t.Errorf("%s: values %v, the core's %v", k.Name, words, k.Group.Words)
			}
		}
	}
	// Every value a word allows loads; a value it does not is refused.
	for _, k := range config.Keys() {
		if len(k.Values) == 0 || strings.Contains(k.Name, "<group>") || strings.Count(k.Name, ".") != 1 {
			continue
		}
		table, key, _ := strings.Cut(k.Name, ".")
		for _, v := range k.Values {
			if _, err := loadFile(t, fmt.Sprintf("[%s]\n%s = %q\n", table, key, v.Name)); err != nil {
				t.Errorf("%s = %q: %v", k.Name, v.Name, err)
			}
		}
		if _, err := loadFile(t, fmt.Sprintf("[%s]\n%s = \"nonesuch\"\n", table, key)); err == nil {
			t.Errorf("%s = \"nonesuch\" loads", k.Name)
		}
	}
}

// The markers around docs/config.md's key reference.
const (
	referenceStart = "<!-- The key reference below is written from the table of keys (internal/config/keys.go) by `go test ./internal/config -update`: change the keys there. -->"
	referenceEnd   = "<!-- End of the key reference. -->"
)

// TestDocsKeyReference: docs/config.md's key reference is every key of
// the table of keys, with its type, default, values or bounds, how it
// changes and its help.
func TestDocsKeyReference(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, referenceStart), strings.Index(doc, referenceEnd)
	if i < 0 || j < i {
		if !*update {
			t.Fatalf("%s has no key reference between %q and %q; run go test ./internal/config -update", docsPath, referenceStart, referenceEnd)
		}
		doc = strings.TrimRight(doc, "\n") + "\n\n## Key reference\n\n" + referenceStart + "\n" + referenceEnd + "\n"
		i, j = strings.Index(doc, referenceStart), strings.Index(doc, referenceEnd)
	}
	checkWritten(t, docsPath, []byte(doc[:i]+referenceStart+"\n\n"+keyReference()+"\n"+doc[j:]))
}

// keyReference is the key reference of docs/config.md: a table of every
// key.
func keyReference() string {
	var b strings.Builder
	b.WriteString("Every key, in the order of `config.toml`. *Change* says when a new value takes effect: " +
		"**restart**: read at start only (a reload keeps the running value and logs that it changed); " +
		"**reload**: a reload (`SIGHUP`) applies it; **live**: a reload, and a live edit of the group through the " +
		"admin API (`PATCH /api/v1/groups/{group}`), apply it. A group key's default is the `general` group's under " +
		"Arweave 2.9.6; each shipped group has its own (`config.toml`), and 2.9.7 its own (docs/arweave297.md). " +
		"From the environment: `LIMITERD_` and the key upper-cased, `__` between its parts " +
		"(`LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT`); an array of tables only from a file.\n\n")
	b.WriteString("| key | type | default | values, bounds | change | what |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, k := range config.Keys() {
		def := ""
		if k.Default != nil {
			def = "`" + literal(k.Default) + "`"
		}
		bounds := cell(k.Bounds)
		if len(k.Values) > 0 {
			var names []string
			for _, v := range k.Values {
				names = append(names, "`"+v.Name+"`")
			}
			bounds = strings.Join(names, ", ")
		}
		change := ""
		if k.Change != 0 {
			change = k.Change.String()
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Name, k.Type, def, bounds, change, cell(k.HelpLine()))
	}
	return b.String()
}

// cell escapes text for a cell of a Markdown table.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestLiveVocabulary: the keys a live edit may change (live.ParseOverride)
// are those the table of keys says change live, with the same types.
func TestLiveVocabulary(t *testing.T) {
	var liveKeys []string
	for _, k := range config.Keys() {
		name, ok := strings.CutPrefix(k.Name, "http_api.limiter.<group>.")
		if !ok {
			if k.Change == config.Live {
				t.Errorf("%s changes live, but it is not a group key", k.Name)
			}
			continue
		}
		value := k.Default
		if value == nil {
			value = 1
		}
		body := fmt.Sprintf(`{%q: %s}`, name, must(json.Marshal(value)))
		_, err := live.ParseOverride([]byte(body))
		if (err == nil) != (k.Change == config.Live) {
			t.Errorf("%s, change %s: a live edit %s: %v", k.Name, k.Change, body, err)
		}
		if k.Change != config.Live {
			continue
		}
		liveKeys = append(liveKeys, name)
		// A value of another type is refused, naming the key.
		wrong := `"x"`
		if k.Type == config.String {
			wrong = "1"
		}
		var fe *limiter.FieldError
		if _, err := live.ParseOverride([]byte(fmt.Sprintf(`{%q: %s}`, name, wrong))); !errors.As(err, &fe) || fe.Field != name {
			t.Errorf("%s = %s: %v, want a problem naming the key", name, wrong, err)
		}
	}
	if !slices.Equal(liveKeys, limiter.GroupKeys) {
		t.Errorf("keys that change live: %v; a live edit's: %v", liveKeys, limiter.GroupKeys)
	}
}

// TestChanged: a reload names the keys it cannot apply by the table's
// word on them.
func TestChanged(t *testing.T) {
	a := load(t, config.Source{})
	b, err := loadFile(t, "[server]\nlisten = \"0.0.0.0:2000\"\nmax_request_body = \"1MiB\"\n[log]\nlevel = \"debug\"\nformat = \"json\"\n[cluster]\nbackend = \"redis\"\n")
	if err != nil {
		t.Fatal(err)
	}
	b.Server.DataDir = a.Server.DataDir // relative to the file's directory
	if got, want := config.Changed(a, b, config.Restart), []string{"server.listen", "server.max_request_body", "log.format", "cluster.backend"}; !slices.Equal(got, want) {
		t.Errorf("restart: %v, want %v", got, want)
	}
	if got, want := config.Changed(a, b, config.Reload), []string{"log.level"}; !slices.Equal(got, want) {
		t.Errorf("reload: %v, want %v", got, want)
	}
}
