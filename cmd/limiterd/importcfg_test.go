package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
)

// runImport runs limiterd import-arweave-config with args.
func runImport(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Hangup: make(chan os.Signal, 1), ready: make(chan struct{})}
	code = m.Run(context.Background(), append([]string{"import-arweave-config"}, args...))
	return code, out.String(), errb.String()
}

// TestImportArweaveConfig imports the sample node configurations of
// testdata/ and checks the resulting limiterd configuration: the version
// found, the local peers as exempt addresses, every limiter key set, the
// rest at the node's defaults for its version, and what was ignored.
func TestImportArweaveConfig(t *testing.T) {
	type groupEdit func(map[string]limiter.GroupSettings)
	set := func(group string, f func(*limiter.GroupSettings)) groupEdit {
		return func(gs map[string]limiter.GroupSettings) { g := gs[group]; f(&g); gs[group] = g }
	}
	for _, tc := range []struct {
		file    string
		version limiter.ArweaveVersion
		exempt  []string
		edits   []groupEdit
		ignored []string
	}{
		{"arweave-2.9.6-config.json", limiter.Arweave296, []string{"10.0.0.12", "10.0.0.13"}, []groupEdit{
			set("general", func(g *limiter.GroupSettings) {
				g.LeakyLimit, g.LeakyTickReduction, g.ConcurrencyLimit = 900, 900, 300
			}),
			set("chunk", func(g *limiter.GroupSettings) {
				g.SlidingWindowLimit, g.LeakyLimit, g.LeakyTickReduction = 200, 12000, 60
			}),
			set("data_sync_record", func(g *limiter.GroupSettings) { g.CleanupInterval, g.CleanupExpiry = 60000, 60000 }),
			set("metrics", func(g *limiter.GroupSettings) { g.ConcurrencyLimit = 4 }),
		}, []string{"data_dir", "enable", "header_sync_jobs", "http_api.tcp.num_acceptors", "max_connections", "mining_addr", "peers", "storage_modules", "sync_jobs"}},
		{"arweave-2.9.7-config.yaml", limiter.Arweave297, []string{"10.0.0.12", "10.0.0.13"}, []groupEdit{
			set("general", func(g *limiter.GroupSettings) {
				g.SlidingWindowLimit, g.SlidingWindowDuration, g.LeakyLimit, g.LeakyTickReduction = 5, 2000, 900, 900
				g.ConcurrencyLimit, g.NumberOfWorkers, g.ManualReductionDisabled = 300, 8, false
			}),
			set("chunk", func(g *limiter.GroupSettings) {
				g.LeakyLimit, g.LeakyTickReduction, g.CleanupInterval = 12000, 12000, 60000
			}),
			set("get_vdf", func(g *limiter.GroupSettings) { g.Mode = limiter.ModeOff }),
		}, []string{"data_dir", "limiter.local_peers.number_of_workers", "mining.addr", "mining.enabled", "peers.trusted",
			"storage.modules", "throttling.idle_timeout", "throttling.max_processes"}},
		{"arweave-2.9.7-config.json", limiter.Arweave297, []string{"192.168.1.20"}, []groupEdit{
			set("general", func(g *limiter.GroupSettings) { g.LeakyLimit, g.LeakyTickInterval = 600, 20000 }),
			set("data_sync_record", func(g *limiter.GroupSettings) { g.ManualReductionDisabled, g.ConcurrencyLimit = false, 80 }),
		}, []string{"data_dir"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "limiterd.toml")
			// FILE after the flag here; before it in the run below.
			code, stdout, stderr := runImport(t, "-o", out, filepath.Join("testdata", tc.file))
			if code != 0 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
			}
			var ignored []string
			for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				k, _, _ := strings.Cut(strings.TrimPrefix(line, "import-arweave-config: ignored "), ":")
				ignored = append(ignored, k)
			}
			if !reflect.DeepEqual(ignored, tc.ignored) {
				t.Errorf("ignored %q, want %q", ignored, tc.ignored)
			}
			c, _, err := config.Load(config.Source{Path: out, Required: true})
			if err != nil {
				t.Fatalf("the output does not load: %v", err)
			}
			want := limiter.ArweaveGroups()
			if tc.version == limiter.Arweave297 {
				want = limiter.ArweaveGroups297()
			}
			for _, e := range tc.edits {
				e(want)
			}
			if c.Arweave.Version != tc.version || !reflect.DeepEqual(c.Peers.Exempt, tc.exempt) || !reflect.DeepEqual(c.Groups, want) {
				t.Errorf("got version %v exempt %q groups\n %+v\nwant %v %q\n %+v", c.Arweave.Version, c.Peers.Exempt, c.Groups, tc.version, tc.exempt, want)
			}
			// Standard output, FILE before the flags.
			code, stdout, _ = runImport(t, filepath.Join("testdata", tc.file))
			written, _ := os.ReadFile(out)
			if code != 0 || stdout != string(written) {
				t.Errorf("to stdout: exit %d, differs from -o:\n%s", code, stdout)
			}
		})
	}
}

