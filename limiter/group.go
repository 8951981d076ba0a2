package limiter

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/limiterd/limiterd/limiter/algo"
)

// Mode says how a group applies its decision.
type Mode uint8

// The modes of a group.
const (
	// ModeEnforce rejects what the hybrid decision rejects.
	ModeEnforce Mode = iota
	// ModeDryRun decides and updates state exactly as enforce, but lets a
	// would-be rejection through and counts it as would_reject.
	ModeDryRun
	// ModeOff admits everything and changes no state.
	ModeOff
)

var modeNames = [...]string{ModeEnforce: "enforce", ModeDryRun: "dry_run", ModeOff: "off"}

// String returns the configuration name of m.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// ParseMode parses "enforce", "dry_run" or "off".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not one of enforce, dry_run, off", s)
}

// Names of the built-in groups.
const (
	// GroupGeneral is the group of every path no rule matches, and the
	// group whose values fill the keys another group omits.
	GroupGeneral = "general"
	// GroupLocalPeers is the built-in, unlimited group of exempt peers.
	GroupLocalPeers = "local_peers"
)

// The keys of a group table, with Arweave's names.
const (
	KeySlidingWindowLimit    = "sliding_window_limit"
	KeySlidingWindowDuration = "sliding_window_duration"
	KeyCleanupInterval       = "sliding_window_timestamp_cleanup_interval"
	KeyCleanupExpiry         = "sliding_window_timestamp_cleanup_expiry"
	KeyLeakyLimit            = "leaky_limit"
	KeyLeakyTickInterval     = "leaky_tick_interval"
	KeyLeakyTickReduction    = "leaky_tick_reduction"
	KeyConcurrencyLimit      = "concurrency_limit"
	KeyManualReductionOff    = "is_manual_reduction_disabled"
	KeyMode                  = "mode"
	// The keys of the other algorithms (docs/limiting.md): the group's
	// algorithm and, for all but the hybrid, its limits.
	KeyAlgorithm = "algorithm"
	KeyLimit     = "limit"
	KeyPeriod    = "period"
	KeyBurst     = "burst"
)

// GroupSettings holds the limits of one route group. Durations and
// intervals are integer milliseconds, as in the Arweave node's config.
type GroupSettings struct {
	SlidingWindowLimit      int64 `json:"sliding_window_limit"`
	SlidingWindowDuration   int64 `json:"sliding_window_duration"`
	CleanupInterval         int64 `json:"sliding_window_timestamp_cleanup_interval"`
	CleanupExpiry           int64 `json:"sliding_window_timestamp_cleanup_expiry"`
	LeakyLimit              int64 `json:"leaky_limit"`
	LeakyTickInterval       int64 `json:"leaky_tick_interval"`
	LeakyTickReduction      int64 `json:"leaky_tick_reduction"`
	ConcurrencyLimit        int64 `json:"concurrency_limit"`
	ManualReductionDisabled bool  `json:"is_manual_reduction_disabled"`
	Mode                    Mode  `json:"-"`
	// Algorithm decides the group's requests after the concurrency check
	// (docs/limiting.md, "Other algorithms"); the zero value is the hybrid,
	// which uses the keys above. The others use Limit requests per Period ms
	// and, the token bucket and GCRA, a Burst (0: the limit); for the hybrid
	// Limit and Period are 0 (unset) or carried for groups that inherit them.
	Algorithm algo.Kind `json:"algorithm"`
	Limit     int64     `json:"limit"`
	Period    int64     `json:"period"`
	Burst     int64     `json:"burst"`
	Shards
	Adaptive
}

// Params returns the limits of a group whose algorithm is not the hybrid,
// burst resolved.
func (s *GroupSettings) Params() algo.Params { return algo.Resolve(s.Limit, s.Period, s.Burst) }

// maxSetting bounds integer settings so that sums and products of them
// cannot overflow: about 24 days in milliseconds, or two billion requests.
const maxSetting = 1<<31 - 1

