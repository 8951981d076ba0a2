package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
)

// The group keys of an Arweave node's configuration, per form: the old
// config.json's http_api.limiter.<group>.<key> (2.9.6) and 2.9.7's
// limiter.<group>.<key>. true marks a boolean key. limiterd reads both
// sets of names (the 2.9.7 ones as aliases), so a key is written out
// under the name the node's file used.
var (
	arweaveKeys296 = map[string]bool{
		limiter.KeySlidingWindowLimit: false, limiter.KeySlidingWindowDuration: false,
		limiter.KeyCleanupInterval: false, limiter.KeyCleanupExpiry: false,
		limiter.KeyLeakyLimit: false, limiter.KeyLeakyTickInterval: false, limiter.KeyLeakyTickReduction: false,
		limiter.KeyConcurrencyLimit: false, limiter.KeyManualReductionOff: true,
	}
	arweaveKeys297 = map[string]bool{
		limiter.KeySlidingWindowLimit: false, limiter.KeySlidingWindowDuration: false,
		"leaky_rate_limit": false, "leaky_tick_ms": false, "tick_reduction": false,
		"timestamp_cleanup_tick_ms": false, limiter.KeyConcurrencyLimit: false,
		limiter.KeyNumberOfWorkers: false, "is_external_reduction_enabled": true, "no_limit": true,
	}
)

// arweaveOlderKeys are keys of the node's configuration that limited
// requests before its limiter groups (2.9.6), or that touch what limiterd
// limits, with what takes their place in limiterd (docs/arweave297.md,
// "The node's older keys"). A key under one of them (a map's entries) is
// listed as the key itself.
var arweaveOlderKeys = map[string]string{
	"requests_per_minute_limit": "the node's older per-IP limit of requests a minute (ar_blacklist_middleware), which its limiter groups replaced in 2.9.6: " +
		"limiterd limits by group (general: leaky_limit tokens per leaky_tick_interval ms, 450 per 30 s by default)",
	"requests_per_minute_limit_by_ip": "the node's older per-IP overrides of requests_per_minute_limit: limiterd has no per-peer limit; " +
		"exempt a peer (peers.exempt, POST /api/v1/exemptions) or deny it (kind deny_peer)",
	"max_connections":              "the node's cap on its HTTP connections: limiterd's own is server.max_conns (default 16384), and server.max_conns_per_ip per client address",
	"semaphores":                   "the node's caps on concurrent calls per endpoint, all peers together: limiterd caps each peer's requests in flight (concurrency_limit per group) and its connections to the node (server.upstream_max_conns)",
	"http_api.tcp.num_acceptors":   "the node's acceptor processes: nothing in limiterd (Go's runtime accepts)",
	"http_api.tcp.max_connections": "the node's cap on its HTTP connections: limiterd's own is server.max_conns",
}

// arweaveGroupOrder is the order in which the node lists its groups.
var arweaveGroupOrder = []string{"general", "chunk", "data_sync_record", "recent_hash_list_diff", "block_index",
	"wallet_list", "get_vdf", "get_vdf_session", "get_previous_vdf_session", "metrics"}

// imported is what import-arweave-config found in a node's file.
type imported struct {
	version limiter.ArweaveVersion
	local   []string                     // the local peers' addresses and CIDRs
	port    int64                        // the node's HTTP port (its "port"), 0 if unset
	groups  map[string]map[string]string // group → key → TOML value
	origin  map[string]string            // http_api.limiter.<g>.<k> of the output → the node's key
	ignored []string
}

// importArweaveConfig is limiterd import-arweave-config FILE [-o OUT]
// [-force] [-merge CONFIG].
func (m *Main) importArweaveConfig(args []string) int {
	fs := flag.NewFlagSet("import-arweave-config", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	if helpRequested(args) {
		fs.SetOutput(m.Stdout)
	}
	out := fs.String("o", "", "write the config.toml here, a new `FILE` (default: standard output; with -merge: CONFIG itself)")
	force := fs.Bool("force", false, "let -o replace a file that exists")
	merge := fs.String("merge", "", "write the node's limiter settings into this existing config.toml (`CONFIG`), keeping everything else")
	setUsage(fs, "import-arweave-config")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	// Where the output goes, checked before the work: never over a file
	// that exists unless asked.
	dest := *out
	if dest == "" {
		dest = *merge
	}
	if *out != "" && !*force {
		if _, err := os.Stat(*out); err == nil {
			fmt.Fprintf(m.Stderr, "import-arweave-config: %s exists: -merge %s writes the node's limiter settings into it, keeping the rest; -force replaces it whole\n", *out, *out)
			return exitUsage
		}
	}
	b, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd:", err)
		return exitUsage
	}
	im, errs := importArweave(pos[0], b)
	for _, k := range im.ignored {
		fmt.Fprintf(m.Stderr, "import-arweave-config: ignored %s\n", k)
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(m.Stderr, "import-arweave-config: %s\n", e)
		}
		return exitUsage
	}
	toml := im.toml(filepath.Base(pos[0]))
	name := *out
	if name == "" {
		name = "the imported config"
	}
	if _, _, err := config.Load(config.Source{Path: name, Data: toml}); err != nil {
		for _, e := range config.Errors(err) {
			key := e.Field
			if k, ok := im.origin[key]; ok {
				key = k
			}
			fmt.Fprintf(m.Stderr, "import-arweave-config: %s: %s\n", key, e.Problem)
		}
		return exitUsage
	}
	mode := os.FileMode(0o644)
	if *merge != "" {
		var changes []string
		toml, mode, changes, err = im.mergeInto(*merge)
		if err != nil {
			fmt.Fprintf(m.Stderr, "import-arweave-config: -merge %s: %v\n", *merge, err)
			return exitUsage
		}
		for _, c := range changes {
			fmt.Fprintf(m.Stderr, "import-arweave-config: %s: %s\n", dest, c)
		}
	}
	if dest == "" {
		m.Stdout.Write(toml)
		return exitOK
	}
	if err := writeReplacing(dest, toml, mode); err != nil {
		fmt.Fprintln(m.Stderr, "limiterd:", err)
		return exitRuntime
	}
	return exitOK
}