// TestImportArweaveConfigErrors: a bad key or value is an error naming
// the node's key, exit 2, nothing written.
func TestImportArweaveConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"typo.json", "", []string{`import-arweave-config: http_api.limiter.general.leaky_limt: unknown limiter key "leaky_limt"`}},
		{"bad.json", `{"http_api.limiter.chunk.leaky_limit": -1, "http_api.limiter.chunk.concurrency_limit": 1.5,
			"http_api.limiter.uploads.leaky_limit": 1, "local_peers": ["10.0.0.1", "nope"]}`, []string{
			"import-arweave-config: http_api.limiter.chunk.concurrency_limit: must be an integer, got 1.5",
			`import-arweave-config: http_api.limiter.uploads.leaky_limit: unknown group "uploads"`,
			`import-arweave-config: local_peers[1]: "nope" is not an IP address`,
		}},
		{"range.yaml", "limiter:\n  general:\n    leaky_tick_ms: 90000000\n    is_external_reduction_enabled: 1\n", []string{
			"import-arweave-config: limiter.general.is_external_reduction_enabled: must be true or false, got 1",
		}},
		{"value.yaml", "limiter:\n  general:\n    leaky_tick_ms: 90000000\n", []string{
			"import-arweave-config: limiter.general.leaky_tick_ms: must be between 1 and 86400000 with arweave.version 2.9.7, got 90000000",
		}},
		{"value.json", `{"http_api.limiter.chunk.leaky_limit": -1}`, []string{
			"import-arweave-config: http_api.limiter.chunk.leaky_limit: must be an integer ≥ 0, got -1",
		}},
		{"mixed.json", `{"http_api.limiter.chunk.leaky_limit": 1, "limiter": {"chunk": {"leaky_rate_limit": 1}}}`, []string{
			"import-arweave-config: limiter.chunk.leaky_rate_limit: the file mixes the 2.9.6 form",
		}},
		{"twice.json", `{"limiter": {"chunk": {"leaky_rate_limit": 1}}, "limiter.chunk.leaky_rate_limit": 2}`, []string{
			"import-arweave-config: limiter.chunk.leaky_rate_limit: given twice",
		}},
		{"notjson.json", `{"a": `, []string{"import-arweave-config: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "arweave-typo-config.json")
			if tc.content != "" {
				path = filepath.Join(dir, tc.name)
				os.WriteFile(path, []byte(tc.content), 0o600)
			}
			out := filepath.Join(dir, tc.name+".toml")
			code, _, stderr := runImport(t, path, "-o", out)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			var errs []string
			for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if !strings.HasPrefix(line, "import-arweave-config: ignored ") {
					errs = append(errs, line)
				}
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %q, want %q", errs, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i], w) {
					t.Errorf("error %q, want it to start %q", errs[i], w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
		})
	}
	if code, _, _ := runImport(t); code != 2 {
		t.Errorf("no FILE: exit %d", code)
	}
	if code, _, _ := runImport(t, "a.json", "b.json"); code != 2 {
		t.Errorf("two FILEs: exit %d", code)
	}
}

