// Package arweavenames names the Arweave node versions limiterd reproduces
// (arweave.version) and the scopes of concurrency_limit (SPEC §3, §6.3),
// with their text forms. It imports the standard library only.
package arweavenames

import (
	"fmt"
	"slices"
)

// Version is arweave.version: which Arweave node's limiter
// limiterd reproduces (SPEC §3, §6.3).
type Version uint8

// The Arweave versions.
const (
	// V296 is the default: the 2.9.6 node's limiter (SPEC §6).
	V296 Version = iota
	// V297 is the newer limiter (app arweave_limiter, SPEC §6.3).
	V297
)

var versionNames = []string{V296: "2.9.6", V297: "2.9.7"}

// String returns "2.9.6" or "2.9.7".
func (v Version) String() string { return nameOf(versionNames, int(v), "Version") }

// ParseVersion parses "2.9.6" or "2.9.7".
func ParseVersion(s string) (Version, error) {
	i, err := parseName(versionNames, s, `"2.9.6" or "2.9.7"`)
	return Version(i), err
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

// Scope says over what concurrency_limit counts requests in
// flight (SPEC §6.3).
type Scope uint8

// The scopes of concurrency_limit.
const (
	// ScopePeer counts a peer's requests in flight in the group (2.9.6).
	ScopePeer Scope = iota
	// ScopeShard counts the requests in flight of every peer of the
	// peer's worker shard (2.9.7: the shard is the last byte of the key
	// mod number_of_workers).
	ScopeShard
)

var scopeNames = []string{ScopePeer: "peer", ScopeShard: "shard"}

// String returns "peer" or "shard".
func (c Scope) String() string { return nameOf(scopeNames, int(c), "Scope") }

// ParseScope parses "peer" or "shard".
func ParseScope(s string) (Scope, error) {
	i, err := parseName(scopeNames, s, `"peer" or "shard"`)
	return Scope(i), err
}

// MarshalText returns the scope's name, for JSON.
func (c Scope) MarshalText() ([]byte, error) { return []byte(c.String()), nil }
