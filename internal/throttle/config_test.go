package throttle_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
)

// The shipped table (docs/arweave-reference.md, "Outbound throttle table"):
// every row.
func TestArweaveThrottleRules(t *testing.T) {
	th := thrNew(t, arweaveThrottle())
	for _, r := range []struct {
		path, typ string
		rpm       int
	}{
		{"/chunk/123", "chunk", 12000},
		{"/chunk", "chunk", 12000},
		{"/chunk2/1/2", "chunk", 12000},
		{"/data_sync_record", "data_sync_record", 40},
		{"/data_sync_record/1/2", "data_sync_record", 40},
		{"/footprints/abc", "footprints", 200},
		{"/recent_hash_list_diff", "recent_hash_list_diff", 240},
		{"/hash_list", "block_index", 2},
		{"/hash_list2", "block_index", 2},
		{"/block_index", "block_index", 2},
		{"/block_index2", "block_index", 2},
		{"/block/hash/abc/hash_list", "block_index", 2},
		{"/block/height/12/hash_list", "block_index", 2},
		{"/hash_list/1", "default", 900}, // exactly hash_list only
		{"/wallet_list", "wallet_list", 2},
		{"/block/hash/abc/wallet_list", "wallet_list", 2},
		{"/wallet_list/x", "default", 900},
		{"/vdf", "get_vdf", 180},
		// Only exactly /vdf is get_vdf in the client table (unlike the
		// server's routes, docs/arweave-reference.md, where /vdf2 is
		// too): /vdf2 is default.
		{"/vdf2", "default", 900},
		{"/vdf/session", "get_vdf_session", 60},
		{"/vdf2/session", "get_vdf_session", 60},
		{"/vdf3/session", "get_vdf_session", 60},
		{"/vdf4/session", "get_vdf_session", 60},
		{"/vdf/previous_session", "get_previous_vdf_session", 60},
		{"/vdf2/previous_session", "get_previous_vdf_session", 60},
		{"/vdf4/previous_session", "get_previous_vdf_session", 60},
		{"/vdf3/previous_session", "default", 900}, // no vdf3 here
		{"/tx/abc", "default", 900},
		{"/", "default", 900},
		{"/CHUNK/1", "default", 900}, // globs are case-sensitive
		{"/chunk/1?x=y", "chunk", 12000},
	} {
		typ, rpm := th.Classify(r.path)
		if typ != r.typ || rpm != r.rpm {
			t.Errorf("Classify(%q) = %q, %d; want %q, %d", r.path, typ, rpm, r.typ, r.rpm)
		}
		res := th.Peek(thrT0, "p", r.path)
		if res.Type != r.typ || res.Capacity != throttle.Capacity(r.rpm) {
			t.Errorf("Peek(%q) = %+v, want type %q capacity %d", r.path, res, r.typ, throttle.Capacity(r.rpm))
		}
	}
	a, b := throttle.ArweaveRules(), throttle.ArweaveRules()
	a[0].Paths[0] = "changed"
	if b[0].Paths[0] != "/chunk/**" {
		t.Error("ArweaveThrottleRules shares its slices")
	}
}

func TestNewThrottleErrors(t *testing.T) {
	good := arweaveThrottle
	for _, r := range []struct {
		edit func(*throttle.Config)
		want string
	}{
		{func(c *throttle.Config) { c.Period = 0 }, "throttle.period: must be at least 1ms"},
		{func(c *throttle.Config) { c.RetryInterval = time.Microsecond }, "throttle.retry_interval: must be at least 1ms"},
		{func(c *throttle.Config) { c.DefaultType = "" }, "throttle.default_type: must not be empty"},
		{func(c *throttle.Config) { c.DefaultRPM = -1 }, "throttle.default_rpm: must be ≥ 0"},
		{func(c *throttle.Config) { c.ExemptPeers = []string{"a", ""} }, "throttle.exempt_peers[1]: must not be empty"},
		{func(c *throttle.Config) { c.ExemptPaths = []string{"re:("} }, `throttle.exempt_paths[0]: "re:(": bad regular expression`},
		{func(c *throttle.Config) { c.Rules[2].Paths = []string{"/ok", "/a**"} }, `throttle.rule[2].paths[1]: "/a**"`},
		{func(c *throttle.Config) { c.Rules[1].Type = "" }, "throttle.rule[1].type: must not be empty"},
		{func(c *throttle.Config) { c.Rules[3].RPM = -2 }, "throttle.rule[3].rpm: must be ≥ 0"},
		{func(c *throttle.Config) { c.Rules[4].Paths = nil }, "throttle.rule[4].paths: at least one pattern"},
	} {
		cfg := good()
		r.edit(&cfg)
		_, err := throttle.New(thrT0, cfg)
		if err == nil || !strings.HasPrefix(err.Error(), r.want) {
			t.Errorf("NewThrottle: %v, want %q…", err, r.want)
			continue
		}
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(r.want, fe.Field+":") {
			t.Errorf("%v: not a *limiter.FieldError with its key", err)
		}
		if strings.Contains(r.want, "paths[") {
			var pe *limiter.PatternError
			if !errors.As(err, &pe) {
				t.Errorf("%v: does not wrap the *PatternError", err)
			}
		}
		// Apply refuses it too and changes nothing.
		th := thrNew(t, good())
		if err := th.Apply(cfg); err == nil {
			t.Errorf("Apply accepted %q", r.want)
		}
		got, want := th.Config(), good()
		got.Compile, want.Compile = nil, nil // a func is never DeepEqual
		if !reflect.DeepEqual(got, want) {
			t.Errorf("a failed Apply changed the config")
		}
	}
}

