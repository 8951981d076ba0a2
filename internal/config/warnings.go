package config

import (
	"fmt"

	"github.com/limiterd/limiterd/limiter"
)

// Bounds past which a route table costs enough to be said at load
// (docs/config.md, "Large route tables").
const (
	// WarnRegexps: every request whose path no glob matches is tried
	// against each regular-expression route, in turn (about 0.1–1 µs
	// each).
	WarnRegexps = 100
	// WarnPatterns: each pattern costs memory and, for the paths it
	// shares a first segment with, a comparison.
	WarnPatterns = 10_000
)

// Warnings returns what about c is valid but costly, one sentence each
// naming the key: logged at the start and on a reload, printed by
// check-config.
func (c *Config) Warnings() []string {
	var out []string
	t, err := limiter.NewRouteTable(c.Routes.Rules)
	if err != nil {
		return nil // an invalid table is an error, not a warning
	}
	all, res := t.Patterns()
	if res > WarnRegexps {
		out = append(out, fmt.Sprintf("routes.rule: %d regular-expression patterns: every request whose path no glob matches is tried against each in turn; prefer globs (docs/config.md, \"Large route tables\")", res))
	}
	if all > WarnPatterns {
		out = append(out, fmt.Sprintf("routes.rule: %d patterns: a large table costs memory and time per request (docs/config.md, \"Large route tables\")", all))
	}
	return out
}
