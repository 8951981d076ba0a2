package config_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// fuzzPath names the fuzzed file in errors; it is never read (Data is).
const fuzzPath = "/etc/limiterd/fuzz.toml"

// FuzzLoad: a config file's bytes through Load, the entry point of
// limiterd's configuration (TOML parse, 2.9.7 aliases, schema, validation).
// Whatever the bytes, Load never panics. A refusal is a nil Config and one
// problem or more, each naming a key (or the file, with the line
// and column of a syntax error) and a problem. What loads re-validates:
// the limiter core and the outbound throttle accept it as they get it,
// and its TOML (check-config's output) loads back to an equal Config.
func FuzzLoad(f *testing.F) {
	f.Add(limiterd.DefaultConfig)
	if b, err := os.ReadFile("testdata/custom.toml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"[snapshot]\ninterval = \"1ns\"\n",
		"[snapshot]\ninterval = \"-1s\"\n",
		"[peers]\ntrusted_proxies = [\"10.0.0.0/8\"]\nforwarded_header = \"auto\"\n",
		"[peers]\ntrusted_proxies = [\"10.0.0.0/8\"]\n",
		"[peers]\nipv6_prefix = 127\n",
		"[peers]\nexempt = [\"::ffff:10.0.0.1/120\", \"fe80::1%eth0\"]\n",
		"[[routes.rule]]\ngroup = \"nosuch\"\npaths = [\"/x\"]\n",
		"[[routes.rule]]\ngroup = \"chunk\"\npaths = [\"re:(\", \"a/**/b\", \"/x*\"]\nmethods = [\"get\"]\n",
		"[[routes.rule]]\ngroup = \"chunk\"\npaths = [\"re:^/chunk/[0-9]+$\", \"/chunk2/**\"]\nreduce_on_status = [99, 600]\n",
		"[routes]\nrule = []\n",
		"[http_api.limiter.general]\nleaky_limit = 9223372036854775807\nleaky_tick_interval = 0\n",
		"[http_api.limiter.new]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = 1000\nburst = 5\n",
		"[http_api.limiter.general]\nmode = \"sometimes\"\n",
		"[arweave]\nversion = \"2.9.7\"\n",
		"[arweave]\nversion = \"9.9.9\"\n",
		"[throttle]\nmode = \"adaptive\"\n[[throttle.rule]]\ntype = \"x\"\nrpm = 0\npaths = [\"re:(?i\"]\n",
		"[server]\nlisten = \"nohostport\"\nupstream = \"ftp://x\"\nshutdown_timeout = \"forever\"\n",
		"[server]\nlisten = 8080\n",
		"[cluster]\nbackend = \"redis\"\n",
		"[admin]\ntoken = \"short\"\n",
		"[[admin.tokens]]\nname = \"a\"\ntoken = \"" + strings.Repeat("t", 40) + "\"\nscope = \"read\"\n",
		"[server]\n[server]\n",
		"a = 1\na = 2\n",
		"[x.y.z]\nw = {}\n",
		"\xff\xfe[server]\n",
		"[server]\ndata_dir = \"rel/dir\"\n",
		"key = \"\\u0000\"\n",
		"[http_api.limiter.\"\"]\nleaky_limit = 1\n",
		"[http_api.limiter.\"a\\u0000b\"]\nleaky_limit = 1\n",
		"[routes]\nexempt_paths = [\"\", \"re:\", \"/**\", \"//\"]\n",
		"[" + strings.Repeat("a.", 200) + "b]\n",
	} {
		f.Add([]byte(s))
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		src := config.Source{Path: fuzzPath, Required: true, Data: data}
		c, _, err := config.Load(src)
		if err != nil {
			if c != nil {
				t.Fatalf("%q: an error and a Config", data)
			}
			errs := config.Errors(err)
			if len(errs) == 0 {
				t.Fatalf("%q: error %v holds no problem", data, err)
			}
			for _, e := range errs {
				if e.Field == "" || strings.TrimSpace(e.Problem) == "" {
					t.Fatalf("%q: %#v names no key or no problem", data, e)
				}
			}
			return
		}
		// It re-validates: the core and the throttle take it as it is.
		lc, err := c.Limiter()
		if err != nil {
			t.Fatalf("%q loads, but Limiter(): %v", data, err)
		}
		if _, err := limiter.New(memory.New(), now, lc); err != nil {
			t.Fatalf("%q loads, but limiter.New: %v", data, err)
		}
		if _, err := throttle.New(now, c.ThrottleConfig()); err != nil {
			t.Fatalf("%q loads, but throttle.New: %v", data, err)
		}
		// Its TOML loads back to the same Config, and again to the same TOML.
		b, err := c.TOML()
		if err != nil {
			t.Fatalf("%q: TOML: %v", data, err)
		}
		c2, _, err := config.Load(config.Source{Path: fuzzPath, Required: true, Data: b})
		if err != nil {
			t.Fatalf("%q loads, but its TOML does not: %v\n%s", data, err, b)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("%q: round trip differs:\n got %+v\nwant %+v\n%s", data, c2, c, b)
		}
		if b2, err := c2.TOML(); err != nil || string(b2) != string(b) {
			t.Fatalf("%q: TOML not stable: %v\n%s\n---\n%s", data, err, b, b2)
		}
	})
}
