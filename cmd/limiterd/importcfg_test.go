package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
