package live

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Publisher is told of every edit committed on this instance, with the
// live state before and after it, so that it can carry the edit to other
// instances (cluster mode, docs/cluster.md). It is called under Live's lock,
// after the edit is stored and applied; it must bound its own time and
// must not call back into Live. Edits applied from other instances
// (ApplyRemote) are not published again.
type Publisher interface {
	Publish(old, new LiveState)
}

// SetPublisher makes p hear of every edit from now on (nil: none).
func (c *Live) SetPublisher(p Publisher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pub = p
}

// State returns a copy of the live state in force.
func (c *Live) State() LiveState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clone()
}

// ApplyRemote makes merge(current) the live state, where current is the
// state in force (under the lock that orders edits, so that merge can keep
// the local edits other instances have not seen yet): the edits another
// instance made (origin names it in the audit log). Each difference from
// the state in force is stored as its own edit, with an audit entry, then
// the whole is applied, as a local edit is; nothing is published. A state
// that does not validate over this instance's file config changes nothing.
func (c *Live) ApplyRemote(ctx context.Context, origin string, merge func(current LiveState) (LiveState, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := merge(c.clone())
	if err != nil {
		return err
	}
	next := LiveState{Overrides: maps.Clone(st.Overrides), Exemptions: slices.Clone(st.Exemptions), Disabled: st.Disabled}
	if next.Overrides == nil {
		next.Overrides = map[string]Override{}
	}
	actor := "cluster:" + origin
	var steps []func() error
	for _, g := range slices.Sorted(maps.Keys(unionKeys(c.state.Overrides, next.Overrides))) {
		old, had := c.state.Overrides[g]
		now, has := next.Overrides[g]
		if had == has && overrideJSON(old) == overrideJSON(now) {
			continue
		}
		if has {
			a := c.audit(actor, "group.patch", g, map[string]any(old), map[string]any(now))
			steps = append(steps, func() error { return c.store.SetOverride(ctx, g, now, a) })
		} else {
			a := c.audit(actor, "group.reset", g, map[string]any(old), nil)
			steps = append(steps, func() error { return c.store.SetOverride(ctx, g, nil, a) })
		}
	}
	for _, e := range next.Exemptions {
		if !hasExemption(c.state.Exemptions, e) {
			a := c.audit(actor, "exemption.add", string(e.Kind), nil, e.Value)
			steps = append(steps, func() error { return c.store.AddExemption(ctx, e, a) })
		}
	}
	for _, e := range c.state.Exemptions {
		if !hasExemption(next.Exemptions, e) {
			a := c.audit(actor, "exemption.remove", string(e.Kind), e.Value, nil)
			steps = append(steps, func() error { return c.store.RemoveExemption(ctx, e, a) })
		}
	}
	if next.Disabled != c.state.Disabled {
		a := c.audit(actor, "limiter.switch", "global", onOff(!c.state.Disabled), onOff(!next.Disabled))
		steps = append(steps, func() error { return c.store.SetDisabled(ctx, next.Disabled, a) })
	}
	if len(steps) == 0 {
		return nil
	}
	c.remote = true
	defer func() { c.remote = false }()
	return c.commit(ctx, actor, next, func() error {
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
}

func unionKeys(a, b map[string]Override) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func hasExemption(list []Exemption, e Exemption) bool {
	return slices.ContainsFunc(list, func(x Exemption) bool { return x.Kind == e.Kind && x.Value == e.Value })
}

func overrideJSON(o Override) string {
	b, _ := json.Marshal(o)
	return string(b)
}

// Fields is the live state as flat fields, the form it travels between
// instances in: "group:<name>" holds a group's override (JSON),
// "exemption:<kind>:<value>" a live exemption (JSON), and "switch" is
// "off" while the global switch is off. One edit changes few fields, so
// that edits made at once on two instances to different things both
// survive.
type Fields map[string]string

// Field name prefixes of Fields.
const (
	fieldGroup     = "group:"
	fieldExemption = "exemption:"
	fieldSwitch    = "switch"
)

// EncodeFields returns st as Fields.
func EncodeFields(st LiveState) Fields {
	f := Fields{}
	for g, o := range st.Overrides {
		f[fieldGroup+g] = overrideJSON(o)
	}
	for _, e := range st.Exemptions {
		n, v := ExemptionField(e)
		f[n] = v
	}
	if n, v, removed := SwitchField(st.Disabled); !removed {
		f[n] = v
	}
	return f
}

// DecodeFields reads Fields back into a LiveState, validating every value
// as the admin API would. The error names the field.
func DecodeFields(f Fields) (LiveState, error) {
	st := LiveState{Overrides: map[string]Override{}}
	for _, name := range slices.Sorted(maps.Keys(f)) {
		v := f[name]
		switch {
		case strings.HasPrefix(name, fieldGroup):
			o, err := ParseOverride([]byte(v))
			if err != nil {
				return st, fmt.Errorf("live field %q: %w", name, err)
			}
			st.Overrides[strings.TrimPrefix(name, fieldGroup)] = o
		case strings.HasPrefix(name, fieldExemption):
			var e Exemption
			if err := json.Unmarshal([]byte(v), &e); err != nil {
				return st, fmt.Errorf("live field %q: %w", name, err)
			}
			e, err := e.Normalize()
			if err != nil {
				return st, fmt.Errorf("live field %q: %w", name, err)
			}
			st.Exemptions = append(st.Exemptions, e)
		case name == fieldSwitch:
			if v != "off" {
				return st, fmt.Errorf("live field %q: %q, want \"off\"", name, v)
			}
			st.Disabled = true
		default:
			return st, fmt.Errorf("live field %q: unknown", name)
		}
	}
	return st, nil
}