// writeReplacing writes b to path through a temporary file renamed over
// it: path is whole, old or new, whatever happens. An existing file keeps
// its mode and, when the process may, its owner.
func writeReplacing(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		keepOwner(tmp, fi)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// importArweave reads a node's configuration (JSON, or YAML when the name
// ends in .yaml/.yml or the content does not start with "{") and returns
// what limiterd makes of it, or every problem found, each naming its key.
func importArweave(name string, b []byte) (imported, []error) {
	im := imported{groups: map[string]map[string]string{}, origin: map[string]string{}}
	var doc any
	ext := strings.ToLower(filepath.Ext(name))
	if ext == ".yaml" || ext == ".yml" || (ext != ".json" && !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{"))) {
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return im, []error{fmt.Errorf("%s is not YAML: %w", name, err)}
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return im, []error{fmt.Errorf("%s is not JSON: %w", name, err)}
		}
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return im, []error{fmt.Errorf("%s: the configuration must be an object (a map of keys)", name)}
	}
	flat := map[string]any{}
	var errs []error
	flatten(root, "", flat, &errs)
	var forms [2][]string // the keys of each form, 2.9.6 and 2.9.7
	listed := map[string]bool{}
	for _, key := range sortedKeys(flat) {
		v := flat[key]
		switch {
		case key == "local_peers" || key == "peers.local":
			form := 0
			if key == "peers.local" {
				form = 1
			}
			forms[form] = append(forms[form], key)
			errs = append(errs, im.localPeers(key, v)...)
		case strings.HasPrefix(key, "http_api.limiter."):
			forms[0] = append(forms[0], key)
			errs = appendErr(errs, im.groupKey(key, strings.TrimPrefix(key, "http_api.limiter."), v, arweaveKeys296))
		case strings.HasPrefix(key, "limiter."):
			forms[1] = append(forms[1], key)
			errs = appendErr(errs, im.groupKey(key, strings.TrimPrefix(key, "limiter."), v, arweaveKeys297))
		case key == "port":
			if n, ok := integer(v); ok && n > 0 && n < 1<<16 {
				im.port = n
			} else {
				errs = append(errs, &limiter.FieldError{Field: key, Problem: fmt.Sprintf("must be a port number, got %v", v)})
			}
		default:
			line := key + ": not a limiter setting"
			if older, ok := olderKey(key); ok {
				line = older
			}
			if !listed[line] {
				listed[line] = true
				im.ignored = append(im.ignored, line)
			}
		}
	}
	if len(forms[0]) > 0 && len(forms[1]) > 0 {
		errs = append(errs, &limiter.FieldError{Field: forms[1][0], Problem: fmt.Sprintf("the file mixes the 2.9.6 form (%s) and the 2.9.7 form (%s): convert it with the node's convert_config first", forms[0][0], forms[1][0])})
	}
	if len(forms[1]) > 0 {
		im.version = limiter.Arweave297
	}
	return im, errs
}

// olderKey returns the line that lists key, or the older key of the
// node's it is an entry of, with what replaces it; ok false for a key that
// is not one of arweaveOlderKeys. A map's entries give one line, the
// map's, at its first entry.
func olderKey(key string) (string, bool) {
	for k, what := range arweaveOlderKeys {
		if key == k {
			return k + ": " + what, true
		}
		if strings.HasPrefix(key, k+".") {
			return k + ": " + what, true
		}
	}
	return "", false
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

// flatten turns nested objects into dotted keys; arrays and scalars are
// leaves. The same key given both nested and dotted is a problem.
func flatten(m map[string]any, prefix string, out map[string]any, errs *[]error) {
	for _, k := range sortedKeys(m) {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			flatten(sub, key, out, errs)
			continue
		}
		if _, dup := out[key]; dup {
			*errs = append(*errs, &limiter.FieldError{Field: key, Problem: "given twice (nested and dotted)"})
			continue
		}
		out[key] = m[k]
	}
}

// groupKey imports one limiter key: rest is "<group>.<key>".
func (im *imported) groupKey(full, rest string, v any, keys map[string]bool) error {
	group, key, ok := strings.Cut(rest, ".")
	if !ok {
		return &limiter.FieldError{Field: full, Problem: "not a group key (want <group>.<key>)"}
	}
	if group == limiter.GroupLocalPeers {
		im.ignored = append(im.ignored, full+": local_peers is built into limiterd (never limited)")
		return nil
	}
	if !slices.Contains(arweaveGroupOrder, group) {
		return &limiter.FieldError{Field: full, Problem: fmt.Sprintf("unknown group %q: the Arweave node's groups are %s", group, strings.Join(arweaveGroupOrder, ", "))}
	}
	isBool, known := keys[key]
	if !known {
		names := sortedKeys(keys)
		return &limiter.FieldError{Field: full, Problem: fmt.Sprintf("unknown limiter key %q (the keys of this form are %s)", key, strings.Join(names, ", "))}
	}
	var val string
	if isBool {
		b, ok := v.(bool)
		if !ok {
			return &limiter.FieldError{Field: full, Problem: fmt.Sprintf("must be true or false, got %v", v)}
		}
		val = strconv.FormatBool(b)
	} else {
		n, ok := integer(v)
		if !ok {
			return &limiter.FieldError{Field: full, Problem: fmt.Sprintf("must be an integer, got %v", v)}
		}
		val = strconv.FormatInt(n, 10)
	}
	if im.groups[group] == nil {
		im.groups[group] = map[string]string{}
	}
	im.groups[group][key] = val
	im.origin["http_api.limiter."+group+"."+key] = full
	return nil
}

// integer returns v as an integer if it is one: a JSON number without a
// fraction, a YAML integer.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n <= 1<<63-1 {
			return int64(n), true
		}
	}
	return 0, false
}

