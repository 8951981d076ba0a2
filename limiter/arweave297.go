package limiter

import (
	"fmt"
	"math"
	"slices"
)

// ArweaveVersion is arweave.version: which Arweave node's limiter
// limiterd reproduces (docs/config.md, docs/arweave297.md).
type ArweaveVersion uint8

// The Arweave versions.
const (
	// Arweave296 is the default: the 2.9.6 node's limiter (docs/limiting.md,
	// "The hybrid decision").
	Arweave296 ArweaveVersion = iota
	// Arweave297 is the newer limiter (app arweave_limiter,
	// docs/arweave297.md).
	Arweave297
)

var versionNames = []string{Arweave296: "2.9.6", Arweave297: "2.9.7"}

// String returns "2.9.6" or "2.9.7".
func (v ArweaveVersion) String() string { return nameOf(versionNames, int(v), "ArweaveVersion") }

// ParseArweaveVersion parses "2.9.6" or "2.9.7".
func ParseArweaveVersion(s string) (ArweaveVersion, error) {
	i, err := parseName(versionNames, s, `"2.9.6" or "2.9.7"`)
	return ArweaveVersion(i), err
}

// nameOf returns names[i], or type(i) for an i out of range.
func nameOf(names []string, i int, typ string) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

// parseName returns the index of s in names, or an error saying what is
// wanted.
func parseName(names []string, s, want string) (int, error) {
	if i := slices.Index(names, s); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("must be %s, got %q", want, s)
}

// ConcurrencyScope says over what concurrency_limit counts requests in
// flight (docs/arweave297.md).
type ConcurrencyScope uint8

// The scopes of concurrency_limit.
const (
	// ScopePeer counts a peer's requests in flight in the group (2.9.6).
	ScopePeer ConcurrencyScope = iota
	// ScopeShard counts the requests in flight of every peer of the
	// peer's worker shard (2.9.7: the shard is the last byte of the key
	// mod number_of_workers).
	ScopeShard
)

var scopeNames = []string{ScopePeer: "peer", ScopeShard: "shard"}

// String returns "peer" or "shard".
func (c ConcurrencyScope) String() string { return nameOf(scopeNames, int(c), "ConcurrencyScope") }

// ParseConcurrencyScope parses "peer" or "shard".
func ParseConcurrencyScope(s string) (ConcurrencyScope, error) {
	i, err := parseName(scopeNames, s, `"peer" or "shard"`)
	return ConcurrencyScope(i), err
}

// MarshalText returns the scope's name, for JSON.
func (c ConcurrencyScope) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// The keys of a group table that 2.9.7 added: they exist in both
// versions' files, and their semantics are those of docs/arweave297.md.
const (
	KeyNumberOfWorkers  = "number_of_workers"
	KeyConcurrencyScope = "concurrency_scope"
)

// Shards are the worker-shard settings of a group (docs/arweave297.md), part of
// GroupSettings. The 2.9.6 decision ignores them.
type Shards struct {
	// NumberOfWorkers is the number of worker shards of the group
	// (Arweave: 5; metrics and local_peers 1); 0 in settings built in
	// code counts as 1.
	NumberOfWorkers int64 `json:"number_of_workers"`
	// ConcurrencyScope is what concurrency_limit counts.
	ConcurrencyScope ConcurrencyScope `json:"concurrency_scope"`
}

// MaxWorkers bounds number_of_workers.
const MaxWorkers = 1024

// PeerConcurrencyLimit is the limit a Backend compares a peer's own
// requests in flight with: concurrency_limit with scope "peer"; with scope
// "shard", none (math.MaxInt32), because the Limiter counts the shard's
// requests in flight itself, before it asks the Backend (Decide), and the
// Backend only keeps count of the peer's.
func (s *GroupSettings) PeerConcurrencyLimit() int64 {
	if s.ConcurrencyScope == ScopeShard {
		return math.MaxInt32
	}
	return s.ConcurrencyLimit
}

// validate checks the shard settings: 0 … MaxWorkers workers (0: 1), a
// known scope.
func (s Shards) validate(group string) error {
	if s.NumberOfWorkers < 0 || s.NumberOfWorkers > MaxWorkers {
		return settingError(group, KeyNumberOfWorkers, fmt.Sprintf("must be an integer from 1 to %d, got %d", MaxWorkers, s.NumberOfWorkers))
	}
	if s.ConcurrencyScope > ScopeShard {
		return settingError(group, KeyConcurrencyScope, fmt.Sprintf("unknown scope %d", s.ConcurrencyScope))
	}
	return nil
}

// MaxMillis297 is the largest of 2.9.7's millisecond settings: a day.
const MaxMillis297 = 86_400_000

// Validate297 checks what Arweave 2.9.7 checks beyond Validate
// (docs/arweave297.md): sliding_window_duration, leaky_tick_interval and
// sliding_window_timestamp_cleanup_interval from 1 to 86 400 000 ms, and
// sliding_window_limit + leaky_limit > 0. Unlike the node, which skips
// no_limit groups, it checks a group whatever its mode: a group switched
// on live must already be valid.
func (s GroupSettings) Validate297(group string) error {
	for _, c := range []struct {
		key string
		v   int64
	}{
		{KeySlidingWindowDuration, s.SlidingWindowDuration},
		{KeyLeakyTickInterval, s.LeakyTickInterval},
		{KeyCleanupInterval, s.CleanupInterval},
	} {
		if c.v < 1 || c.v > MaxMillis297 {
			return settingError(group, c.key, fmt.Sprintf("must be between 1 and %d with arweave.version 2.9.7, got %d", MaxMillis297, c.v))
		}
	}
	if s.SlidingWindowLimit+s.LeakyLimit <= 0 {
		return settingError(group, KeySlidingWindowLimit, "sliding_window_limit + leaky_limit must be > 0 with arweave.version 2.9.7 (both are 0: every request would be rejected)")
	}
	return nil
}

// ArweaveGroups297 returns the Arweave 2.9.7 node's production group defaults
// (docs/arweave297.md; options file of arweave_config): general 3 / 2000 /
// 450 / 450, chunk 1000 / 1000 / 6000 / 6000, get_vdf 0 / 1000 / 180 / 180,
// the other groups as 2.9.6; external reduction only for general; concurrency
// per worker shard, 5 workers (metrics 1). The 2.9.6 cleanup expiry, which
// 2.9.7 no longer has, keeps its 120000. The map is new on every call.
func ArweaveGroups297() map[string]GroupSettings {
	gs := ArweaveGroups()
	set := func(name string, window, duration, leaky, reduction int64) {
		g := gs[name]
		g.SlidingWindowLimit, g.SlidingWindowDuration, g.LeakyLimit, g.LeakyTickReduction = window, duration, leaky, reduction
		gs[name] = g
	}
	set("general", 3, 2000, 450, 450)
	set("chunk", 1000, 1000, 6000, 6000)
	set("get_vdf", 0, 1000, 180, 180)
	for name, g := range gs {
		g.ManualReductionDisabled = name != GroupGeneral
		g.ConcurrencyScope = ScopeShard
		gs[name] = g
	}
	return gs
}

// validateVersion checks gs as version v does beyond Validate (a version
// other than 2.9.7 is taken as 2.9.6).
func validateVersion(v ArweaveVersion, gs GroupSettings, name string) error {
	if v == Arweave297 {
		return gs.Validate297(name)
	}
	return nil
}
