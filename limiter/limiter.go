package limiter

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter/peer"
)

// GroupID is a group's index in a Limiter. IDs are stable for the
// Limiter's lifetime, across Apply; LocalPeers is always 0.
type GroupID uint8

// LocalPeers is the ID of the built-in group local_peers.
const LocalPeers GroupID = 0

// Config is everything a Limiter decides with, as plain values. The daemon
// builds it from config.toml and the live edits stored in its database.
type Config struct {
	// Groups are complete, validated settings (see ResolveGroups); general
	// must be present; local_peers must not.
	Groups         map[string]GroupSettings
	Routes         []RouteRule
	ExemptPaths    []string
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header a trusted proxy's chain is read from.
	ForwardedHeader peer.ForwardedHeader
	IPv6Prefix      int
	Exempt          []netip.Prefix
	Deny            []netip.Prefix
	// MaxTracked caps the (peer, group) entries of the local backend; 0
	// means no cap.
	MaxTracked int
	// ArweaveVersion is arweave.version: with Arweave297 every group is
	// also checked with GroupSettings.Validate297.
	ArweaveVersion ArweaveVersion
}

// DefaultIPv6Prefix is the IPv6 prefix a Config of IPv6Prefix 0 keys
// peers by: a /64, the smallest network one party is usually given.
const DefaultIPv6Prefix = 64

// withDefaults returns cfg with its zero values made usable: without a
// general group, the Arweave node's general defaults (ArweaveGroups); an
// IPv6Prefix of 0, DefaultIPv6Prefix. The zero Config is thus a limiter
// that decides every request in one group, general, as an Arweave node
// does a path no route names.
func (cfg Config) withDefaults() Config {
	if _, ok := cfg.Groups[GroupGeneral]; !ok {
		groups := make(map[string]GroupSettings, len(cfg.Groups)+1)
		for name, g := range cfg.Groups {
			groups[name] = g
		}
		groups[GroupGeneral] = ArweaveGroups()[GroupGeneral]
		cfg.Groups = groups
	}
	if cfg.IPv6Prefix == 0 {
		cfg.IPv6Prefix = DefaultIPv6Prefix
	}
	return cfg
}

// settings is one immutable version of a Limiter's configuration: the
// group table its backend decides with, and what the policy needs.
type settings struct {
	GroupTable
	cfg         Config
	routes      *RouteTable
	routeGroup  []GroupID
	routeReduce [][]int
	general     GroupID
	exemptPaths []*Pattern
	ident       *peer.Identifier
	exempt      *peer.Set
	deny        *peer.Set
}

// Limiter decides requests for every (peer, group): the policy of
// docs/limiting.md (deny list, exemption, mode, the global switch) here, the
// state in its Backend. It is safe for concurrent use: decisions on one
// (peer, group) are linearisable, decisions on different ones proceed in
// parallel. It starts no goroutine; the owner calls Tick now and then (see
// Tick).
type Limiter struct {
	set     atomic.Pointer[settings]
	enabled atomic.Bool
	// backend holds the state of every limited group.
	backend Backend

	mu       sync.Mutex // serialises Apply, Restore and the tick counting of Tick
	ver      uint64     // settings versions built so far
	ids      map[string]GroupID
	names    [MaxGroups]string
	lastTick [MaxGroups]int64 // last leaky tick index counted per group

	leakyTicks [MaxGroups]atomic.Uint64
	policy     [MaxGroups]policyStats

	observer Observer
}

// Option configures a Limiter at New.
type Option func(*Limiter)

