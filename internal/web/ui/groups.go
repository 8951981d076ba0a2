package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// keyKind is the form's input for key k, by the type of its value: "int",
// "bool", or the word key's own name ("mode", "algorithm").
func keyKind(k string) string {
	key, _ := limiter.LookupGroupKey(k)
	switch key.Type {
	case limiter.BoolKey:
		return "bool"
	case limiter.WordKey:
		return k
	}
	return "int"
}

// usedBy reports whether the group's algorithm reads key: the hybrid
// ignores limit, period and burst; the others ignore the hybrid's keys
// (but concurrency, the mode and manual reduction); burst is the token
// bucket's and GCRA's only.
func usedBy(k algo.Kind, key string) bool {
	switch key {
	case limiter.KeyConcurrencyLimit, limiter.KeyManualReductionOff, limiter.KeyMode, limiter.KeyAlgorithm:
		return true
	case limiter.KeyLimit, limiter.KeyPeriod:
		return k != algo.Hybrid
	case limiter.KeyBurst:
		return k.HasBurst()
	}
	if gk, ok := limiter.LookupGroupKey(key); ok && gk.Part == limiter.PartAdaptive {
		return true // whatever the algorithm
	}
	return k == algo.Hybrid
}

// ruleText says what a group admits, in its algorithm's terms: the
// summary above its form.
func ruleText(s limiter.GroupSettings) string {
	per := fmt.Sprintf("%d per %s", s.Limit, time.Duration(s.Period)*time.Millisecond)
	switch s.Algorithm {
	case algo.Hybrid:
		return fmt.Sprintf("hybrid (Arweave): %d per %d ms sliding window, then %d tokens leaking %d every %d ms; %d in flight",
			s.SlidingWindowLimit, s.SlidingWindowDuration, s.LeakyLimit, s.LeakyTickReduction, s.LeakyTickInterval, s.ConcurrencyLimit)
	case algo.TokenBucket, algo.GCRA:
		p := s.Params()
		return fmt.Sprintf("%s: %s, bursts of up to %d (one every %s after); %d in flight", s.Algorithm, per, p.Burst,
			time.Duration(p.Period*int64(time.Millisecond)/p.Limit), s.ConcurrencyLimit)
	case algo.FixedWindow:
		return fmt.Sprintf("fixed_window: %s, windows aligned on the clock; %d in flight", per, s.ConcurrencyLimit)
	case algo.SlidingLog:
		return fmt.Sprintf("sliding_log: %s, in any window of that length; %d in flight", per, s.ConcurrencyLimit)
	}
	return fmt.Sprintf("sliding_window: about %s, estimated from this and the previous window; %d in flight", per, s.ConcurrencyLimit)
}

// limitsText is the groups table's line for the limits of an algorithm
// other than the hybrid ("600 per 60000 ms, burst 50"); "" for the hybrid,
// whose keys are the table's columns.
func limitsText(s limiter.GroupSettings) string {
	if s.Algorithm == algo.Hybrid {
		return ""
	}
	t := fmt.Sprintf("%d per %d ms", s.Limit, s.Period)
	if s.Algorithm.HasBurst() {
		t += fmt.Sprintf(", burst %d", s.Params().Burst)
	}
	return t
}

// summaryColumns are the groups table's columns: the keys that tell
// groups apart (the cleanup keys, the same everywhere in practice, are on
// each group's page).
var summaryColumns = []templates.SummaryColumn{
	{Key: limiter.KeySlidingWindowLimit, Title: "Window", Unit: "requests"},
	{Key: limiter.KeySlidingWindowDuration, Title: "per", Unit: "ms"},
	{Key: limiter.KeyLeakyLimit, Title: "Bucket", Unit: "tokens"},
	{Key: limiter.KeyLeakyTickReduction, Title: "leaks", Unit: "tokens"},
	{Key: limiter.KeyLeakyTickInterval, Title: "every", Unit: "ms"},
	{Key: limiter.KeyConcurrencyLimit, Title: "Concurrency", Unit: "in flight"},
	{Key: limiter.KeyManualReductionOff, Title: "Manual", Unit: "reduction"},
}

// cellValue is a key's value as the groups table shows it.
func cellValue(key string, v any) string {
	if key == limiter.KeyManualReductionOff {
		if b, _ := v.(bool); b {
			return "disabled"
		}
		return "allowed"
	}
	return fmt.Sprint(v)
}

