package fleet

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Instance is one instance as a View shows it: its summary and what the
// reader makes of it.
type Instance struct {
	Summary
	// Self is the instance that made the view.
	Self bool
	// Age is how long ago the summary was made, by Redis's clock (its
	// clock's offset taken off).
	Age time.Duration
	// Up is false once the summary is older than Stale: the instance
	// stopped publishing, and leaves the fleet at TTL.
	Up bool
	// ClockOff is how far its clock is from Redis's when that is beyond
	// MaxClockOffset (positive: ahead), else 0.
	ClockOff time.Duration
	// Drift is true when its configuration's fingerprint is not the
	// viewer's: the two decide differently.
	Drift bool
}

// Rates returns the sums of its groups' rates.
func (in *Instance) Rates() (requests, rejected, denied float64) {
	for _, g := range in.Groups {
		requests += g.Requests
		rejected += g.Rejected
		denied += g.Denied
	}
	return
}

// Peer is one (peer, group) across the fleet: its rates summed over the
// instances that count it among their top, and which those are.
type Peer struct {
	Peer, Group        string
	Requests, Rejected float64
	Instances          []string
}

// SkipNote is a summary a View did not show, and why.
type SkipNote struct {
	Instance string
	Skipped
}

// View is the fleet as one instance sees it.
type View struct {
	// Cluster is true when the view was read from a Board; false, it is
	// the viewer's own summary alone.
	Cluster bool
	// Instances are the viewer first, then the others by name.
	Instances []Instance
	// Groups are the groups' rates summed over the instances that are up,
	// by name.
	Groups []Group
	// TopRejected and TopRequests are the (peer, group)s with the most
	// rejections and the most requests across the fleet, most first
	// (TopShown at most).
	TopRejected, TopRequests []Peer
	// Window is the viewer's window, in seconds.
	Window float64
	// ReadAt is when the board was read (zero outside cluster mode);
	// Error says why it could not be, when it could not (the view then
	// holds the last summaries read, or the viewer's alone).
	ReadAt time.Time
	Error  string
	// Skipped are the summaries left out of the last read; More counts
	// the instances beyond MaxInstances.
	Skipped []SkipNote
	More    int
}

// TopShown is how many (peer, group)s a View's top lists hold.
const TopShown = 10

// Self returns the viewer's row.
func (v *View) Self() *Instance {
	for i := range v.Instances {
		if v.Instances[i].Self {
			return &v.Instances[i]
		}
	}
	return nil
}

