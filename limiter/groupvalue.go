package limiter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/limiterd/limiterd/limiter/algo"
)

// KeyType is the type of a group key's value.
type KeyType uint8

// The types of group keys, as a PartialGroup holds their values.
const (
	// IntKey is an integer: an int64.
	IntKey KeyType = iota + 1
	// BoolKey is true or false: a bool.
	BoolKey
	// WordKey is one of a few words: a string.
	WordKey
)

// KeyPart says which part of a group's settings a key belongs to.
type KeyPart uint8

// The parts of a group's settings.
const (
	// PartHybrid are the Arweave node's window and leaky bucket, read by
	// the hybrid only.
	PartHybrid KeyPart = iota + 1
	// PartCommon are read whatever the algorithm: the concurrency limit,
	// manual reduction, the mode and the algorithm itself.
	PartCommon
	// PartLimits are the other algorithms' limit, period and burst
	// (docs/limiting.md, "Other algorithms").
	PartLimits
	// PartShards are the worker shards of 2.9.7 (docs/arweave297.md).
	PartShards
	// PartAdaptive are the adaptive concurrency's (docs/limiting.md,
	// "Adaptive concurrency"), read whatever the algorithm.
	PartAdaptive
)

// GroupKey is one key of a group table: its name, the type, bounds or
// words of its value, and the field of GroupSettings that holds it. The
// table of them, GroupKeyTable, is the one mapping of a key's name to its
// field: GroupSettings.Value, PartialGroup.Over and Resolve, and the
// configuration's group tables and the live edits through them, all go
// by it.
type GroupKey struct {
	Name string
	Type KeyType
	Part KeyPart
	// Min and Max bound an integer key. Validate checks the keys of
	// PartHybrid and PartCommon against them whatever the group's
	// algorithm; Resolve checks the others wherever a PartialGroup gives
	// them.
	Min, Max int64
	// Words are the values of a word key.
	Words []string

	int  func(*GroupSettings) *int64 // an integer key's field
	get  func(*GroupSettings) any    // the value as a PartialGroup holds it
	set  func(*GroupSettings, any) error
	kind string // what set wants, for its error: "an integer", …
}

// groupKeyTable lists every key of a group table, in the order of
// docs/config.md: the hybrid's, the common ones, the other algorithms',
// the worker shards', the adaptive concurrency's.
var groupKeyTable = []GroupKey{
	intKey(KeySlidingWindowLimit, PartHybrid, 0, maxSetting, func(s *GroupSettings) *int64 { return &s.SlidingWindowLimit }),
	intKey(KeySlidingWindowDuration, PartHybrid, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.SlidingWindowDuration }),
	intKey(KeyCleanupInterval, PartHybrid, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.CleanupInterval }),
	intKey(KeyCleanupExpiry, PartHybrid, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.CleanupExpiry }),
	intKey(KeyLeakyLimit, PartHybrid, 0, maxSetting, func(s *GroupSettings) *int64 { return &s.LeakyLimit }),
	intKey(KeyLeakyTickInterval, PartHybrid, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.LeakyTickInterval }),
	intKey(KeyLeakyTickReduction, PartHybrid, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.LeakyTickReduction }),
	intKey(KeyConcurrencyLimit, PartCommon, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.ConcurrencyLimit }),
	{
		Name: KeyManualReductionOff, Type: BoolKey, Part: PartCommon, kind: "true or false",
		get: func(s *GroupSettings) any { return s.ManualReductionDisabled },
		set: func(s *GroupSettings, v any) error {
			b, ok := v.(bool)
			if !ok {
				return errors.New("must be true or false")
			}
			s.ManualReductionDisabled = b
			return nil
		},
	},
	wordKey(KeyMode, PartCommon, modeNames[:], ParseMode, func(s *GroupSettings) *Mode { return &s.Mode }),
	wordKey(KeyAlgorithm, PartCommon, algo.Names(), algo.Parse, func(s *GroupSettings) *algo.Kind { return &s.Algorithm }),
	intKey(KeyLimit, PartLimits, 1, algo.MaxValue, func(s *GroupSettings) *int64 { return &s.Limit }),
	intKey(KeyPeriod, PartLimits, 1, algo.MaxValue, func(s *GroupSettings) *int64 { return &s.Period }),
	intKey(KeyBurst, PartLimits, 0, algo.MaxValue, func(s *GroupSettings) *int64 { return &s.Burst }),
	intKey(KeyNumberOfWorkers, PartShards, 1, MaxWorkers, func(s *GroupSettings) *int64 { return &s.NumberOfWorkers }),
	wordKey(KeyConcurrencyScope, PartShards, scopeNames, ParseConcurrencyScope, func(s *GroupSettings) *ConcurrencyScope { return &s.ConcurrencyScope }),
	boolKey(KeyAdaptiveConcurrency, PartAdaptive, func(s *GroupSettings) *bool { return &s.AdaptiveConcurrency }),
	wordKey(KeyAdaptiveAlgorithm, PartAdaptive, adaptiveNames, ParseAdaptiveAlgorithm, func(s *GroupSettings) *AdaptiveAlgorithm { return &s.AdaptiveAlgorithm }),
	intKey(KeyAdaptiveMinLimit, PartAdaptive, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.AdaptiveMinLimit }),
	intKey(KeyAdaptiveMaxLimit, PartAdaptive, 1, maxSetting, func(s *GroupSettings) *int64 { return &s.AdaptiveMaxLimit }),
	intKey(KeyAdaptiveWindow, PartAdaptive, minAdaptiveWindow, maxAdaptiveWindow, func(s *GroupSettings) *int64 { return &s.AdaptiveWindow }),
	intKey(KeyAdaptivePercentile, PartAdaptive, 1, maxAdaptivePercents, func(s *GroupSettings) *int64 { return &s.AdaptivePercentile }),
	intKey(KeyAdaptiveBuffer, PartAdaptive, 0, maxAdaptiveBuffer, func(s *GroupSettings) *int64 { return &s.AdaptiveBuffer }),
	intKey(KeyAdaptiveSmoothing, PartAdaptive, 1, maxAdaptivePercents, func(s *GroupSettings) *int64 { return &s.AdaptiveSmoothing }),
	intKey(KeyAdaptiveProbeInterval, PartAdaptive, minProbeInterval, maxSetting, func(s *GroupSettings) *int64 { return &s.AdaptiveProbeInterval }),
	intKey(KeyAdaptiveProbeSamples, PartAdaptive, 1, maxProbeSamples, func(s *GroupSettings) *int64 { return &s.AdaptiveProbeSamples }),
}