// localPeers imports the node's local peers ("1.2.3.4:1984", "1.2.3.4"
// or a CIDR, "10.0.0.0/8") as addresses and CIDRs: limiterd keys peers by
// IP. Each is listed once, in the node's order; the work is linear in the
// list.
func (im *imported) localPeers(key string, v any) []error {
	list, ok := v.([]any)
	if !ok {
		return []error{&limiter.FieldError{Field: key, Problem: "must be a list of addresses"}}
	}
	var errs []error
	seen := make(map[string]bool, len(im.local)+len(list))
	for _, a := range im.local {
		seen[a] = true
	}
	for i, x := range list {
		s, _ := x.(string)
		a, ok := localPeer(s)
		if !ok {
			errs = append(errs, &limiter.FieldError{Field: fmt.Sprintf("%s[%d]", key, i), Problem: fmt.Sprintf("%q is not an IP address (with or without a port) or a CIDR", x)})
			continue
		}
		if !seen[a] {
			seen[a] = true
			im.local = append(im.local, a)
		}
	}
	return errs
}

// localPeer returns a local peer of the node's as peers.exempt writes it:
// an address without its port, or a CIDR (its address masked).
func localPeer(s string) (string, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		p = p.Masked()
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p.IsSingleIP() {
			return p.Addr().String(), true
		}
		return p.String(), true
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		addr, err = ap.Addr(), perr
	}
	if err != nil {
		return "", false
	}
	return addr.Unmap().String(), true
}

// toml writes the imported configuration: only what the node's file sets;
// every other key keeps limiterd's default for the version, which is the
// node's.
func (im *imported) toml(from string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# limiterd configuration imported from the Arweave node's %s\n", from)
	b.WriteString("# (limiterd import-arweave-config). Keys not set here keep the node's\n# defaults for its version; see config.toml for every key.\n\n")
	port := im.port
	if port == 0 {
		port = 1984
	}
	b.WriteString("[server]\n# limiterd beside the node first, on a spare port; then in its place\n# (docs/operations.md, \"The cut-over in front of a node\").\n")
	fmt.Fprintf(&b, "listen = \"0.0.0.0:1985\"\nupstream = \"http://127.0.0.1:%d\"", port)
	if im.port != 0 {
		b.WriteString(" # the node's port")
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "[arweave]\nversion = %q\n", im.version)
	if len(im.local) > 0 {
		b.WriteString("\n[peers]\n# The node's local peers: never limited (group local_peers).\nexempt = [")
		for i, a := range im.local {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", a)
		}
		b.WriteString("]\n")
	}
	for _, g := range arweaveGroupOrder {
		keys := im.groups[g]
		if len(keys) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n[http_api.limiter.%s]\n", g)
		for _, k := range sortedKeys(keys) {
			fmt.Fprintf(&b, "%s = %s\n", k, keys[k])
		}
	}
	return b.Bytes()
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