// TestImportNeverOverwrites: -o refuses a file that exists (it is left as
// it was) unless -force is given; the refusal names -merge and -force.
func TestImportNeverOverwrites(t *testing.T) {
	out := filepath.Join(t.TempDir(), "config.toml")
	mine := "[server]\nlisten = \"127.0.0.1:1985\"\n"
	os.WriteFile(out, []byte(mine), 0o640)
	node := filepath.Join("testdata", "arweave-2.9.6-config.json")
	code, _, stderr := runImport(t, node, "-o", out)
	if code != 2 || !strings.Contains(stderr, out+" exists: -merge "+out) || !strings.Contains(stderr, "-force replaces it") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != mine {
		t.Fatalf("the file was changed:\n%s", b)
	}
	if code, _, stderr := runImport(t, node, "-o", out, "-force"); code != 0 {
		t.Fatalf("-force: exit %d:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "[http_api.limiter.general]") {
		t.Fatalf("-force did not replace the file:\n%s", b)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o640 {
		t.Errorf("the replaced file's mode is %v, want the old one's, 0640", fi.Mode().Perm())
	}
}

// TestImportLocalPeersAndOlderKeys: a CIDR among the local peers is
// exempt as a CIDR; the node's port gives server.upstream; the node's
// older keys are listed with what replaces them, a map's once.
func TestImportLocalPeersAndOlderKeys(t *testing.T) {
	node := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(node, []byte(`{"port": 1990, "local_peers": ["10.0.0.0/8", "10.1.2.3:1984", "192.168.0.7/32", "10.0.0.0/8"],
		"requests_per_minute_limit": 900, "requests_per_minute_limit_by_ip": {"1.2.3.4": 10000, "5.6.7.8": 10},
		"semaphores": {"get_chunk": 100, "get_tx_data": 10}, "max_connections": 512,
		"http_api.limiter.general.leaky_limit": 600}`), 0o600)
	out := filepath.Join(t.TempDir(), "limiterd.toml")
	code, _, stderr := runImport(t, node, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	c, _, err := config.Load(config.Source{Path: out, Required: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.0/8", "10.1.2.3", "192.168.0.7"}; !reflect.DeepEqual(c.Peers.Exempt, want) {
		t.Errorf("exempt %q, want %q", c.Peers.Exempt, want)
	}
	if c.Server.Upstream != "http://127.0.0.1:1990" || c.Server.Listen != "0.0.0.0:1985" {
		t.Errorf("[server]: listen %s, upstream %s", c.Server.Listen, c.Server.Upstream)
	}
	for _, want := range []string{
		"ignored requests_per_minute_limit: the node's older per-IP limit of requests a minute",
		"ignored requests_per_minute_limit_by_ip: the node's older per-IP overrides",
		"ignored semaphores: the node's caps on concurrent calls per endpoint",
		"ignored max_connections: the node's cap on its HTTP connections: limiterd's own is server.max_conns",
	} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("stderr does not say once %q:\n%s", want, stderr)
		}
	}
	os.WriteFile(node, []byte(`{"local_peers": ["10.0.0.0/33"]}`), 0o600)
	if code, _, stderr := runImport(t, node); code != 2 || !strings.Contains(stderr, `local_peers[0]: "10.0.0.0/33" is not an IP address (with or without a port) or a CIDR`) {
		t.Errorf("a bad CIDR: exit %d:\n%s", code, stderr)
	}
}

// TestImportLinear: 100 000 local peers take about ten times what 10 000
// take, not a hundred (a quadratic scan took 28 s for 100 000 before it
// was linear; 1.9 s now, 0.3 s for 10 000).
func TestImportLinear(t *testing.T) {
	took := func(n int) time.Duration {
		var b strings.Builder
		b.WriteString(`{"local_peers": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"10.%d.%d.%d:1984"`, i>>16, (i>>8)&255, i&255)
		}
		b.WriteString(`]}`)
		node := filepath.Join(t.TempDir(), "config.json")
		os.WriteFile(node, []byte(b.String()), 0o600)
		out := filepath.Join(t.TempDir(), "limiterd.toml")
		start := time.Now()
		code, _, stderr := runImport(t, node, "-o", out)
		d := time.Since(start)
		if code != 0 {
			t.Fatalf("exit %d:\n%.2000s", code, stderr)
		}
		c, _, err := config.Load(config.Source{Path: out, Required: true})
		if err != nil || len(c.Peers.Exempt) != n {
			t.Fatalf("%v, %d exempt", err, len(c.Peers.Exempt))
		}
		return d
	}
	small, big := took(10_000), took(100_000)
	t.Logf("10 000 local peers imported in %v, 100 000 in %v", small, big)
	// (A quadratic import is about 100 times; 50 leaves room for a host
	// loaded by the whole suite under -race, where 30 was seen.)
	if big > 50*small {
		t.Errorf("10 times the local peers took %.0f times as long: not linear", float64(big)/float64(small))
	}
}

// TestImportMerge: -merge writes the node's limiter settings into an
// existing config — the version, its local peers added to the exempt
// list, its group keys, under the file's name for a key when it has one —
// and keeps every other line: listen, upstream, trusted proxies, tokens,
// a group's other keys, the comments. A file it cannot edit without
// guessing is left as it was.
func TestImportMerge(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	mine := `# limiterd behind nginx
[server]
listen = "127.0.0.1:1985" # only nginx reaches it
upstream = "http://127.0.0.1:1983"

[admin]
token = "0123456789abcdef0123456789abcdef"

[peers]
trusted_proxies = ["127.0.0.1"]
forwarded_header = "x-forwarded-for"

[http_api.limiter.general]
leaky_limit = 450   # to be replaced
mode = "dry_run"    # mine
`
	os.WriteFile(cfg, []byte(mine), 0o640)
	code, stdout, stderr := runImport(t, filepath.Join("testdata", "arweave-2.9.7-config.yaml"), "-merge", cfg)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q:\n%s", code, stdout, stderr)
	}
	b, _ := os.ReadFile(cfg)
	got := string(b)
	for _, keep := range []string{"# limiterd behind nginx\n", `listen = "127.0.0.1:1985" # only nginx reaches it`, `upstream = "http://127.0.0.1:1983"`,
		`token = "0123456789abcdef0123456789abcdef"`, `trusted_proxies = ["127.0.0.1"]`, `mode = "dry_run"    # mine`,
		"leaky_limit = 900   # to be replaced\n"} {
		if !strings.Contains(got, keep) {
			t.Errorf("the merged file lacks %q:\n%s", keep, got)
		}
	}
	c, _, err := config.Load(config.Source{Path: cfg, Required: true})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Groups["general"]
	if c.Arweave.Version != limiter.Arweave297 || g.LeakyLimit != 900 || g.ConcurrencyLimit != 300 || g.NumberOfWorkers != 8 || g.Mode != limiter.ModeDryRun ||
		c.Groups["get_vdf"].Mode != limiter.ModeOff || c.Groups["chunk"].LeakyLimit != 12000 {
		t.Errorf("merged: version %v, general %+v, get_vdf mode %v", c.Arweave.Version, g, c.Groups["get_vdf"].Mode)
	}
	if want := []string{"127.0.0.1", "10.0.0.12", "10.0.0.13"}; !reflect.DeepEqual(c.Peers.Exempt, want) {
		t.Errorf("exempt %q, want %q", c.Peers.Exempt, want)
	}
	for _, want := range []string{"arweave.version: 2.9.6 → 2.9.7", "peers.exempt: 2 local peers of the node's added (10.0.0.12, 10.0.0.13)",
		"http_api.limiter.general.leaky_limit: 450 → 900"} {
		if !strings.Contains(stderr, cfg+": "+want) {
			t.Errorf("the summary lacks %q:\n%s", want, stderr)
		}
	}
	if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 as before", fi.Mode().Perm())
	}
	// Again: nothing to change.
	if code, _, stderr := runImport(t, filepath.Join("testdata", "arweave-2.9.7-config.yaml"), "-merge", cfg); code != 0 || !strings.Contains(stderr, "nothing changed") {
		t.Errorf("a second merge: exit %d:\n%s", code, stderr)
	}
	// With -o, the merge goes to a new file and the config stays.
	out := filepath.Join(dir, "merged.toml")
	before, _ := os.ReadFile(cfg)
	if code, _, stderr := runImport(t, filepath.Join("testdata", "arweave-2.9.6-config.json"), "-merge", cfg, "-o", out); code != 0 {
		t.Fatalf("-merge with -o: exit %d:\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("-merge with -o changed the config")
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), `version = "2.9.6"`) {
		t.Errorf("-o's merge:\n%s", b)
	}

	dotted := filepath.Join(dir, "dotted.toml")
	odd := "http_api.limiter.general.leaky_limit = 5\n"
	os.WriteFile(dotted, []byte(odd), 0o600)
	code, _, stderr = runImport(t, filepath.Join("testdata", "arweave-2.9.6-config.json"), "-merge", dotted)
	if code != 2 || !strings.Contains(stderr, "in a form this edit does not change") {
		t.Errorf("a dotted key: exit %d:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(dotted); string(b) != odd {
		t.Errorf("the file was changed:\n%s", b)
	}
	if code, _, stderr := runImport(t, filepath.Join("testdata", "arweave-2.9.6-config.json"), "-merge", filepath.Join(dir, "missing.toml")); code != 2 {
		t.Errorf("-merge of a missing file: exit %d:\n%s", code, stderr)
	}
}
