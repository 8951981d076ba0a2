package ui

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
)

// replayable are the keys whose effect a what-if measures by replaying
// the request log: the hybrid's window and bucket, and the algorithm
// (docs/limiting.md, "Other algorithms") with its limits (a replay under another algorithm starts
// every peer fresh, as a live switch does). concurrency_limit
// cannot be (the log holds when requests arrived, not how long they stayed
// in flight), nor is_manual_reduction_disabled (reductions are not
// logged); mode needs no replay.
var replayable = map[string]bool{
	limiter.KeySlidingWindowLimit: true, limiter.KeySlidingWindowDuration: true,
	limiter.KeyCleanupInterval: true, limiter.KeyCleanupExpiry: true,
	limiter.KeyLeakyLimit: true, limiter.KeyLeakyTickInterval: true, limiter.KeyLeakyTickReduction: true,
	limiter.KeyAlgorithm: true, limiter.KeyLimit: true, limiter.KeyPeriod: true, limiter.KeyBurst: true,
}

// change is one key of a group's form with its new value, as typed.
type change struct{ key, value string }

// whatIfs answers, for group's last hour of logged requests, what each
// change alone and (with several) all of them together would have
// rejected, against the current settings; and says what was replayed.
func (d *Dashboard) whatIfs(group string, changes []change) (map[string]*templates.WhatIf, *templates.WhatIf, string) {
	out := map[string]*templates.WhatIf{}
	lim := d.lim
	now := d.now()
	id, ok := lim.GroupID(group)
	base, ok2 := insight.CurrentReplaySettings(lim, id, now)
	if !ok || !ok2 {
		return out, nil, ""
	}
	// One stepper per change that can be judged, then all together.
	steppers := []insight.Stepper{}
	baseStep, err := insight.NewStepper(base)
	if err != nil {
		return out, nil, err.Error()
	}
	steppers = append(steppers, baseStep)
	type judged struct {
		w    *templates.WhatIf
		at   int // index in steppers, -1 for an answer without a replay
		mode limiter.Mode
	}
	var js []judged
	all := live.Override{}
	for _, c := range changes {
		w := &templates.WhatIf{Key: c.key, Value: c.value}
		out[c.key] = w
		switch {
		case c.key == limiter.KeyMode:
			m, err := limiter.ParseMode(c.value)
			if err != nil {
				w.Error = "mode: one of enforce, dry_run, off"
				continue
			}
			js = append(js, judged{w: w, at: -1, mode: m})
			all[c.key] = c.value
			continue
		case !replayable[c.key]:
			w.Error = notReplayable(c.key)
			continue
		}
		var v any = c.value // the algorithm, by name
		if c.key != limiter.KeyAlgorithm {
			n, err := strconv.ParseInt(strings.TrimSpace(c.value), 10, 64)
			if err != nil {
				w.Error = fmt.Sprintf("%s must be an integer, got %q", c.key, c.value)
				continue
			}
			v = n
		}
		// Together with the others even when it is not valid alone (an
		// algorithm needs its limit and period).
		all[c.key] = v
		st, err := settingsWith(group, base, live.Override{c.key: v})
		if err != nil {
			w.Error = err.Error()
			continue
		}
		js = append(js, judged{w: w, at: len(steppers)})
		steppers = append(steppers, st)
	}
	var comb *templates.WhatIf
	combAt := -1
	if len(all) > 1 {
		comb = &templates.WhatIf{}
		rule := live.Override{} // all but the mode, which needs no replay
		for k, v := range all {
			if k != limiter.KeyMode {
				rule[k] = v
			}
		}
		if st, err := settingsWith(group, base, rule); err != nil {
			comb.Error = err.Error()
		} else {
			combAt = len(steppers)
			steppers = append(steppers, st)
		}
	}
	res := d.activity.Log().Replay(id, now.Add(-insight.RequestLogSpan), steppers)
	span := replaySpan(res, now)
	for _, j := range js {
		answer(j.w, res, j.at, j.mode, span)
	}
	if comb != nil && comb.Error == "" {
		mode := base.Settings.Mode
		if m, ok := all[limiter.KeyMode].(string); ok {
			mode, _ = limiter.ParseMode(m)
		}
		answer(comb, res, combAt, mode, span)
	}
	return out, comb, recordText(group, res, span)
}