// hb_path:regex_matches: "re:" patterns are unanchored and case-insensitive.
func TestThrottleRegexPaths(t *testing.T) {
	for _, r := range []struct {
		pattern, path string
		want          bool
	}{
		{"re:a/.*/c", "a/b/c", true},
		{"re:a/.*/c", "a/bcd/d", false},
		{"re:a/.*/c", "A/B/C", true},
		{"re:A/.*/C", "a/b/c", true},
		{"re:a/.*/c", "/x/a/b/c/d", true}, // unanchored
		{"re:^/a$", "/a/b", false},
		{"re:/tx", "/TX2?x=1", true},
		{"/a/*/c", "/a/b/c", true},
		{"/a/*/c", "/A/b/c", false}, // globs are case-sensitive
	} {
		p, err := limiter.ParseThrottlePattern(r.pattern)
		if err != nil {
			t.Fatalf("ParseThrottlePattern(%q): %v", r.pattern, err)
		}
		if got := p.Match(r.path); got != r.want {
			t.Errorf("%q.Match(%q) = %v, want %v", r.pattern, r.path, got, r.want)
		}
		// The same pattern as an exempt path and as a rule.
		cfg := thrConfig(900)
		cfg.ExemptPaths = []string{r.pattern}
		if got := thrNew(t, cfg).Try(thrT0, "p", r.path).Exempt; got != r.want {
			t.Errorf("exempt path %q, Try(%q).Exempt = %v, want %v", r.pattern, r.path, got, r.want)
		}
		cfg = thrConfig(900)
		cfg.Rules = []throttle.Rule{{Type: "x", RPM: 60, Paths: []string{r.pattern}}}
		typ, _ := thrNew(t, cfg).Classify(r.path)
		if got := typ == "x"; got != r.want {
			t.Errorf("rule %q, Classify(%q) = %q", r.pattern, r.path, typ)
		}
	}
}

// Apply changes the rules at once and keeps the timestamps.
func TestThrottleApplyKeepsState(t *testing.T) {
	th := thrNew(t, thrConfig(10)) // capacity 4
	thrRun(t, th, []thrStep{
		thrTry(0, "p", "admit", 1), thrTry(0, "p", "admit", 2), thrTry(0, "p", "admit", 3),
	})
	if err := th.Apply(thrConfig(6)); err != nil { // capacity 2: now over
		t.Fatal(err)
	}
	thrRun(t, th, []thrStep{
		thrTry(1, "p", "wait", 3).earliest(30000), // two of the three must leave
	})
	if err := th.Apply(thrConfig(60)); err != nil {
		t.Fatal(err)
	}
	thrRun(t, th, []thrStep{thrTry(2, "p", "admit", 4)})
	cfg := thrConfig(60)
	cfg.ExemptPeers = []string{"p"}
	if err := th.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	thrRun(t, th, []thrStep{thrTry(3, "p", "exempt", 0)})
	// The config is copied in and out.
	cfg.ExemptPeers[0] = "q"
	got := th.Config()
	if got.ExemptPeers[0] != "p" {
		t.Error("Apply kept the caller's slice")
	}
	got.ExemptPeers[0] = "r"
	if th.Config().ExemptPeers[0] != "p" {
		t.Error("Config returned the throttle's own slice")
	}
}

func TestCapacity(t *testing.T) {
	for rpm, want := range map[int]int{
		-5: 1, 0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 2, 10: 4, 40: 16, 60: 24, 180: 72,
		200: 80, 240: 96, 900: 360, 12000: 4800, 1<<31 - 1: 858993458,
	} {
		if got := throttle.Capacity(rpm); got != want {
			t.Errorf("Capacity(%d) = %d, want %d", rpm, got, want)
		}
	}
	// The formula without overflow: max(1, floor((rpm div 2)·80/100)).
	for rpm := 0; rpm < 100000; rpm += 7 {
		if got, want := throttle.Capacity(rpm), max(1, (rpm/2)*80/100); got != want {
			t.Fatalf("Capacity(%d) = %d, want %d", rpm, got, want)
		}
	}
}