// Validate checks s as docs/config.md says: the two limits are integers ≥ 0,
// the durations, intervals, the tick reduction and the concurrency limit are
// integers > 0. The error names the group and the first offending key.
func (s GroupSettings) Validate(group string) error {
	for _, k := range groupKeyTable {
		if k.int == nil || k.Part != PartHybrid && k.Part != PartCommon {
			continue
		}
		switch v := *k.int(&s); {
		case v < k.Min:
			rel := "≥ 0"
			if k.Min == 1 {
				rel = "> 0"
			}
			return settingError(group, k.Name, fmt.Sprintf("must be an integer %s, got %d", rel, v))
		case v > k.Max:
			return settingError(group, k.Name, fmt.Sprintf("must be at most %d, got %d", k.Max, v))
		}
	}
	if s.Mode > ModeOff {
		return settingError(group, KeyMode, fmt.Sprintf("unknown mode %d", s.Mode))
	}
	if s.Algorithm == algo.Hybrid {
		// Unset (0) or carried for the groups that inherit them: valid
		// values either way.
		for _, c := range []struct {
			key string
			v   int64
		}{{KeyLimit, s.Limit}, {KeyPeriod, s.Period}} {
			if c.v < 0 || c.v > algo.MaxValue {
				return settingError(group, c.key, fmt.Sprintf("must be an integer from 1 to %d, got %d", algo.MaxValue, c.v))
			}
		}
	}
	if key, problem := algo.Problem(s.Algorithm, s.Limit, s.Period, s.Burst); key != "" {
		return settingError(group, key, problem)
	}
	if err := s.Shards.validate(group); err != nil {
		return err
	}
	return s.Adaptive.validate(group)
}

// FieldError says that one field is wrong: a configuration key
// ("http_api.limiter.chunk.leaky_limit", "routes.rule[2].paths[0]"), a
// key of a live edit, a field of an API body or query ("peer"). It is the
// one error of that shape in limiterd: the core, the configuration, the
// live edits, the outbound throttle's configuration and the admin API's
// bodies all say what is wrong with it, and the admin API answers it 422,
// naming the field (docs/api.md).
type FieldError struct {
	// Field names what is wrong, list indices 0-based; "" when the
	// problem is with the input as a whole. A group's setting is named
	// as its configuration key (GroupField).
	Field string
	// Problem says what is wrong, for a person.
	Problem string
	// Err is the underlying error, if any: a *PatternError, a file
	// system error, a sentinel such as ErrUnknownKey.
	Err error
}

// Error returns "<field>: <problem>", or the problem alone when no field
// is named.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Unwrap returns the underlying error, if any.
func (e *FieldError) Unwrap() error { return e.Err }

// groupFieldPrefix starts the configuration key of every group setting.
const groupFieldPrefix = "http_api.limiter."

// GroupField returns the configuration key of a group's setting,
// "http_api.limiter.<group>.<key>", or of the group's table for key "".
func GroupField(group, key string) string {
	if key == "" {
		return groupFieldPrefix + group
	}
	return groupFieldPrefix + group + "." + key
}

// SplitGroupField returns the group and the key a GroupField names (key
// "" for the group's table); ok is false for a field that is not a
// group's.
func SplitGroupField(field string) (group, key string, ok bool) {
	rest, ok := strings.CutPrefix(field, groupFieldPrefix)
	if !ok {
		return "", "", false
	}
	group, key, _ = strings.Cut(rest, ".")
	return group, key, true
}

// settingError is the error of group's setting key.
func settingError(group, key, problem string) *FieldError {
	return &FieldError{Field: GroupField(group, key), Problem: problem}
}

// Errors of this package.
var (
	// ErrUnknownGroup is returned for a group name no settings define.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrUnknownKey is returned for a group key that does not exist.
	ErrUnknownKey = errors.New("unknown key")
	// ErrReservedGroup is returned when settings try to define local_peers.
	ErrReservedGroup = errors.New("local_peers is built in and cannot be configured")
	// ErrTooManyGroups is returned when more than MaxGroups groups are defined.
	ErrTooManyGroups = errors.New("too many groups")
)