func groupSummary(v live.GroupView) templates.GroupSummary {
	eff := live.Values(v.Effective)
	g := templates.GroupSummary{
		Name: v.Name, Mode: v.Mode, Algorithm: v.Effective.Algorithm.String(), Rule: limitsText(v.Effective),
		Overrides: len(v.Override),
	}
	for _, c := range summaryColumns {
		_, over := v.Override[c.Key]
		g.Cells = append(g.Cells, templates.SummaryCell{
			Key: c.Key, Value: cellValue(c.Key, eff[c.Key]), File: cellValue(c.Key, v.File[c.Key]), Overridden: over,
			Unused: !usedBy(v.Effective.Algorithm, c.Key),
		})
	}
	// A live edit of the algorithm or its limits is marked as the mode's.
	for _, k := range []string{limiter.KeyAlgorithm, limiter.KeyLimit, limiter.KeyPeriod, limiter.KeyBurst} {
		if _, over := v.Override[k]; over {
			if g.Rule != "" {
				g.Rule += " •"
			} else {
				g.Algorithm += " •"
			}
			break
		}
	}
	if _, over := v.Override[limiter.KeyMode]; over {
		g.Mode += " •"
	}
	return g
}

func (d *Dashboard) handleGroups(w http.ResponseWriter, r *http.Request) {
	data := templates.Groups{Columns: summaryColumns}
	for _, v := range d.live.Groups() {
		data.Rows = append(data.Rows, groupSummary(v))
	}
	render(w, r, http.StatusOK, templates.GroupsPage(d.page(r, "Groups", "/groups"), data))
}

// groupForm is the form of v, showing submitted values (if any) in place
// of the effective ones and err next to its key.
func (d *Dashboard) groupForm(v live.GroupView, submitted map[string]string, err error) templates.GroupForm {
	f := templates.GroupForm{Name: v.Name, HasOverride: len(v.Override) > 0, Summary: ruleText(v.Effective)}
	eff := live.Values(v.Effective)
	field, msg := "", ""
	if err != nil {
		var fe *limiter.FieldError
		if errors.As(err, &fe) {
			field, msg = jsonbody.BodyField(fe.Field), plain(fe.Problem)
		}
		if !slices.Contains(limiter.GroupKeys, field) {
			f.Error, field = "Not saved: "+plain(err.Error()), ""
		}
	}
	for _, k := range limiter.GroupKeys {
		_, over := v.Override[k]
		fl := templates.Field{
			Key: k, Kind: keyKind(k), Value: fmt.Sprint(eff[k]), File: fmt.Sprint(v.File[k]), Overridden: over,
			Help: d.opts.KeyHelp[k], Replayable: replayable[k], Unused: !usedBy(v.Effective.Algorithm, k),
		}
		if fl.Kind == "algorithm" {
			fl.Choices = algo.Names()
		}
		if s, ok := submitted[k]; ok {
			fl.Value = s
		}
		if k == field {
			fl.Error = msg
		}
		f.Fields = append(f.Fields, fl)
	}
	if r, ok := d.adaptiveRow(v.Name); ok {
		f.Adaptive = &templates.Adaptive{Rows: []templates.AdaptiveRow{r}, Minutes: sparkMinutes}
	}
	return f
}

