package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
)

// mergeInto returns the config file at path with the node's limiter
// settings written into it (config.EditTOML): arweave.version, the node's
// local peers added to peers.exempt, and every group key the node sets.
// Everything else — listen, upstream, trusted proxies, tokens, routes,
// comments — stays as the file has it. It returns the file's mode and the
// changes, one line each. The result must load and must say what the file
// said for every key the merge does not set; otherwise nothing is written
// (decision 199).
func (im *imported) mergeInto(path string) ([]byte, os.FileMode, []string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, nil, err
	}
	before, _, err := config.Load(config.Source{Path: path, Required: true, Data: b})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("the file does not load; fix it first:\n%v", err)
	}
	var edits []config.Edit
	var changes []string
	if before.Arweave.Version != im.version {
		edits = append(edits, config.Edit{Table: "arweave", Forms: []config.KeyValue{{Key: "version", Value: strconv.Quote(im.version.String())}}})
		changes = append(changes, fmt.Sprintf("arweave.version: %s → %s", before.Arweave.Version, im.version))
	}
	exempt := slices.Clone(before.Peers.Exempt)
	var added []string
	have := make(map[string]bool, len(exempt))
	for _, a := range exempt {
		have[a] = true
	}
	for _, a := range im.local {
		if !have[a] {
			have[a] = true
			exempt = append(exempt, a)
			added = append(added, a)
		}
	}
	if len(added) > 0 {
		edits = append(edits, config.Edit{Table: "peers", Forms: []config.KeyValue{{Key: "exempt", Value: tomlStrings(exempt)}}})
		changes = append(changes, fmt.Sprintf("peers.exempt: %d local peers of the node's added (%s)", len(added), abbreviate(added, 5)))
	}
	want := map[string]map[string]string{} // group → limiterd's key → its value as Value prints it
	for _, g := range arweaveGroupOrder {
		for _, k := range sortedKeys(im.groups[g]) {
			// limiterd's name first (added when the file has neither),
			// then the node's 2.9.7 name, edited when the file uses it.
			name, value := k, im.groups[g][k]
			if c, cv, ok := canonical297(name, value); ok {
				name, value = c, cv
			}
			forms := append([]config.KeyValue{{Key: name, Value: value}}, aliases297(name, value)...)
			edits = append(edits, config.Edit{Table: "http_api.limiter." + g, Forms: forms})
			if want[g] == nil {
				want[g] = map[string]string{}
			}
			want[g][name] = strings.Trim(value, `"`)
			old, _ := before.Groups[g].Value(name)
			if fmt.Sprint(old) != want[g][name] {
				changes = append(changes, fmt.Sprintf("http_api.limiter.%s.%s: %v → %s", g, name, old, want[g][name]))
			}
		}
	}
	merged, err := config.EditTOML(b, edits)
	if err != nil {
		return nil, 0, nil, err
	}
	after, _, err := config.Load(config.Source{Path: path, Required: true, Data: merged})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("the merged file would not load (nothing written):\n%v", err)
	}
	if err := sameBesides(before, after, want); err != nil {
		return nil, 0, nil, fmt.Errorf("the merge would change more than the node's settings (nothing written): %w; write a new file with -o and merge by hand", err)
	}
	if len(changes) == 0 {
		changes = []string{"already holds the node's limiter settings: nothing changed"}
	}
	return merged, fi.Mode().Perm(), changes, nil
}

// sameBesides reports, as an error, a setting of after that differs from
// before's other than arweave.version, peers.exempt and the group keys of
// want (whose values after must have); with arweave.version changed, the
// group keys the node does not set take that version's defaults, and are
// not compared.
func sameBesides(before, after *config.Config, want map[string]map[string]string) error {
	for _, ch := range []config.Change{config.Restart, config.Reload, config.Live} {
		for _, k := range config.Changed(before, after, ch) {
			if k != "arweave.version" && k != "peers.exempt" {
				return fmt.Errorf("%s changed", k)
			}
		}
	}
	switch {
	case !reflect.DeepEqual(before.Admin.Tokens, after.Admin.Tokens):
		return errors.New("admin.tokens changed")
	case !reflect.DeepEqual(before.Routes, after.Routes):
		return errors.New("the routes changed")
	case !reflect.DeepEqual(before.Throttle.Rules, after.Throttle.Rules):
		return errors.New("throttle.rule changed")
	case len(before.Groups) != len(after.Groups):
		return errors.New("the groups changed")
	}
	sameVersion := before.Arweave.Version == after.Arweave.Version
	for g, gs := range after.Groups {
		for _, k := range limiter.GroupKeyTable() {
			v, _ := gs.Value(k.Name)
			if w, ok := want[g][k.Name]; ok {
				if fmt.Sprint(v) != w {
					return fmt.Errorf("http_api.limiter.%s.%s is %v, not the node's %s", g, k.Name, v, w)
				}
				continue
			}
			if old, _ := before.Groups[g].Value(k.Name); sameVersion && fmt.Sprint(old) != fmt.Sprint(v) {
				return fmt.Errorf("http_api.limiter.%s.%s changed", g, k.Name)
			}
		}
	}
	return nil
}

// canonical297 returns limiterd's name of an Arweave 2.9.7 group key and
// the value it takes for the node's value (two booleans mean the
// opposite, or a mode); ok is false for a key both name alike.
func canonical297(key, val string) (string, string, bool) {
	switch key {
	case "leaky_rate_limit":
		return limiter.KeyLeakyLimit, val, true
	case "leaky_tick_ms":
		return limiter.KeyLeakyTickInterval, val, true
	case "tick_reduction":
		return limiter.KeyLeakyTickReduction, val, true
	case "timestamp_cleanup_tick_ms":
		return limiter.KeyCleanupInterval, val, true
	case "is_external_reduction_enabled":
		return limiter.KeyManualReductionOff, strconv.FormatBool(val != "true"), true
	case "no_limit":
		if val == "true" {
			return limiter.KeyMode, `"off"`, true
		}
		return limiter.KeyMode, `"enforce"`, true
	}
	return "", "", false
}

// aliases297 returns the Arweave 2.9.7 names of limiterd's group key key
// with the value each takes for limiterd's value val (none for a mode
// 2.9.7 cannot say).
func aliases297(key, val string) []config.KeyValue {
	var out []config.KeyValue
	for _, alias := range []string{"leaky_rate_limit", "leaky_tick_ms", "tick_reduction", "timestamp_cleanup_tick_ms"} {
		if c, _, _ := canonical297(alias, val); c == key {
			out = append(out, config.KeyValue{Key: alias, Value: val})
		}
	}
	switch {
	case key == limiter.KeyManualReductionOff:
		out = append(out, config.KeyValue{Key: "is_external_reduction_enabled", Value: strconv.FormatBool(val != "true")})
	case key == limiter.KeyMode && val == `"off"`:
		out = append(out, config.KeyValue{Key: "no_limit", Value: "true"})
	case key == limiter.KeyMode && val == `"enforce"`:
		out = append(out, config.KeyValue{Key: "no_limit", Value: "false"})
	}
	return out
}

// tomlStrings writes a list of strings as a TOML array.
func tomlStrings(list []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	b.WriteByte(']')
	return b.String()
}

// abbreviate lists at most n items of list, and how many more.
func abbreviate(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:n], ", "), len(list)-n)
}