// MaxGroups bounds the number of groups, local_peers included, that one
// Limiter can know over its lifetime.
const MaxGroups = 64

// ResolveGroups turns the operator's tables into complete settings: general
// must be present and complete enough to validate on its own (its omitted
// keys take the Arweave general defaults), every other group takes
// general's value for each key it omits. Every group is validated; the
// error names the group and the key.
func ResolveGroups(tables map[string]PartialGroup) (map[string]GroupSettings, error) {
	if _, ok := tables[GroupLocalPeers]; ok {
		return nil, settingError(GroupLocalPeers, "", ErrReservedGroup.Error())
	}
	if len(tables)+1 > MaxGroups {
		return nil, fmt.Errorf("http_api.limiter: %w: %d groups, at most %d", ErrTooManyGroups, len(tables), MaxGroups-1)
	}
	general, err := tables[GroupGeneral].Resolve(GroupGeneral, ArweaveGroups()[GroupGeneral])
	if err != nil {
		return nil, err
	}
	out := map[string]GroupSettings{GroupGeneral: general}
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == GroupGeneral {
			continue
		}
		if err := validGroupName(name); err != nil {
			return nil, err
		}
		g, err := tables[name].Resolve(name, general)
		if err != nil {
			return nil, err
		}
		out[name] = g
	}
	return out, nil
}

func validGroupName(name string) error {
	if name == "" || len(name) > 64 {
		return settingError(name, "", "a group name is 1 to 64 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return settingError(name, "", fmt.Sprintf("a group name uses a-z, 0-9, _ and - only, not %q", c))
		}
	}
	return nil
}

// arweave returns settings with the Arweave defaults shared by every group
// (window duration 1000 ms, cleanups every 120000 ms, ticks every 30000 ms)
// and the given limits.
func arweave(window, leaky, reduction, concurrency int64) GroupSettings {
	return GroupSettings{
		SlidingWindowLimit:    window,
		SlidingWindowDuration: 1000,
		CleanupInterval:       120000,
		CleanupExpiry:         120000,
		LeakyLimit:            leaky,
		LeakyTickInterval:     30000,
		LeakyTickReduction:    reduction,
		ConcurrencyLimit:      concurrency,
		Shards:                Shards{NumberOfWorkers: 5},
		Adaptive:              DefaultAdaptive(),
	}
}

// DefaultConfig returns the Arweave node's limiter as it ships: its route
// groups with their production defaults (ArweaveGroups) and the routes
// that map paths to them (ArweaveRoutes), IPv6 peers keyed by their /64,
// no exempt or denied peer and no trusted proxy.
func DefaultConfig() Config {
	return Config{Groups: ArweaveGroups(), Routes: ArweaveRoutes(), IPv6Prefix: DefaultIPv6Prefix}
}

// ArweaveGroups returns the Arweave node's production group defaults
// (docs/arweave-reference.md, "Group defaults"). The map is new on every call.
func ArweaveGroups() map[string]GroupSettings {
	metrics := arweave(0, 2, 2, 2)
	metrics.LeakyTickInterval = 1000
	metrics.NumberOfWorkers = 1
	return map[string]GroupSettings{
		"general":                  arweave(0, 450, 450, 150),
		"chunk":                    arweave(100, 6000, 30, 200),
		"data_sync_record":         arweave(0, 20, 20, 40),
		"recent_hash_list_diff":    arweave(0, 120, 120, 240),
		"block_index":              arweave(0, 1, 1, 2),
		"wallet_list":              arweave(0, 1, 1, 2),
		"get_vdf":                  arweave(0, 90, 90, 90),
		"get_vdf_session":          arweave(0, 30, 30, 30),
		"get_previous_vdf_session": arweave(0, 30, 30, 30),
		"metrics":                  metrics,
	}
}