// handleGroup is a group's edit page.
func (d *Dashboard) handleGroup(w http.ResponseWriter, r *http.Request) {
	v, err := d.live.Group(chi.URLParam(r, "group"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	render(w, r, http.StatusOK, templates.GroupPage(d.page(r, "Group "+v.Name, "/groups"), d.groupForm(v, nil, nil), d.groupLive(r.Context(), v.Name)))
}

// groupPatch turns the posted form into a live edit of the keys whose
// value differs from the effective one.
func groupPatch(v live.GroupView, form map[string][]string) (map[string]string, map[string]any, error) {
	eff := live.Values(v.Effective)
	submitted := map[string]string{}
	patch := map[string]any{}
	var firstErr error
	for _, k := range limiter.GroupKeys {
		vals, ok := form[k]
		if !ok || len(vals) == 0 {
			continue
		}
		s := strings.TrimSpace(vals[0])
		submitted[k] = s
		if s == fmt.Sprint(eff[k]) {
			continue
		}
		key, _ := limiter.LookupGroupKey(k)
		val, err := key.Parse(s)
		if err != nil && firstErr == nil {
			firstErr = &limiter.FieldError{Field: k, Problem: err.Error()}
		}
		patch[k] = val
	}
	return submitted, patch, firstErr
}

// changes lists the submitted values that differ from v's, in key order.
func changes(v live.GroupView, submitted map[string]string) []change {
	eff := live.Values(v.Effective)
	var out []change
	for _, k := range limiter.GroupKeys {
		if s, ok := submitted[k]; ok && s != fmt.Sprint(eff[k]) {
			out = append(out, change{k, s})
		}
	}
	return out
}

func (d *Dashboard) handleSaveGroup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "group")
	v, err := d.live.Group(name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	submitted, patch, err := groupPatch(v, r.PostForm)
	if err == nil && len(patch) == 0 {
		d.groupDone(w, r, v, "nochange")
		return
	}
	if err == nil {
		var body []byte
		body, err = json.Marshal(patch)
		if err == nil {
			v, err = d.live.PatchGroup(r.Context(), d.viewer(r).Actor, name, body)
		}
	}
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		// Nothing changed: show the form again with the message.
		cur, gerr := d.live.Group(name)
		if gerr != nil {
			d.fail(w, r, gerr)
			return
		}
		form := d.groupForm(cur, submitted, err)
		if isHTMX(r) {
			render(w, r, http.StatusUnprocessableEntity, templates.GroupFormCard(d.viewer(r).CSRF, form))
			return
		}
		p := d.page(r, "Group "+name, "/groups")
		p.Flash, p.FlashBad = "Not saved: "+d.message(r, err), true
		render(w, r, http.StatusUnprocessableEntity, templates.GroupPage(p, form, d.groupLive(r.Context(), name)))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.groupDone(w, r, v, "saved")
}

// groupDone answers a successful save: the refreshed form for htmx, a
// redirect to the group's page otherwise.
func (d *Dashboard) groupDone(w http.ResponseWriter, r *http.Request, v live.GroupView, done string) {
	if isHTMX(r) {
		form := d.groupForm(v, nil, nil)
		form.Notice = flashes[done]
		render(w, r, http.StatusOK, templates.GroupFormCard(d.viewer(r).CSRF, form))
		return
	}
	http.Redirect(w, r, templates.GroupURL(v.Name)+"?done="+done, http.StatusSeeOther)
}

func (d *Dashboard) handleResetGroup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "group")
	if _, err := d.live.DeleteOverrides(r.Context(), d.viewer(r).Actor, name); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, templates.GroupURL(name)+"?done=reset")
}

// handleWhatIf answers the form posted to /groups/{g}/whatif: the page (or,
// for htmx, the form) with the submitted values and the what-if of every
// change. Nothing is saved.
func (d *Dashboard) handleWhatIf(w http.ResponseWriter, r *http.Request) {
	v, err := d.live.Group(chi.URLParam(r, "group"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	submitted := map[string]string{}
	for _, k := range limiter.GroupKeys {
		if vals := r.PostForm[k]; len(vals) > 0 {
			submitted[k] = strings.TrimSpace(vals[0])
		}
	}
	form := d.groupForm(v, submitted, nil)
	cs := changes(v, submitted)
	per, comb, record := d.whatIfs(v.Name, cs)
	for i := range form.Fields {
		form.Fields[i].WhatIf = per[form.Fields[i].Key]
	}
	form.Combined, form.Record = comb, record
	if len(cs) == 0 {
		form.Notice = "Nothing changed: type a new value, then ask again."
	}
	if isHTMX(r) {
		render(w, r, http.StatusOK, templates.GroupFormCard(d.viewer(r).CSRF, form))
		return
	}
	render(w, r, http.StatusOK, templates.GroupPage(d.page(r, "Group "+v.Name, "/groups"), form, d.groupLive(r.Context(), v.Name)))
}

// handleWhatIfField answers GET /groups/{g}/whatif?field=<key>&<key>=<value>:
// the what-if of that one change, the partial htmx puts beside the field
// (empty when the value is the current one).
func (d *Dashboard) handleWhatIfField(w http.ResponseWriter, r *http.Request) {
	v, err := d.live.Group(chi.URLParam(r, "group"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	key := q.Get("field")
	if !slices.Contains(limiter.GroupKeys, key) {
		if !isHTMX(r) {
			http.Redirect(w, r, templates.GroupURL(v.Name), http.StatusSeeOther)
			return
		}
		render(w, r, http.StatusUnprocessableEntity, templates.WhatIfText(templates.WhatIf{Key: key, Error: "No such key."}))
		return
	}
	cs := changes(v, map[string]string{key: strings.TrimSpace(q.Get(key))})
	if len(cs) == 0 {
		render(w, r, http.StatusOK, templ.NopComponent)
		return
	}
	per, _, _ := d.whatIfs(v.Name, cs)
	render(w, r, http.StatusOK, templates.WhatIfText(*per[key]))
}
