package throttle

import (
	"fmt"
	"slices"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// Rule is one [[throttle.rule]]: outbound calls whose path matches
// one of Paths are of type Type and allowed RPM requests per minute
// (docs/throttle.md, "Fixed mode"). A Rule is a plain value.
type Rule struct {
	// Type names the rule's call type; calls of one type to one peer share
	// a window. Several rules may give the same type.
	Type string
	// RPM is the rate in requests per minute; a peer may take Capacity(RPM)
	// calls of the type per period.
	RPM int
	// Paths are patterns parsed with Compile ("re:" patterns
	// are case-insensitive); any one matching is enough. At least one.
	Paths []string
}

// Config configures a Throttle: the [throttle] table as plain
// values. A Config is a plain value; New and Apply copy it.
type Config struct {
	// Mode is fixed (the rule table below) or adaptive (quotas learned
	// from the peers' replies; the table then classifies nothing).
	Mode Mode
	// Period is the counting window (Arweave: 30 s); at least 1 ms, used
	// in whole milliseconds.
	Period time.Duration
	// RetryInterval is how often a call not admitted is evaluated again
	// (Arweave: 1 s); at least 1 ms. It is what Result.RetryIn says.
	RetryInterval time.Duration
	// ExemptPeers are peer names never throttled, compared exactly.
	ExemptPeers []string
	// ExemptPaths are patterns (compiled by Compile) never throttled.
	ExemptPaths []string
	// DefaultType and DefaultRPM classify a path no rule matches.
	DefaultType string
	DefaultRPM  int
	// Compile compiles the patterns of Rules and ExemptPaths: the
	// path patterns of docs/limiting.md ("Patterns"), "re:" ones
	// case-insensitive (package limiter's ThrottleMatcher). It is required when
	// there is any pattern.
	Compile func(pattern string) (Matcher, error)
	// Rules are tried in order; the first rule with a matching path wins.
	Rules []Rule
}

// Throttle defaults (docs/throttle.md): the Arweave client's values.
const (
	DefaultPeriod        = 30 * time.Second
	DefaultRetryInterval = time.Second
	DefaultType          = "default"
	DefaultRPM           = 900
)

// ArweaveRules returns the Arweave client's throttle table
// (docs/arweave-reference.md, "Outbound throttle table"), the rules of the
// shipped config.toml, as a new slice. A path none
// matches is of DefaultType at DefaultRPM. Only exactly
// "/vdf" is get_vdf: "/vdf2" falls through to the default, as in Arweave.
func ArweaveRules() []Rule {
	return []Rule{
		{Type: "chunk", RPM: 12000, Paths: []string{"/chunk/**", "/chunk2/**"}},
		{Type: "data_sync_record", RPM: 40, Paths: []string{"/data_sync_record/**"}},
		{Type: "footprints", RPM: 200, Paths: []string{"/footprints/**"}},
		{Type: "recent_hash_list_diff", RPM: 240, Paths: []string{"/recent_hash_list_diff/**"}},
		{Type: "block_index", RPM: 2, Paths: []string{"/hash_list", "/hash_list2", "/block_index", "/block_index2", "/block/*/*/hash_list"}},
		{Type: "wallet_list", RPM: 2, Paths: []string{"/wallet_list", "/block/*/*/wallet_list"}},
		{Type: "get_vdf", RPM: 180, Paths: []string{"/vdf"}},
		{Type: "get_vdf_session", RPM: 60, Paths: []string{"/vdf/session", "/vdf2/session", "/vdf3/session", "/vdf4/session"}},
		{Type: "get_previous_vdf_session", RPM: 60, Paths: []string{"/vdf/previous_session", "/vdf2/previous_session", "/vdf4/previous_session"}},
	}
}

// ArweaveConfig returns the shipped [throttle] table: the Arweave
// defaults and ArweaveRules, no exemptions.
func ArweaveConfig() Config {
	return Config{
		Period:        DefaultPeriod,
		RetryInterval: DefaultRetryInterval,
		DefaultType:   DefaultType,
		DefaultRPM:    DefaultRPM,
		Rules:         ArweaveRules(),
	}
}

// Capacity returns how many calls of a type with rate rpm one peer may make
// per period: max(1, floor((rpm div 2) · 80 / 100)), ar_rate_limiter's
// "80 % of half the per-minute limit". C(60) = 24, C(10) = 4, C(5) = 1,
// C(0) = 1, C(900) = 360, C(12000) = 4800.
func Capacity(rpm int) int {
	half := rpm / 2
	// floor(half·4/5) without overflowing for any int.
	c := half/5*4 + half%5*4/5
	return max(1, c)
}

// Matcher is one compiled path pattern of the throttle's rules or exempt
// paths (an alias, so that package limiter's ThrottleMatcher, which does
// not know this package, fits Config.Compile).
type Matcher = interface {
	// Match reports whether a request path (a query string is ignored)
	// matches.
	Match(path string) bool
}

// throttleSettings is a compiled Config; immutable.
type throttleSettings struct {
	cfg         Config // deep copy
	period      int64  // ms
	exemptPeers map[string]struct{}
	exemptPaths []Matcher
	rules       []throttleRuleRT
	def         throttleClass
	typeCap     map[string]int // capacity of each type: its first rule's
}

type throttleRuleRT struct {
	class throttleClass
	pats  []Matcher
}

// throttleClass is the classification of a path.
type throttleClass struct {
	typ    string
	rpm    int
	cap    int
	exempt bool // an exempt path
}

func cloneThrottleConfig(c Config) Config {
	c.ExemptPeers = slices.Clone(c.ExemptPeers)
	c.ExemptPaths = slices.Clone(c.ExemptPaths)
	c.Rules = slices.Clone(c.Rules)
	for i := range c.Rules {
		c.Rules[i].Paths = slices.Clone(c.Rules[i].Paths)
	}
	return c
}

func compileThrottle(cfg Config) (*throttleSettings, error) {
	cfg = cloneThrottleConfig(cfg)
	if cfg.Period < time.Millisecond {
		return nil, &limiter.FieldError{Field: "throttle.period", Problem: fmt.Sprintf("must be at least 1ms, got %v", cfg.Period)}
	}
	if cfg.RetryInterval < time.Millisecond {
		return nil, &limiter.FieldError{Field: "throttle.retry_interval", Problem: fmt.Sprintf("must be at least 1ms, got %v", cfg.RetryInterval)}
	}
	if cfg.Mode > ModeAdaptive {
		return nil, &limiter.FieldError{Field: "throttle.mode", Problem: fmt.Sprintf("unknown mode %d", cfg.Mode)}
	}
	if cfg.DefaultType == "" {
		return nil, &limiter.FieldError{Field: "throttle.default_type", Problem: "must not be empty"}
	}
	if cfg.DefaultRPM < 0 {
		return nil, &limiter.FieldError{Field: "throttle.default_rpm", Problem: fmt.Sprintf("must be ≥ 0, got %d", cfg.DefaultRPM)}
	}
	st := &throttleSettings{
		cfg:         cfg,
		period:      cfg.Period.Milliseconds(),
		exemptPeers: make(map[string]struct{}, len(cfg.ExemptPeers)),
		def:         throttleClass{typ: cfg.DefaultType, rpm: cfg.DefaultRPM, cap: Capacity(cfg.DefaultRPM)},
		typeCap:     make(map[string]int, len(cfg.Rules)+1),
	}
	for i, p := range cfg.ExemptPeers {
		if p == "" {
			return nil, &limiter.FieldError{Field: fmt.Sprintf("throttle.exempt_peers[%d]", i), Problem: "must not be empty"}
		}
		st.exemptPeers[p] = struct{}{}
	}
	var err error
	if st.exemptPaths, err = st.compilePatterns("throttle.exempt_paths", cfg.ExemptPaths); err != nil {
		return nil, err
	}
	for i, r := range cfg.Rules {
		key := fmt.Sprintf("throttle.rule[%d]", i)
		if r.Type == "" {
			return nil, &limiter.FieldError{Field: key + ".type", Problem: "must not be empty"}
		}
		if r.RPM < 0 {
			return nil, &limiter.FieldError{Field: key + ".rpm", Problem: fmt.Sprintf("must be ≥ 0, got %d", r.RPM)}
		}
		if len(r.Paths) == 0 {
			return nil, &limiter.FieldError{Field: key + ".paths", Problem: "at least one pattern"}
		}
		rt := throttleRuleRT{class: throttleClass{typ: r.Type, rpm: r.RPM, cap: Capacity(r.RPM)}}
		if rt.pats, err = st.compilePatterns(key+".paths", r.Paths); err != nil {
			return nil, err
		}
		st.rules = append(st.rules, rt)
		if _, ok := st.typeCap[r.Type]; !ok {
			st.typeCap[r.Type] = rt.class.cap
		}
	}
	if _, ok := st.typeCap[st.def.typ]; !ok {
		st.typeCap[st.def.typ] = st.def.cap
	}
	return st, nil
}

func (st *throttleSettings) compilePatterns(key string, list []string) ([]Matcher, error) {
	pats := make([]Matcher, len(list))
	for i, s := range list {
		if st.cfg.Compile == nil {
			return nil, &limiter.FieldError{Field: fmt.Sprintf("%s[%d]", key, i), Problem: "no pattern compiler (Config.Compile)"}
		}
		p, err := st.cfg.Compile(s)
		if err != nil {
			return nil, &limiter.FieldError{Field: fmt.Sprintf("%s[%d]", key, i), Problem: err.Error(), Err: err}
		}
		pats[i] = p
	}
	return pats, nil
}

// matchAny reports whether one of pats matches path.
func matchAny(pats []Matcher, path string) bool {
	for _, p := range pats {
		if p.Match(path) {
			return true
		}
	}
	return false
}

// classify returns the classification of path: the first matching rule's
// or the default, and whether the path is exempt. It does not allocate
// (glob matching; a regexp may).
func (st *throttleSettings) classify(path string) throttleClass {
	c := st.def
	for i := range st.rules {
		if r := &st.rules[i]; matchAny(r.pats, path) {
			c = r.class
			break
		}
	}
	c.exempt = matchAny(st.exemptPaths, path)
	return c
}
