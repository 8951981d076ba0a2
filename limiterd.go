// Package limiterd holds what belongs to the module as a whole: the shipped
// config.toml, compiled into the binary. The daemon lives in cmd/limiterd,
// the limiter core in limiter, and the configuration loader in config.
package limiterd

import _ "embed"

// DefaultConfig is the shipped config.toml: every key at its default, the
// Arweave node's groups, routes and outbound throttle table. It is the lowest
// configuration layer, and the whole configuration when no file is found.
// Callers must not modify it.
//
//go:embed config.toml
var DefaultConfig []byte