// New returns a Limiter deciding with cfg, the state of its groups in b,
// the groups' tick schedules starting at now, and the global switch on.
// The package memory has the Backend of one process's memory. Tick,
// Snapshot, SnapshotDelta, Restore, Peer, Each and Stats use the optional
// interfaces b implements (Sweeper, Snapshotter, Viewer, StatsReporter)
// and do without the others.
func New(b Backend, now time.Time, cfg Config, opts ...Option) (*Limiter, error) {
	if b == nil {
		return nil, errors.New("limiter: New: nil Backend")
	}
	l := &Limiter{ids: map[string]GroupID{GroupLocalPeers: LocalPeers}, backend: b}
	l.names[LocalPeers] = GroupLocalPeers
	for _, o := range opts {
		o(l)
	}
	l.enabled.Store(true)
	if _, err := l.Apply(now, cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Apply installs cfg at once, keeping all tracked state, and reports how many
// entries of each group were dropped because the group's algorithm changed
// (docs/limiting.md, "Other algorithms": a change of algorithm drops the
// group's state; a change of limit, period or burst keeps it, converted to
// the new limits); groups that dropped nothing are not in the map. Groups
// that keep their tick interval keep their schedule; a changed interval
// applies from the next tick of the old one. On error nothing changes.
//
// The ticks due at now are applied first, under the settings they fell under:
// entries apply their ticks lazily, and one not applied yet would otherwise
// take the new reduction or expiry (eager ticks, as in the Arweave node,
// would not). That sweep also deletes the entries of groups removed by the
// previous Apply, so a group defined again starts afresh on a new schedule,
// with none left counting ticks on the old one.
func (l *Limiter) Apply(now time.Time, cfg Config) (map[string]int, error) {
	if l.set.Load() != nil {
		l.Tick(now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.set.Load()
	st, err := l.build(now.UnixMilli(), cfg, prev, nil)
	if err != nil {
		return nil, err
	}
	var dropped map[string]int
	for id, n := range l.install(prev, st) {
		if n > 0 {
			if dropped == nil {
				dropped = map[string]int{}
			}
			dropped[st.names[id]] += n
		}
	}
	return dropped, nil
}

// install makes st the settings in force and tells the backend, which
// answers with the entries it dropped per group (see Reconfigurer). l.mu
// must be held.
func (l *Limiter) install(prev, st *settings) map[GroupID]int {
	l.set.Store(st)
	for i := range st.groups {
		if a := st.groups[i].adaptive; a != nil {
			a.setParams(st.groups[i].Adaptive)
		}
	}
	r, ok := l.backend.(Reconfigurer)
	if !ok {
		return nil
	}
	var pt *GroupTable
	if prev != nil {
		pt = &prev.GroupTable
	}
	return r.Reconfigured(pt, &st.GroupTable)
}

// build compiles cfg into settings. Schedules come from saved (a restored
// snapshot) first, then from prev, else start at now. l.mu must be held.
func (l *Limiter) build(now int64, cfg Config, prev *settings, saved map[string][2]Schedule) (*settings, error) {
	cfg = cfg.withDefaults()
	if _, ok := cfg.Groups[GroupLocalPeers]; ok {
		return nil, settingError(GroupLocalPeers, "", ErrReservedGroup.Error())
	}
	if cfg.MaxTracked < 0 {
		return nil, fmt.Errorf("peers.max_tracked: must be ≥ 0, got %d", cfg.MaxTracked)
	}
	st := &settings{cfg: cfg}
	st.maxTracked = cfg.MaxTracked
	ver := l.ver + 1
	names := make([]string, 0, len(cfg.Groups))
	for name := range cfg.Groups {
		names = append(names, name)
	}
	sort.Strings(names)
	ids := make(map[string]GroupID, len(l.ids)+len(names))
	for k, v := range l.ids {
		ids[k] = v
	}
	next := GroupID(len(l.ids))
	for _, name := range names {
		gs := cfg.Groups[name]
		if err := validGroupName(name); err != nil {
			return nil, err
		}
		if err := gs.Validate(name); err != nil {
			return nil, err
		}
		if err := validateVersion(cfg.ArweaveVersion, gs, name); err != nil {
			return nil, err
		}
		id, ok := ids[name]
		if !ok {
			if int(next) >= MaxGroups {
				return nil, fmt.Errorf("http_api.limiter.%s: %w (at most %d over the daemon's life)", name, ErrTooManyGroups, MaxGroups-1)
			}
			id = next
			ids[name] = id
			next++
		}
		g := Group{ID: id, defined: true, backend: l.backend, Version: ver, Name: name, GroupSettings: gs,
			params: gs.Params(), limits: gs.Limits(), stateVer: ver, Arweave: cfg.ArweaveVersion}
		g.limits.ReduceOldest = cfg.ArweaveVersion == Arweave297 && gs.LeakyLimit == 0
		g.inflight = groupShardCounters(prev, id, gs)
		g.adaptive = groupAdaptive(prev, id, &gs, now)
		if prev != nil && prev.groups[id].defined {
			// The state stays valid while the algorithm stays and, for the
			// two whose units are made of the limits (and the sliding
			// log's gate, see logGate), the limits too.
			p := &prev.groups[id]
			if p.Algorithm == gs.Algorithm && (p.params == g.params || !gs.Algorithm.Measured()) {
				g.stateVer = p.stateVer
			}
		}
		switch {
		case saved[name][0].Valid():
			g.Leaky = saved[name][0].Retimed(now, gs.LeakyTickInterval)
			g.Cleanup = saved[name][1].Retimed(now, gs.CleanupInterval)
		case prev != nil && prev.groups[id].defined:
			g.Leaky = prev.groups[id].Leaky.Retimed(now, gs.LeakyTickInterval)
			g.Cleanup = prev.groups[id].Cleanup.Retimed(now, gs.CleanupInterval)
		default:
			g.Leaky = NewSchedule(now, gs.LeakyTickInterval)
			g.Cleanup = NewSchedule(now, gs.CleanupInterval)
		}
		st.groups[id] = g
	}
	st.groups[LocalPeers] = Group{defined: true, Name: GroupLocalPeers, GroupSettings: GroupSettings{Mode: ModeOff}}

	rt, err := NewRouteTable(cfg.Routes)
	if err != nil {
		return nil, err
	}
	st.routes = rt
	st.routeGroup = make([]GroupID, rt.Len())
	for i := range st.routeGroup {
		r := rt.Rule(i)
		id, ok := ids[r.Group]
		if !ok || !st.groups[id].defined || id == LocalPeers {
			return nil, fmt.Errorf("routes.rule[%d].group: %w %q", i, ErrUnknownGroup, r.Group)
		}
		st.routeGroup[i] = id
		st.routeReduce = append(st.routeReduce, r.ReduceOnStatus)
	}
	st.general = ids[GroupGeneral]
	for i, p := range cfg.ExemptPaths {
		pat, err := ParsePattern(p)
		if err != nil {
			return nil, fmt.Errorf("routes.exempt_paths[%d]: %w", i, err)
		}
		st.exemptPaths = append(st.exemptPaths, pat)
	}
	if st.ident, err = peer.NewIdentifier(peer.NewSet(cfg.TrustedProxies), cfg.IPv6Prefix, cfg.ForwardedHeader); err != nil {
		return nil, err
	}
	st.exempt = peer.NewSet(cfg.Exempt)
	st.deny = peer.NewSet(cfg.Deny)

	// Commit the new IDs only now that everything validated.
	l.ver = ver
	for name, id := range ids {
		if _, ok := l.ids[name]; !ok {
			l.ids[name] = id
			l.names[id] = name
		}
		if id != LocalPeers && (prev == nil || !prev.groups[id].defined) {
			l.lastTick[id] = st.groups[id].Leaky.IndexAt(now)
		}
	}
	st.names = l.names
	return st, nil
}

// groupShardCounters returns the shard in-flight counters of group id with
// settings gs (docs/arweave297.md): nil unless the scope is "shard"; those of
// prev while they have as many shards, else new ones. Requests admitted under
// counters that were replaced (a live change of number_of_workers or of the
// scope) give their slot back to those (the Decision holds the counter), so
// no count goes negative or leaks; until they end they are not counted
// against the new shards. Restore (prev nil) starts new ones, as it forgets
// the peers' own in-flight counts.
func groupShardCounters(prev *settings, id GroupID, gs GroupSettings) *shardCounters {
	if gs.ConcurrencyScope != ScopeShard {
		return nil
	}
	n := int(max(1, gs.NumberOfWorkers))
	if prev != nil && prev.groups[id].defined {
		if c := prev.groups[id].inflight; c != nil && c.Len() == n {
			return c
		}
	}
	return newShardCounters(n)
}

// CheckConfig reports whether New would accept cfg, without building the
// tables: the cheap validation of a live edit before it is stored.
func CheckConfig(cfg Config) error {
	l := &Limiter{ids: map[string]GroupID{GroupLocalPeers: LocalPeers}}
	_, err := l.build(0, cfg, nil, nil)
	return err
}

// Config returns the configuration in force.
func (l *Limiter) Config() Config { return l.set.Load().cfg }

// SetEnabled turns the global switch on or off. Off, every request is
// admitted with no state change (deny still applies); on, limits apply.
func (l *Limiter) SetEnabled(on bool) { l.enabled.Store(on) }

// Enabled reports the global switch.
func (l *Limiter) Enabled() bool { return l.enabled.Load() }

// GroupID returns the ID of the group called name, if it is defined.
func (l *Limiter) GroupID(name string) (GroupID, bool) {
	st := l.set.Load()
	for i := range st.groups {
		if st.groups[i].defined && st.groups[i].Name == name {
			return GroupID(i), true
		}
	}
	return 0, false
}

// GroupName returns the name of group g ("" if g was never defined).
func (l *Limiter) GroupName(g GroupID) string {
	if int(g) >= MaxGroups {
		return ""
	}
	return l.set.Load().groups[g].Name
}

// Groups returns the names of the defined groups, local_peers included, in
// ID order.
func (l *Limiter) Groups() []string {
	st := l.set.Load()
	var out []string
	for i := range st.groups {
		if st.groups[i].defined {
			out = append(out, st.groups[i].Name)
		}
	}
	return out
}

// Settings returns the settings of group g.
func (l *Limiter) Settings(g GroupID) (GroupSettings, bool) {
	if int(g) >= MaxGroups {
		return GroupSettings{}, false
	}
	gr := &l.set.Load().groups[g]
	return gr.GroupSettings, gr.defined
}

// Route is the result of classifying a request's path.
type Route struct {
	// Group is the group the request is decided in.
	Group GroupID
	// Rule is the index of the matching route rule, -1 when none matched.
	Rule int
	// Exempt is true when the path is in routes.exempt_paths: the request
	// bypasses the limiter entirely.
	Exempt bool
	// ReduceOnStatus lists the upstream statuses that refund one token of
	// the peer's group (read only).
	ReduceOnStatus []int
}

// classify finds the route of a request by its method and path
// (docs/limiting.md, "Routes and path patterns").
func (st *settings) classify(method, path string) Route {
	for _, p := range st.exemptPaths {
		if p.Match(path) {
			return Route{Exempt: true, Rule: -1}
		}
	}
	i := st.routes.Match(method, path)
	if i < 0 {
		return Route{Group: st.general, Rule: -1}
	}
	return Route{Group: st.routeGroup[i], Rule: i, ReduceOnStatus: st.routeReduce[i]}
}

// PeerOf identifies the peer of a request (docs/limiting.md, "Peers").
func (l *Limiter) PeerOf(remoteAddr string, h peer.Header) peer.Peer {
	return l.set.Load().ident.PeerOf(remoteAddr, h)
}

// ParsePeer parses an address given by an API caller into a peer.Peer.
func (l *Limiter) ParsePeer(s string) (peer.Peer, error) { return l.set.Load().ident.ParsePeer(s) }