// boolKey is a true-or-false key held by the field f returns.
func boolKey(name string, part KeyPart, f func(*GroupSettings) *bool) GroupKey {
	return GroupKey{
		Name: name, Type: BoolKey, Part: part, kind: "true or false",
		get: func(s *GroupSettings) any { return *f(s) },
		set: func(s *GroupSettings, v any) error {
			b, ok := v.(bool)
			if !ok {
				return errors.New("must be true or false")
			}
			*f(s) = b
			return nil
		},
	}
}

// intKey is an integer key held by the field f returns.
func intKey(name string, part KeyPart, lo, hi int64, f func(*GroupSettings) *int64) GroupKey {
	return GroupKey{
		Name: name, Type: IntKey, Part: part, Min: lo, Max: hi, int: f, kind: "an integer",
		get: func(s *GroupSettings) any { return *f(s) },
		set: func(s *GroupSettings, v any) error {
			n, ok := asInt64(v)
			if !ok {
				return errors.New("must be an integer")
			}
			*f(s) = n
			return nil
		},
	}
}

// wordKey is a key whose words parse parses into the field f returns.
func wordKey[T fmt.Stringer](name string, part KeyPart, words []string, parse func(string) (T, error), f func(*GroupSettings) *T) GroupKey {
	return GroupKey{
		Name: name, Type: WordKey, Part: part, Words: slices.Clip(words), kind: "a string",
		get: func(s *GroupSettings) any { return (*f(s)).String() },
		set: func(s *GroupSettings, v any) error {
			w, ok := v.(string)
			if !ok {
				return errors.New("must be a string")
			}
			t, err := parse(w)
			if err != nil {
				return err
			}
			*f(s) = t
			return nil
		},
	}
}

// asInt64 returns v as an integer if it is one: an int64 or an int, or a
// float64 with an integral value (as JSON numbers decode).
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), true
		}
	}
	return 0, false
}

// GroupKeyTable returns every key of a group table, in the order of
// docs/config.md. The slice is new on every call.
func GroupKeyTable() []GroupKey { return slices.Clone(groupKeyTable) }

// LookupGroupKey returns the key of a group table named name.
func LookupGroupKey(name string) (GroupKey, bool) {
	i := slices.IndexFunc(groupKeyTable, func(k GroupKey) bool { return k.Name == name })
	if i < 0 {
		return GroupKey{}, false
	}
	return groupKeyTable[i], true
}