// Find returns the (peer, group)s of peer across the fleet, from every
// instance's top (not only the view's TopShown).
func (v *View) Find(peer string) []Peer {
	m := map[[2]string]*Peer{}
	var order [][2]string
	for _, in := range v.Instances {
		if !in.Up {
			continue
		}
		for _, o := range in.Top {
			if o.Peer != peer {
				continue
			}
			k := [2]string{o.Peer, o.Group}
			p := m[k]
			if p == nil {
				p = &Peer{Peer: o.Peer, Group: o.Group}
				m[k] = p
				order = append(order, k)
			}
			p.Requests += o.Requests
			p.Rejected += o.Rejected
			p.Instances = append(p.Instances, in.Instance)
		}
	}
	out := make([]Peer, 0, len(order))
	for _, k := range order {
		out = append(out, *m[k])
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// NewView makes the view of self and the others' summaries read at
// boardNow (Redis's clock). others may hold self's own: it is replaced by
// self, which is current.
func NewView(self Summary, others []Summary, boardNow time.Time, cluster bool) View {
	v := View{Cluster: cluster, Window: self.Window}
	v.Instances = append(v.Instances, Instance{Summary: self, Self: true, Up: true})
	for _, s := range others {
		if s.Instance == self.Instance {
			continue
		}
		in := Instance{Summary: s}
		// Its age by Redis's clock: its At moved to Redis's clock.
		in.Age = max(0, boardNow.Sub(time.UnixMilli(s.At-s.ClockOffset)))
		in.Up = in.Age <= Stale
		in.ClockOff = clockOff(s, boardNow)
		in.Drift = s.Config != self.Config
		v.Instances = append(v.Instances, in)
	}
	if cluster && !boardNow.IsZero() {
		v.Instances[0].ClockOff = clockOff(self, boardNow)
	}
	slices.SortFunc(v.Instances[1:], func(a, b Instance) int { return cmp.Compare(a.Instance, b.Instance) })
	groups := map[string]*Group{}
	type key = [2]string
	peers := map[key]*Peer{}
	for _, in := range v.Instances {
		if !in.Up {
			continue
		}
		for _, g := range in.Groups {
			t := groups[g.Name]
			if t == nil {
				t = &Group{Name: g.Name}
				groups[g.Name] = t
			}
			t.Requests += g.Requests
			t.Rejected += g.Rejected
			t.Denied += g.Denied
			t.Inflight += g.Inflight
		}
		for _, o := range in.Top {
			k := key{o.Peer, o.Group}
			p := peers[k]
			if p == nil {
				p = &Peer{Peer: o.Peer, Group: o.Group}
				peers[k] = p
			}
			p.Requests += o.Requests
			p.Rejected += o.Rejected
			p.Instances = append(p.Instances, in.Instance)
		}
	}
	for _, g := range groups {
		v.Groups = append(v.Groups, *g)
	}
	slices.SortFunc(v.Groups, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	all := make([]Peer, 0, len(peers))
	for _, p := range peers {
		all = append(all, *p)
	}
	v.TopRejected = top(all, func(p Peer) float64 { return p.Rejected })
	v.TopRequests = top(all, func(p Peer) float64 { return p.Requests })
	return v
}

// top returns the TopShown peers with the largest positive by, most
// first, ties by peer and group.
func top(all []Peer, by func(Peer) float64) []Peer {
	var out []Peer
	for _, p := range all {
		if by(p) > 0 {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Peer) int {
		if c := cmp.Compare(by(b), by(a)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Peer, b.Peer); c != 0 {
			return c
		}
		return cmp.Compare(a.Group, b.Group)
	})
	return out[:min(len(out), TopShown)]
}

// clockOff is how far s's clock is from Redis's, when beyond
// MaxClockOffset: as the instance measured it, or, when its summary is
// dated ahead of Redis's clock by more (a clock that jumped since), by
// that.
func clockOff(s Summary, boardNow time.Time) time.Duration {
	off := time.Duration(s.ClockOffset) * time.Millisecond
	if ahead := time.UnixMilli(s.At).Sub(boardNow); ahead > MaxClockOffset && ahead > off {
		off = ahead
	}
	if off.Abs() <= MaxClockOffset {
		return 0
	}
	return off
}

// Problem is something wrong that a page leads with.
type Problem struct {
	// Bad is red (requests suffer, or will); otherwise a warning.
	Bad bool
	// Instance is the instance concerned ("" for the fleet).
	Instance string
	// Title says it in a few words, Text the rest.
	Title, Text string
}

// Problems returns what is wrong with the instance s at now, by its own
// clock: its node down or answering errors, its reload refused, its
// snapshots failing or late, its Redis unused.
func (s *Summary) Problems(now time.Time) []Problem {
	var out []Problem
	add := func(bad bool, title, text string) {
		out = append(out, Problem{Bad: bad, Instance: s.Instance, Title: title, Text: text})
	}
	n := &s.Node
	if !n.Up {
		add(true, "node down", "the node does not accept connections: "+n.Error)
	} else if n.Requests > 0 && n.Errors5xx/n.Requests >= ErrorShare {
		add(true, "node errors", fmt.Sprintf("%s of its answers are 5xx (%s/s) over the last minute", percent(n.Errors5xx/n.Requests), num(n.Errors5xx)))
	}
	d := &s.Daemon
	if d.ReloadError != "" {
		add(true, "reload refused", "the configuration reloaded "+ago(now, d.ReloadAt)+" was refused, the previous one runs: "+d.ReloadError)
	}
	if d.SnapshotFailedAt > d.SnapshotAt {
		add(true, "snapshot failing", "the last snapshot, "+ago(now, d.SnapshotFailedAt)+", failed: "+d.SnapshotError)
	} else if late := time.Duration(3*d.SnapshotEvery)*time.Millisecond + 10*time.Second; d.SnapshotEvery > 0 && d.SnapshotAt > 0 && now.Sub(time.UnixMilli(d.SnapshotAt)) > late {
		add(false, "snapshot late", "the last snapshot was written "+ago(now, d.SnapshotAt))
	}
	if d.Backend == "redis" && !d.BackendUp {
		add(true, "Redis down", "since "+ago(now, d.BackendSince)+": "+d.BackendReason)
	} else if d.Backend == "redis" && d.BackendSlotsDown > 0 {
		add(true, "Redis slots down", fmt.Sprintf("%d of 16384 hash slots since %s, decided as on_failure says: %s", d.BackendSlotsDown, ago(now, d.BackendSlotsSince), d.BackendSlotsReason))
	}
	return out
}

// ErrorShare is the share of 5xx answers from which a node is shown as
// failing.
const ErrorShare = 0.05

// Problems returns what is wrong across the view: every instance's own
// problems (by the viewer's clock, now), and the fleet's: an instance
// that stopped publishing, a clock off, a configuration that differs, a
// board that cannot be read, summaries skipped.
func (v *View) Problems(now time.Time) []Problem {
	var out []Problem
	for i := range v.Instances {
		in := &v.Instances[i]
		if in.Self || in.Up {
			out = append(out, in.Summary.Problems(now)...)
		}
		if !in.Up {
			out = append(out, Problem{Instance: in.Instance, Title: "instance silent",
				Text: fmt.Sprintf("no summary for %s: it stopped or cannot reach Redis (it leaves the fleet after %s)", Seconds(in.Age), Seconds(TTL))})
		}
		if in.ClockOff != 0 {
			out = append(out, Problem{Instance: in.Instance, Title: "clock off",
				Text: fmt.Sprintf("its clock is %s %s Redis's: its times and windows are off by as much", Seconds(in.ClockOff.Abs()), aheadBehind(in.ClockOff))})
		}
		if in.Drift {
			out = append(out, Problem{Instance: in.Instance, Title: "configuration differs",
				Text: fmt.Sprintf("its limiter configuration (%s) is not this instance's (%s): the two decide differently", in.Config, v.Instances[0].Config)})
		}
	}
	if v.Error != "" {
		out = append(out, Problem{Title: "fleet unknown", Text: "the other instances' summaries could not be read from Redis: " + v.Error})
	}
	for _, s := range v.Skipped {
		out = append(out, Problem{Instance: s.Instance, Title: "summary skipped", Text: s.Reason + ": " + s.Detail})
	}
	if v.More > 0 {
		out = append(out, Problem{Title: "too many instances", Text: fmt.Sprintf("%d more instances are on the board than the %d shown", v.More, MaxInstances)})
	}
	return out
}

// Seconds says d in seconds for a person: "27.5 s", "10 s".
func Seconds(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), ".0") + " s"
}

func aheadBehind(d time.Duration) string {
	if d > 0 {
		return "ahead of"
	}
	return "behind"
}

// ago says when ms was, from now: "12 s ago (21:26:11 UTC)".
func ago(now time.Time, ms int64) string {
	if ms <= 0 {
		return "at an unknown time"
	}
	t := time.UnixMilli(ms)
	d := now.Sub(t)
	var s string
	switch {
	case d < 0:
		s = "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%.1f h ago", d.Hours())
	default:
		s = fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
	return s + " (" + t.UTC().Format("2006-01-02 15:04:05") + " UTC)"
}

func percent(x float64) string {
	return fmt.Sprintf("%.0f %%", math.Round(100*x))
}

// num writes x with one decimal below 100, whole above, grouped by
// thousands as the pages write numbers ("4 855").
func num(x float64) string {
	if x < 100 {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", x), ".0")
	}
	s := fmt.Sprintf("%.0f", x)
	var b strings.Builder
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
