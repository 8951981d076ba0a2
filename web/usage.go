package web

import (
	"fmt"
	"slices"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/templates"
)

// usages returns v's state in its group's algorithm's own terms, used /
// limit and what is left in words: what the peers page's columns and a
// peer's page show. Every group runs the hybrid of SPEC §6 today: its
// sliding window (when it has one) and its leaky-bucket tokens. Another
// algorithm (SPEC §6.2) adds its case here, from its state in the
// EntryView, and nothing else changes: the pages render any Usage.
func usages(v *limiter.EntryView, s *limiter.GroupSettings) []templates.Usage {
	var out []templates.Usage
	if s.SlidingWindowLimit > 0 {
		left := max(s.SlidingWindowLimit-v.WindowActive, 0)
		out = append(out, templates.Usage{
			Name: "window", Used: v.WindowActive, Limit: s.SlidingWindowLimit,
			Unit: "requests admitted by the window in the last " + msText(s.SlidingWindowDuration),
			Left: leftText(left, "in the window of "+msText(s.SlidingWindowDuration)),
		})
	}
	left := max(s.LeakyLimit-v.Tokens, 0)
	out = append(out, templates.Usage{
		Name: "tokens", Used: v.Tokens, Limit: s.LeakyLimit,
		Unit: "leaky-bucket tokens consumed",
		Left: leftText(left, fmt.Sprintf("%d back every %s", s.LeakyTickReduction, msText(s.LeakyTickInterval))),
	})
	return out
}

func leftText(left int64, then string) string {
	if left == 0 {
		return "none left, " + then
	}
	return fmt.Sprintf("%d left, %s", left, then)
}

// usageColumns returns the usage columns of rows, in a stable order: the
// hybrid's first, then any other in order of appearance.
func usageColumns(rows []templates.PeerRow) []string {
	seen := map[string]bool{}
	var out []string
	for _, known := range []string{"window", "tokens"} {
		for _, r := range rows {
			if _, ok := r.Usage[known]; ok {
				seen[known] = true
				out = append(out, known)
				break
			}
		}
	}
	var more []string
	for _, r := range rows {
		for name := range r.Usage {
			if !seen[name] {
				seen[name] = true
				more = append(more, name)
			}
		}
	}
	slices.Sort(more)
	return append(out, more...)
}

// usageMap is us by name.
func usageMap(us []templates.Usage) map[string]templates.Usage {
	m := make(map[string]templates.Usage, len(us))
	for _, u := range us {
		m[u.Name] = u
	}
	return m
}
