package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Store keeps what operators change at run time. Every method that changes
// something must have made the change durable when it returns, together
// with its audit entry. The bbolt store implements it; MemoryStore is the
// in-process one.
type Store interface {
	LoadLive(ctx context.Context) (LiveState, error)
	// SetOverride stores o as group's override; a nil o deletes it.
	SetOverride(ctx context.Context, group string, o Override, a AuditEntry) error
	AddExemption(ctx context.Context, e Exemption, a AuditEntry) error
	RemoveExemption(ctx context.Context, e Exemption, a AuditEntry) error
	SetDisabled(ctx context.Context, disabled bool, a AuditEntry) error
	// Audit returns up to limit entries with IDs below before (0: the
	// newest), newest first.
	Audit(ctx context.Context, limit int, before uint64) ([]AuditEntry, error)
	// Record stores an audit entry for an action that changes no setting
	// (forgetting a peer, a manual reduction).
	Record(ctx context.Context, a AuditEntry) error
}

// Errors of the live settings.
var (
	// ErrNotFound: no such group, peer, exemption or lease.
	ErrNotFound = errors.New("not found")
	// ErrExists: the exemption is already there.
	ErrExists = errors.New("already exists")
)

// Live applies the file configuration and the operators' live edits to the
// limiter: file values first, overrides over them, live exemptions added
// to the file's lists. Edits are validated, then stored (durably), then
// applied, in that order, under one lock. Live is safe for concurrent use.
type Live struct {
	mu    sync.Mutex
	lim   *limiter.Limiter
	store Store
	base  limiter.Config
	state LiveState
	now   func() time.Time
	// follow are turned on and off with the global switch (Follow).
	follow []Switch
	// pub hears of every local edit (SetPublisher); remote is set while an
	// edit of another instance is applied (ApplyRemote), which pub is not
	// told of.
	pub    Publisher
	remote bool
}

// Switch is something the global switch turns on and off besides the
// limiter: the outbound throttle.
type Switch interface {
	SetEnabled(on bool)
}

// Follow makes sw follow the global switch from now on, setting it at
// once: Live is the one place the switch is applied, so no handler turns
// the throttle on or off by itself.
func (c *Live) Follow(sw Switch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.follow = append(c.follow, sw)
	sw.SetEnabled(!c.state.Disabled)
}

// New loads the stored live state and applies it over base.
func New(ctx context.Context, lim *limiter.Limiter, store Store, base limiter.Config, now func() time.Time) (*Live, error) {
	st, err := store.LoadLive(ctx)
	if err != nil {
		return nil, fmt.Errorf("load live settings: %w", err)
	}
	if st.Overrides == nil {
		st.Overrides = map[string]Override{}
	}
	c := &Live{lim: lim, store: store, base: base, state: st, now: now}
	cfg, err := c.effective(base, st)
	if err != nil {
		// Overrides of groups the file no longer has wait unused; a stored
		// value that does not decode is an error worth stopping for.
		return nil, fmt.Errorf("live settings over the file config: %w", err)
	}
	if _, err := lim.Apply(now(), cfg); err != nil {
		return nil, err
	}
	lim.SetEnabled(!st.Disabled)
	return c, nil
}

// effective merges st over base.
func (c *Live) effective(base limiter.Config, st LiveState) (limiter.Config, error) {
	cfg := base
	cfg.Groups = maps.Clone(base.Groups)
	for g, o := range st.Overrides {
		file, ok := base.Groups[g]
		if !ok {
			// The group left the file: its override waits, unused.
			continue
		}
		if err := CheckOverride(o); err != nil {
			return cfg, fmt.Errorf("override of %s: %w", g, err)
		}
		gs, err := o.Resolve(g, file)
		if err != nil {
			return cfg, err
		}
		cfg.Groups[g] = gs
	}
	cfg.Exempt = slices.Clone(base.Exempt)
	cfg.Deny = slices.Clone(base.Deny)
	cfg.ExemptPaths = slices.Clone(base.ExemptPaths)
	for _, e := range st.Exemptions {
		switch e.Kind {
		case ExemptPeer, DenyPeer:
			p, err := peer.ParsePrefix(e.Value)
			if err != nil {
				return cfg, fmt.Errorf("%s %q: %w", e.Kind, e.Value, err)
			}
			if e.Kind == ExemptPeer {
				cfg.Exempt = append(cfg.Exempt, p)
			} else {
				cfg.Deny = append(cfg.Deny, p)
			}
		case ExemptPath:
			cfg.ExemptPaths = append(cfg.ExemptPaths, e.Value)
		}
	}
	return cfg, nil
}

