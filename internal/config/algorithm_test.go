package config_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter/algo"
)

// The keys of the other algorithms in a file: every bad value is reported, naming the
// group and the key.
func TestAlgorithmKeyErrors(t *testing.T) {
	const route = "\n[[routes.rule]]\ngroup = \"api\"\npaths = [\"/api/**\"]\n"
	for _, tc := range []struct {
		name, file string
		env        []string
		want       []string // exact lines, or "~regexp"
	}{
		{
			name: "limit and period of 0, negative, huge",
			file: `
[http_api.limiter.a]
algorithm = "token_bucket"
limit = 0
period = -1
[http_api.limiter.b]
algorithm = "gcra"
limit = 4611686018427387904
period = 4611686018427387904
`,
			want: []string{
				"config: http_api.limiter.a.limit: must be an integer from 1 to 2147483647, got 0",
				"config: http_api.limiter.a.period: must be an integer from 1 to 2147483647, got -1",
				"config: http_api.limiter.b.limit: must be an integer from 1 to 2147483647, got 4611686018427387904",
				"config: http_api.limiter.b.period: must be an integer from 1 to 2147483647, got 4611686018427387904",
			},
		},
		{
			name: "burst with an algorithm that has none",
			file: "[http_api.limiter.api]\nalgorithm = \"fixed_window\"\nlimit = 10\nperiod = 1000\nburst = 5\n" + route,
			want: []string{"~^config: http_api.limiter.api.burst: fixed_window has no burst"},
		},
		{
			name: "burst on general's hybrid",
			file: "[http_api.limiter.general]\nburst = 5\n",
			want: []string{"~^config: http_api.limiter.general.burst: hybrid has no burst"},
		},
		{
			name: "a sliding log of a million",
			file: "[http_api.limiter.api]\nalgorithm = \"sliding_log\"\nlimit = 1000000\nperiod = 60000\n" + route,
			want: []string{"~^config: http_api.limiter.api.limit: a sliding_log keeps one timestamp per admission per peer: at most 10000, got 1000000"},
		},
		{
			name: "an unknown algorithm, a string limit",
			file: "[http_api.limiter.api]\nalgorithm = \"leaky\"\nlimit = \"10\"\n" + route,
			want: []string{
				`config: http_api.limiter.api.limit: must be an integer, got string "10"`,
				`config: http_api.limiter.api.algorithm: "leaky" is not one of hybrid, token_bucket, gcra, fixed_window, sliding_log, sliding_window`,
			},
		},
		{
			name: "an algorithm without its limit, here or in general",
			file: "[http_api.limiter.api]\nalgorithm = \"gcra\"\nperiod = 1000\n" + route,
			want: []string{"config: http_api.limiter.api.limit: is required by algorithm gcra: an integer from 1 to 2147483647 requests per period"},
		},
		{
			name: "a limit of 0 on a hybrid group, which ignores the key",
			file: "[http_api.limiter.chunk]\nlimit = 0\n",
			want: []string{"config: http_api.limiter.chunk.limit: must be an integer from 1 to 2147483647, got 0"},
		},
		{
			name: "from the environment",
			env: []string{
				"LIMITERD_HTTP_API__LIMITER__GENERAL__ALGORITHM=sliding_log",
				"LIMITERD_HTTP_API__LIMITER__GENERAL__LIMIT=1000000",
				"LIMITERD_HTTP_API__LIMITER__GENERAL__PERIOD=1000",
			},
			want: []string{"~^config: http_api.limiter.general.limit: a sliding_log keeps one timestamp"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file, tc.env...)
			lines := errorLines(t, err)
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, want := range tc.want {
				if re, ok := strings.CutPrefix(want, "~"); ok {
					if !regexp.MustCompile(re).MatchString(lines[i]) {
						t.Errorf("line %d:\n got %s\nwant match %s", i, lines[i], re)
					}
				} else if lines[i] != want {
					t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want)
				}
			}
		})
	}
}

// Inheritance: a new group takes general's algorithm and limits unless it
// names its own; the shipped groups stay hybrid when general switches; a
// burst inherited by an algorithm without one is dropped.
func TestAlgorithmInheritance(t *testing.T) {
	c, err := loadFile(t, `
[http_api.limiter.general]
algorithm = "token_bucket"
limit = 600
period = 60000
burst = 100

[http_api.limiter.api]
concurrency_limit = 10

[http_api.limiter.uploads]
algorithm = "fixed_window"
limit = 10

[[routes.rule]]
group = "api"
paths = ["/api/**"]
[[routes.rule]]
group = "uploads"
paths = ["/up/**"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Groups["api"]; g.Algorithm != algo.TokenBucket || g.Limit != 600 || g.Period != 60000 || g.Burst != 100 || g.ConcurrencyLimit != 10 {
		t.Errorf("api: %+v", g)
	}
	if g := c.Groups["uploads"]; g.Algorithm != algo.FixedWindow || g.Limit != 10 || g.Period != 60000 || g.Burst != 0 {
		t.Errorf("uploads: %+v", g)
	}
	if g := c.Groups["chunk"]; g.Algorithm != algo.Hybrid || g.LeakyLimit != 6000 {
		t.Errorf("chunk: %+v", g)
	}
	// The effective configuration written out loads back the same.
	b, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadFile(t, string(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for name, g := range c.Groups {
		if again.Groups[name] != g {
			t.Errorf("%s: %+v, back %+v", name, g, again.Groups[name])
		}
	}
}
