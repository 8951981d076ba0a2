package ui

import (
	"fmt"
	"slices"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// usages returns v's state in its group's algorithm's own terms, used /
// limit and what is left in words: what the peers page's columns and a
// peer's page show. The hybrid (docs/limiting.md, "The hybrid decision")
// shows its sliding window (when it has one) and its leaky-bucket tokens;
// each of the "Other algorithms" one usage named after it, from its state in the EntryView (v.Algo). The
// pages render any Usage.
func usages(v *limiter.EntryView, s *limiter.GroupSettings) []templates.Usage {
	if v.Algorithm != algo.Hybrid {
		return []templates.Usage{algoUsage(v.Algorithm, &v.Algo, s.Params())}
	}
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

// algoUsage is the usage of a state a of algorithm k (not the hybrid)
// under p: used of the limit (the bucket's size for the token bucket and
// GCRA), in the algorithm's unit, and when more comes back.
func algoUsage(k algo.Kind, a *algo.View, p algo.Params) templates.Usage {
	u := templates.Usage{Name: k.String(), Limit: p.Limit}
	// When an admission is possible again: now, or after a.Reset ms.
	next := "next in " + waitText(max(a.Reset, 1))
	every := "one back every " + intervalText(p)
	switch k {
	case algo.TokenBucket:
		u.Limit, u.Used = p.Burst, p.Burst-a.Remaining
		u.Unit = fmt.Sprintf("tokens of the bucket used (%.2f left; refilled %d per %s)", a.Tokens, p.Limit, msText(p.Period))
		if a.Remaining == 0 {
			every = next
		}
	case algo.GCRA:
		u.Limit, u.Used = p.Burst, p.Burst-a.Remaining
		tat := "now"
		if a.TAT > 0 {
			tat = "now + " + msText(a.TAT)
		}
		u.Unit = fmt.Sprintf("admissions of the burst used (TAT %s; %d per %s)", tat, p.Limit, msText(p.Period))
		if a.Remaining == 0 {
			every = next
		}
	case algo.FixedWindow:
		u.Used = p.Limit - a.Remaining
		u.Unit = fmt.Sprintf("requests in this window of %s, which ends in %s", msText(p.Period), msText(a.WindowEnd))
		every = "all back in " + msText(a.WindowEnd)
	case algo.SlidingLog:
		u.Used = p.Limit - a.Remaining
		u.Unit = "requests admitted in the last " + msText(p.Period)
		every = "each back " + msText(p.Period) + " after it"
		if a.Remaining == 0 {
			every = next
		}
	case algo.SlidingWindow:
		u.Used = p.Limit - a.Remaining
		u.Unit = fmt.Sprintf("requests estimated in the last %s (%d in this window, %d in the previous; %.2f)",
			msText(p.Period), a.Count, a.Previous, a.Estimate)
		every = "more as the window slides"
		if a.Remaining == 0 {
			every = next
		}
	}
	u.Left = leftText(a.Remaining, every)
	return u
}

// intervalText is the time one admission takes to come back at p's rate,
// P/L.
func intervalText(p algo.Params) string {
	if p.Period%p.Limit == 0 {
		return msText(p.Period / p.Limit)
	}
	return fmt.Sprintf("%.3g ms", float64(p.Period)/float64(p.Limit))
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
	for _, known := range []string{"window", "tokens"} { // the hybrid's
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