// GroupKeys lists the keys of a group table in the order of docs/config.md
// but the worker shards': the keys an operator tunes a group by, those of its
// page on the dashboard and of a live edit.
var GroupKeys = func() []string {
	var out []string
	for _, k := range groupKeyTable {
		if k.Part != PartShards {
			out = append(out, k.Name)
		}
	}
	return out
}()

// Value returns the value of key in s as a PartialGroup holds it (int64,
// bool, or the word as a string).
func (s GroupSettings) Value(key string) (any, bool) {
	k, ok := LookupGroupKey(key)
	if !ok {
		return nil, false
	}
	return k.get(&s), true
}

// Parse reads the text of a value of k, as a form gives it ("450", "true",
// "dry_run"), into the value a PartialGroup holds; the error says what
// the value must be.
func (k GroupKey) Parse(s string) (any, error) {
	var v any = s
	switch k.Type {
	case IntKey:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("must be an integer, got %q", s)
		}
		v = n
	case BoolKey:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, errors.New("must be true or false")
		}
		v = b
	}
	if err := k.Check(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Check reports whether v is a value of k's type (a word, one of k's
// words), as a PartialGroup holds it; the error says what v must be.
func (k GroupKey) Check(v any) error {
	var probe GroupSettings
	return k.set(&probe, v)
}

// PartialGroup is a group table as written by an operator, or a live edit
// of one: the keys it sets, by their names (GroupKeyTable), with the
// values GroupSettings.Value gives (an int64 for an integer key, which may
// also be an int or an integral float64 as JSON decodes it; a bool; a
// word as a string). A key it omits takes the value of the settings it
// goes over: general's, or the file's under a live edit.
type PartialGroup map[string]any

// Keys returns p's keys in the order of GroupKeyTable; unknown keys last,
// by name.
func (p PartialGroup) Keys() []string {
	out := make([]string, 0, len(p))
	for _, k := range groupKeyTable {
		if _, ok := p[k.Name]; ok {
			out = append(out, k.Name)
		}
	}
	var unknown []string
	for k := range p {
		if _, ok := LookupGroupKey(k); !ok {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return append(out, unknown...)
}

// Check checks every key p sets on its own: that the key exists, that its
// value has the key's type (a word, one of its words) and, for a key
// Validate does not check whatever the algorithm (limit, period, burst,
// number_of_workers) or whatever the group's adaptive_concurrency (the
// adaptive keys), that it is within the key's bounds: the keys are
// validated when present (docs/limiting.md, "Other algorithms"). The
// error, a *FieldError, names the first bad key as field(key).
func (p PartialGroup) Check(field func(key string) string) error {
	for _, name := range p.Keys() {
		k, ok := LookupGroupKey(name)
		if !ok {
			return &FieldError{Field: field(name), Problem: "unknown key", Err: ErrUnknownKey}
		}
		if err := k.Check(p[name]); err != nil {
			return &FieldError{Field: field(name), Problem: err.Error()}
		}
		if k.Part == PartLimits || k.Part == PartShards || k.Part == PartAdaptive {
			if n, ok := asInt64(p[name]); ok && (n < k.Min || n > k.Max) {
				return &FieldError{Field: field(name), Problem: fmt.Sprintf("must be an integer from %d to %d, got %d", k.Min, k.Max, n)}
			}
		}
	}
	return nil
}

// Over returns base with every key p sets replaced by p's value; a value
// Check refuses is left out.
func (p PartialGroup) Over(base GroupSettings) GroupSettings {
	for _, k := range groupKeyTable {
		if v, ok := p[k.Name]; ok {
			s := base
			if k.set(&s, v) == nil {
				base = s
			}
		}
	}
	// A burst taken over from base (general, or the file's value under a
	// live edit) means nothing to an algorithm without one: dropped. One
	// set here is kept, for Validate to refuse.
	if _, ok := p[KeyBurst]; !ok && !base.Algorithm.HasBurst() {
		base.Burst = 0
	}
	return base
}

// Resolve returns base with p's keys over it (Over), checked (Check) and
// validated (Validate). The error names the group and the key.
func (p PartialGroup) Resolve(group string, base GroupSettings) (GroupSettings, error) {
	if err := p.Check(func(key string) string { return GroupField(group, key) }); err != nil {
		return base, err
	}
	s := p.Over(base)
	return s, s.Validate(group)
}