// settingsWith returns the stepper of base with o over its settings, its
// tick schedules anchored where base's are; the error, in words, when the
// values are not valid.
func settingsWith(group string, base insight.ReplaySettings, o live.Override) (insight.Stepper, error) {
	if err := live.CheckOverride(o); err != nil {
		return nil, err
	}
	rs := base
	rs.Settings = o.Over(base.Settings)
	if err := rs.Settings.Validate(group); err != nil {
		var fe *limiter.FieldError
		if errors.As(err, &fe) {
			return nil, errors.New(jsonbody.BodyField(fe.Field) + " " + fe.Problem)
		}
		return nil, err
	}
	rs.Leaky = limiter.NewSchedule(base.Leaky.Anchor, rs.Settings.LeakyTickInterval)
	rs.Cleanup = limiter.NewSchedule(base.Cleanup.Anchor, rs.Settings.CleanupInterval)
	return insight.NewStepper(rs)
}

func notReplayable(key string) string {
	switch key {
	case limiter.KeyConcurrencyLimit:
		return "No what-if for concurrency_limit: the record holds when requests arrived, not how long they stayed in flight."
	case limiter.KeyManualReductionOff:
		return "No what-if for manual reductions: they are not recorded."
	}
	return "No what-if for " + key + "."
}

// replaySpan says the stretch a replay really covers, as of now: "the
// last hour", or less with why — limiterd started since ("the last 6 s,
// since limiterd started"), or the record was overwritten.
func replaySpan(res insight.ReplayResult, now time.Time) string {
	switch {
	case res.Started:
		return "the last " + spanText(now.Sub(res.Since)) + " (since limiterd started: the record is not kept across a restart)"
	case res.Short:
		return "the last " + spanText(now.Sub(res.Since)) + " (the record holds no more)"
	}
	if insight.RequestLogSpan == time.Hour {
		return "the last hour"
	}
	return "the last " + spanText(insight.RequestLogSpan)
}

// answer fills w from the replay: the rejections of stepper at (the
// current settings' at 0), or, for a change of mode alone (at −1), what
// the mode lets through; span says what the replay covers.
func answer(w *templates.WhatIf, res insight.ReplayResult, at int, mode limiter.Mode, span string) {
	w.Requests, w.Now = res.Requests, res.Rejected[0]
	if res.Logged == 0 {
		w.Text = "No request of this group in " + span + ": nothing to judge."
		return
	}
	w.Then = w.Now
	if at >= 0 {
		w.Then = res.Rejected[at]
	}
	switch mode {
	case limiter.ModeOff:
		w.Text = fmt.Sprintf("Off: none of the %s requests of %s would have been limited (now %s rejected).", count(w.Requests), span, count(w.Now))
		w.Then = 0
	case limiter.ModeDryRun:
		w.Text = fmt.Sprintf("Dry run: none rejected; %s of %s would have been counted as would_reject (now %s rejected).", count(w.Then), count(w.Requests), count(w.Now))
		w.Then = 0
	default:
		diff := w.Then - w.Now
		more := "the same as now"
		switch {
		case diff > 0:
			more = count(diff) + " more than now (" + count(w.Now) + ")"
		case diff < 0:
			more = count(-diff) + " fewer than now (" + count(w.Now) + ")"
		}
		w.Text = fmt.Sprintf("%s of %s requests of %s would have been rejected (%s): %s.",
			count(w.Then), count(w.Requests), span, pct(float64(w.Then), float64(w.Requests)), more)
	}
	w.Note = replayNote(res)
}

// replayNote qualifies a replay: sampled, short, concurrency kept.
func replayNote(res insight.ReplayResult) string {
	var notes []string
	if res.Shift > 0 {
		notes = append(notes, fmt.Sprintf("estimated from 1 in %d peers", uint64(1)<<res.Shift))
	}
	if res.Concurrency > 0 {
		notes = append(notes, count(res.Concurrency)+" rejected for concurrency or shed stay rejected")
	}
	if len(notes) == 0 {
		return ""
	}
	return "(" + strings.Join(notes, "; ") + ")"
}

// recordText says what the what-if replays, over span.
func recordText(group string, res insight.ReplayResult, span string) string {
	if res.Logged == 0 {
		return "no request of " + group + " in " + span + " to replay."
	}
	return fmt.Sprintf("the %s requests of %s of %s, from %s UTC, replayed with each new value through the group's own rule (the limiter rejected %s of them).",
		count(res.Requests), group, span, res.From.UTC().Format("15:04:05"), count(res.Observed))
}