// commit validates next, runs store (which makes it durable), then applies
// it, auditing as actor the state a change of algorithm dropped. c.mu must
// be held.
func (c *Live) commit(ctx context.Context, actor string, next LiveState, store func() error) error {
	cfg, err := c.effective(c.base, next)
	if err != nil {
		return err
	}
	// Validate the whole configuration before anything is stored.
	if err := limiter.CheckConfig(cfg); err != nil {
		return err
	}
	if err := store(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return c.apply(ctx, actor, cfg, func() {
		c.lim.SetEnabled(!next.Disabled)
		for _, sw := range c.follow {
			sw.SetEnabled(!next.Disabled)
		}
		prev := c.state
		c.state = next
		if c.pub != nil && !c.remote {
			c.pub.Publish(prev, next)
		}
	})
}

func (c *Live) clone() LiveState {
	return LiveState{
		Overrides:  maps.Clone(c.state.Overrides),
		Exemptions: slices.Clone(c.state.Exemptions),
		Disabled:   c.state.Disabled,
	}
}

func (c *Live) audit(actor, action, target string, old, new any) AuditEntry {
	return AuditEntry{Time: c.now().UTC(), Actor: actor, Action: action, Target: target, Old: old, New: new}
}

// apply installs cfg, calls applied (if not nil) once it is in force, and
// records, for each group whose change of algorithm dropped its peers'
// state, an audit entry "group.state_dropped" (decision 80): the old
// algorithm and the entries dropped, the new one. A failure to record is
// returned after the change took effect.
func (c *Live) apply(ctx context.Context, actor string, cfg limiter.Config, applied func()) error {
	old := c.lim.Config().Groups
	dropped, err := c.lim.Apply(c.now(), cfg)
	if err != nil {
		return err
	}
	if applied != nil {
		applied()
	}
	var errs []error
	for _, g := range slices.Sorted(maps.Keys(dropped)) {
		a := c.audit(actor, "group.state_dropped", g,
			map[string]any{limiter.KeyAlgorithm: old[g].Algorithm.String(), "entries": dropped[g]},
			map[string]any{limiter.KeyAlgorithm: cfg.Groups[g].Algorithm.String()})
		if err := c.store.Record(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("audit the state dropped from %s: %w", g, err))
		}
	}
	return errors.Join(errs...)
}

// ReloadActor is the actor of the audit entries a reload of the file
// configuration makes (SetBase).
const ReloadActor = "config reload"

// SetBase replaces the file configuration (a SIGHUP reload), keeping the
// live edits. On error nothing changes.
func (c *Live) SetBase(base limiter.Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, err := c.effective(base, c.state)
	if err != nil {
		return err
	}
	return c.apply(context.Background(), ReloadActor, cfg, func() { c.base = base })
}

// GroupView is one group's settings: effective, from the file, and the
// override.
type GroupView struct {
	Name      string                `json:"name"`
	Effective limiter.GroupSettings `json:"effective"`
	Mode      string                `json:"mode"`
	File      map[string]any        `json:"file"`
	Override  Override              `json:"override,omitempty"`
	// NextLeakyTick is when the group's tokens are next reduced; the tick
	// phase survives restarts.
	NextLeakyTick time.Time `json:"next_leaky_tick"`
	// Adaptive is what the group's adaptive concurrency stands at, nil
	// when it is off (docs/limiting.md, "Adaptive concurrency").
	Adaptive *limiter.AdaptiveView `json:"adaptive,omitempty"`
}

// Values returns every key of s by its name in config.toml, with JSON-ready
// values: what the API shows and an override is compared against.
func Values(s limiter.GroupSettings) map[string]any {
	m := make(map[string]any, len(limiter.GroupKeys))
	for _, k := range limiter.GroupKeys {
		m[k], _ = s.Value(k)
	}
	return m
}

// Groups returns every configured group, by name.
func (c *Live) Groups() []GroupView {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := slices.Sorted(maps.Keys(c.base.Groups))
	out := make([]GroupView, 0, len(names))
	for _, n := range names {
		out = append(out, c.groupLocked(n))
	}
	return out
}

// Group returns one group.
func (c *Live) Group(name string) (GroupView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.base.Groups[name]; !ok {
		return GroupView{}, fmt.Errorf("group %q: %w", name, ErrNotFound)
	}
	return c.groupLocked(name), nil
}

func (c *Live) groupLocked(name string) GroupView {
	eff := c.base.Groups[name]
	if id, ok := c.lim.GroupID(name); ok {
		eff, _ = c.lim.Settings(id)
	}
	v := GroupView{Name: name, Effective: eff, Mode: eff.Mode.String(), File: Values(c.base.Groups[name]), Override: c.state.Overrides[name]}
	if id, ok := c.lim.GroupID(name); ok {
		next, _ := c.lim.NextTicks(id, c.now())
		v.NextLeakyTick = next.UTC()
		if a, ok := c.lim.Adaptive(id); ok {
			v.Adaptive = &a
		}
	}
	return v
}

