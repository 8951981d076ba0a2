package config_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// The defaults: 2.9.6, both header sets, the fixed throttle, and the
// worker-shard keys the shipped file does not list.
func TestArweaveDefaults(t *testing.T) {
	c, _ := mustLoad(t, config.Source{})
	if c.Arweave.Version != limiter.Arweave296 || c.Server.RateLimitHeaders != ratelimit.SetBoth || c.Throttle.Mode != throttle.ModeFixed {
		t.Errorf("defaults: version %v, headers %v, throttle %v", c.Arweave.Version, c.Server.RateLimitHeaders, c.Throttle.Mode)
	}
	if c.Groups["metrics"].NumberOfWorkers != 1 || c.Groups["general"].NumberOfWorkers != 5 || c.Groups["chunk"].ConcurrencyScope != limiter.ScopePeer {
		t.Errorf("shards: %+v %+v", c.Groups["metrics"].Shards, c.Groups["general"].Shards)
	}
	lc, err := c.Limiter()
	if err != nil || lc.ArweaveVersion != limiter.Arweave296 {
		t.Errorf("Limiter: %v %v", lc.ArweaveVersion, err)
	}
}

// With version 2.9.7 every key a file omits takes the 2.9.7 default; a
// key it sets, by either name, wins; a new group inherits 2.9.7's general.
func TestArweave297Defaults(t *testing.T) {
	c, err := loadFile(t, `
[arweave]
version = "2.9.7"
[http_api.limiter.chunk]
leaky_rate_limit = 7000
is_external_reduction_enabled = true
[http_api.limiter.uploads]
no_limit = true
number_of_workers = 3
`)
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.ArweaveGroups297()
	chunk := want["chunk"]
	chunk.LeakyLimit, chunk.ManualReductionDisabled = 7000, false
	want["chunk"] = chunk
	up := want["general"]
	up.Mode, up.NumberOfWorkers = limiter.ModeOff, 3
	want["uploads"] = up
	if !reflect.DeepEqual(c.Groups, want) {
		t.Errorf("groups:\n got %+v\nwant %+v", c.Groups, want)
	}
	if g := c.Groups["general"]; g.SlidingWindowLimit != 3 || g.SlidingWindowDuration != 2000 || g.ConcurrencyScope != limiter.ScopeShard || g.ManualReductionDisabled {
		t.Errorf("general: %+v", g)
	}
	lc, err := c.Limiter()
	if err != nil || lc.ArweaveVersion != limiter.Arweave297 {
		t.Fatalf("Limiter: %v %v", lc.ArweaveVersion, err)
	}
	if _, err := limiter.New(memory.New(), time.UnixMilli(1_700_000_000_000), lc); err != nil {
		t.Errorf("the limiter refuses it: %v", err)
	}
	// The effective config loads back to the same.
	b, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := config.Load(config.Source{Path: "effective.toml", Data: b})
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, c)
	}
}

// The environment may choose the version and use the 2.9.7 names.
func TestArweave297Environment(t *testing.T) {
	c, err := loadFile(t, "", "LIMITERD_ARWEAVE__VERSION=2.9.7", "LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_RATE_LIMIT=900",
		"LIMITERD_HTTP_API__LIMITER__GET_VDF__NO_LIMIT=true")
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Groups["general"]; g.LeakyLimit != 900 || g.SlidingWindowLimit != 3 {
		t.Errorf("general: %+v", g)
	}
	if c.Groups["get_vdf"].Mode != limiter.ModeOff || c.Groups["get_vdf"].LeakyLimit != 180 {
		t.Errorf("get_vdf: %+v", c.Groups["get_vdf"])
	}
	// A higher layer may set a key a lower one set by its other name.
	c, err = loadFile(t, "[http_api.limiter.general]\nleaky_rate_limit = 10\n", "LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT=20")
	if err != nil || c.Groups["general"].LeakyLimit != 20 {
		t.Errorf("env over file alias: %v %+v", err, c)
	}
}

func TestArweave297Errors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		want       []string // lines, in order
	}{
		{"both names", "[http_api.limiter.general]\nleaky_limit = 1\nleaky_rate_limit = 2\n", nil,
			[]string{"config: http_api.limiter.general.leaky_rate_limit: leaky_rate_limit is the Arweave 2.9.7 name of leaky_limit: give only one of leaky_limit and leaky_rate_limit"}},
		{"both names, inverted", "[http_api.limiter.chunk]\nis_manual_reduction_disabled = true\nis_external_reduction_enabled = true\nmode = \"off\"\nno_limit = false\n", nil,
			[]string{
				"config: http_api.limiter.chunk.is_external_reduction_enabled: is_external_reduction_enabled is the Arweave 2.9.7 name of is_manual_reduction_disabled: give only one of is_manual_reduction_disabled and is_external_reduction_enabled",
				"config: http_api.limiter.chunk.no_limit: no_limit is the Arweave 2.9.7 name of mode: give only one of mode and no_limit",
			}},
		{"alias value named as written", "[http_api.limiter.general]\nleaky_rate_limit = -1\ntick_reduction = \"x\"\nno_limit = 1\n", nil,
			[]string{
				"config: http_api.limiter.general.no_limit: must be true or false, got integer 1",
				`config: http_api.limiter.general.tick_reduction: must be an integer, got string "x"`,
				"config: http_api.limiter.general.leaky_rate_limit: must be an integer ≥ 0, got -1",
			}},
		{"alias in the environment", "", []string{"LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_TICK_MS=0"},
			[]string{"config: http_api.limiter.general.leaky_tick_ms: must be an integer > 0, got 0 (environment variable LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_TICK_MS)"}},
		{"2.9.7 bounds", "[arweave]\nversion = \"2.9.7\"\n[http_api.limiter.general]\nsliding_window_duration = 86400001\n[http_api.limiter.data_sync_record]\nleaky_rate_limit = 0\n", nil,
			[]string{
				"config: http_api.limiter.data_sync_record.sliding_window_limit: sliding_window_limit + leaky_limit must be > 0 with arweave.version 2.9.7 (both are 0: every request would be rejected)",
				"config: http_api.limiter.general.sliding_window_duration: must be between 1 and 86400000 with arweave.version 2.9.7, got 86400001",
			}},
		{"bad values", "[server]\nratelimit_headers = \"all\"\n[arweave]\nversion = \"2.9.8\"\n[throttle]\nmode = \"learned\"\n[http_api.limiter.general]\nnumber_of_workers = 0\nconcurrency_scope = \"node\"\n", nil,
			[]string{
				`config: server.ratelimit_headers: must be one of ietf, arweave, both, none, got "all"`,
				`config: arweave.version: must be "2.9.6" or "2.9.7", got "2.9.8"`,
				"config: http_api.limiter.general.number_of_workers: must be an integer from 1 to 1024, got 0",
				`config: http_api.limiter.general.concurrency_scope: must be "peer" or "shard", got "node"`,
				`config: throttle.mode: must be "fixed" or "adaptive", got "learned"`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file, tc.env...)
			got := errorLines(t, err)
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
	// 2.9.6 accepts what 2.9.7 refuses.
	if _, err := loadFile(t, "[http_api.limiter.general]\nsliding_window_duration = 86400001\n[http_api.limiter.data_sync_record]\nleaky_limit = 0\n"); err != nil {
		t.Errorf("2.9.6: %v", err)
	}
}
