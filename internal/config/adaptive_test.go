package config_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// The adaptive keys in a file (docs/limiting.md, "Adaptive concurrency"):
// every bad value refused at load, naming the group and the key; good ones
// reach the group, the others keeping general's.
func TestAdaptiveKeyErrors(t *testing.T) {
	const route = "\n[[routes.rule]]\ngroup = \"api\"\npaths = [\"/api/**\"]\n"
	for _, tc := range []struct {
		name, file string
		want       []string // exact lines, or "~regexp"
	}{
		{
			name: "the minimum above the maximum",
			file: "[http_api.limiter.api]\nadaptive_concurrency = true\nadaptive_min_limit = 200\nadaptive_max_limit = 100\n" + route,
			want: []string{"config: http_api.limiter.api.adaptive_min_limit: must be at most adaptive_max_limit (100), got 200"},
		},
		{
			name: "zero and negative bounds",
			file: "[http_api.limiter.a]\nadaptive_min_limit = 0\n[http_api.limiter.b]\nadaptive_max_limit = -3\n",
			want: []string{
				"config: http_api.limiter.a.adaptive_min_limit: must be an integer from 1 to 2147483647, got 0",
				"config: http_api.limiter.b.adaptive_max_limit: must be an integer from 1 to 2147483647, got -3",
			},
		},
		{
			name: "an algorithm that does not exist",
			file: "[http_api.limiter.api]\nadaptive_concurrency = true\nadaptive_algorithm = \"vegas\"\n" + route,
			want: []string{`config: http_api.limiter.api.adaptive_algorithm: must be "gradient", got "vegas"`},
		},
		{
			name: "parameters out of range",
			file: "[http_api.limiter.general]\nadaptive_window = 5\nadaptive_percentile = 0\nadaptive_buffer = 101\nadaptive_smoothing = 0\nadaptive_probe_interval = 10\nadaptive_probe_samples = 20000\n",
			want: []string{
				"~^config: http_api.limiter.general.adaptive_window: must be an integer from 10 to 60000, got 5",
				"~adaptive_percentile: must be an integer from 1 to 100, got 0",
				"~adaptive_buffer: must be an integer from 0 to 100, got 101",
				"~adaptive_smoothing: must be an integer from 1 to 100, got 0",
				"~adaptive_probe_interval: must be an integer from 1000 to 2147483647, got 10",
				"~adaptive_probe_samples: must be an integer from 1 to 10000, got 20000",
			},
		},
		{
			name: "a switch that is not a boolean",
			file: "[http_api.limiter.general]\nadaptive_concurrency = \"yes\"\n",
			want: []string{`~^config: http_api.limiter.general.adaptive_concurrency: must be true or false, got string "yes"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file)
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
	c, err := loadFile(t, "[http_api.limiter.general]\nadaptive_max_limit = 400\n[http_api.limiter.api]\nadaptive_concurrency = true\nadaptive_min_limit = 8\n"+route)
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.DefaultAdaptive()
	want.AdaptiveConcurrency, want.AdaptiveMinLimit, want.AdaptiveMaxLimit = true, 8, 400
	if got := c.Groups["api"].Adaptive; got != want {
		t.Errorf("api: %+v, want %+v", got, want)
	}
	if c.Groups["chunk"].AdaptiveConcurrency {
		t.Error("chunk took api's adaptive_concurrency")
	}
}