// PatchGroup applies a live edit (a JSON object of group keys) over the
// group's current override.
func (c *Live) PatchGroup(ctx context.Context, actor, group string, body []byte) (GroupView, error) {
	patch, err := ParseOverride(body)
	if err != nil {
		return GroupView{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.base.Groups[group]; !ok {
		return GroupView{}, fmt.Errorf("group %q: %w", group, ErrNotFound)
	}
	next := c.clone()
	old := c.state.Overrides[group]
	merged := maps.Clone(old)
	if merged == nil {
		merged = Override{}
	}
	maps.Copy(merged, patch)
	next.Overrides[group] = merged
	oldVals := map[string]any{}
	cur := Values(c.groupLocked(group).Effective)
	for k := range patch {
		oldVals[k] = cur[k]
	}
	a := c.audit(actor, "group.patch", group, oldVals, map[string]any(patch))
	err = c.commit(ctx, actor, next, func() error { return c.store.SetOverride(ctx, group, merged, a) })
	if err != nil {
		return GroupView{}, err
	}
	return c.groupLocked(group), nil
}

// DeleteOverrides drops the live edits of a group: the file values apply.
func (c *Live) DeleteOverrides(ctx context.Context, actor, group string) (GroupView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.base.Groups[group]; !ok {
		return GroupView{}, fmt.Errorf("group %q: %w", group, ErrNotFound)
	}
	old, ok := c.state.Overrides[group]
	if !ok {
		return c.groupLocked(group), nil
	}
	next := c.clone()
	delete(next.Overrides, group)
	a := c.audit(actor, "group.reset", group, map[string]any(old), nil)
	if err := c.commit(ctx, actor, next, func() error { return c.store.SetOverride(ctx, group, nil, a) }); err != nil {
		return GroupView{}, err
	}
	return c.groupLocked(group), nil
}

// Exemptions returns the live exemptions, and the file's lists (exempt
// peers, exempt paths, deny list) for reference.
func (c *Live) Exemptions() (live []Exemption, file []Exemption) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live = slices.Clone(c.state.Exemptions)
	for _, p := range c.base.Exempt {
		file = append(file, Exemption{Kind: ExemptPeer, Value: peer.FormatPrefix(p)})
	}
	for _, p := range c.base.ExemptPaths {
		file = append(file, Exemption{Kind: ExemptPath, Value: p})
	}
	for _, p := range c.base.Deny {
		file = append(file, Exemption{Kind: DenyPeer, Value: peer.FormatPrefix(p)})
	}
	return live, file
}

// AddExemption adds a live exemption or deny entry.
func (c *Live) AddExemption(ctx context.Context, actor string, e Exemption) (Exemption, error) {
	e, err := e.Normalize()
	if err != nil {
		return e, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.state.Exemptions {
		if x.Kind == e.Kind && x.Value == e.Value {
			return e, fmt.Errorf("%s %q: %w", e.Kind, e.Value, ErrExists)
		}
	}
	if !e.Expires.IsZero() {
		if !e.Expires.After(c.now()) {
			return e, &limiter.FieldError{Field: "expires", Problem: fmt.Sprintf("%s is not in the future", e.Expires.UTC().Format(time.RFC3339))}
		}
		e.Expires = e.Expires.UTC().Truncate(time.Second)
	}
	next := c.clone()
	next.Exemptions = append(next.Exemptions, e)
	a := c.audit(actor, "exemption.add", string(e.Kind), nil, e.Value)
	a.Note, a.Expires = e.Note, e.Expires
	return e, c.commit(ctx, actor, next, func() error { return c.store.AddExemption(ctx, e, a) })
}

// RemoveExemption removes a live exemption or deny entry.
func (c *Live) RemoveExemption(ctx context.Context, actor string, e Exemption) error {
	e, err := e.Normalize()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.clone()
	i := slices.IndexFunc(next.Exemptions, func(x Exemption) bool { return x.Kind == e.Kind && x.Value == e.Value })
	if i < 0 {
		return fmt.Errorf("%s %q: %w", e.Kind, e.Value, ErrNotFound)
	}
	gone := next.Exemptions[i]
	next.Exemptions = slices.Delete(next.Exemptions, i, i+1)
	a := c.audit(actor, "exemption.remove", string(e.Kind), e.Value, nil)
	a.Note, a.Expires = gone.Note, gone.Expires
	return c.commit(ctx, actor, next, func() error { return c.store.RemoveExemption(ctx, e, a) })
}

// Enabled reports the global switch as last stored.
func (c *Live) Enabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.state.Disabled
}

// SetEnabled turns the global switch on or off, durably.
func (c *Live) SetEnabled(ctx context.Context, actor string, on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Disabled == !on {
		return nil
	}
	next := c.clone()
	next.Disabled = !on
	a := c.audit(actor, "limiter.switch", "global", onOff(!c.state.Disabled), onOff(on))
	return c.commit(ctx, actor, next, func() error { return c.store.SetDisabled(ctx, !on, a) })
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Record audits an action that changes no setting.
func (c *Live) Record(ctx context.Context, actor, action, target string, old, new any) error {
	return c.store.Record(ctx, c.audit(actor, action, target, old, new))
}

// Audit returns audit entries, newest first.
func (c *Live) Audit(ctx context.Context, limit int, before uint64) ([]AuditEntry, error) {
	return c.store.Audit(ctx, limit, before)
}
