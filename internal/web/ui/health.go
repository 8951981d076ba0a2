package ui

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// healthStrip is the strip every page shows: the node's health over the
// last minute and this instance's own, from its summary in v; the
// instances of the fleet in cluster mode.
func healthStrip(v *fleet.View, now time.Time) *templates.Health {
	self := v.Self()
	if self == nil {
		return nil
	}
	h := &templates.Health{}
	add := func(list *[]templates.HealthItem, it templates.HealthItem) {
		if it.State == "" {
			it.State = "ok"
		}
		if it.State == "bad" {
			h.Bad = true
		}
		*list = append(*list, it)
	}
	n := &self.Node
	node := templates.HealthItem{ID: "node", Label: "node", Value: "up"}
	if !n.Up {
		node.Value, node.State, node.Title = "down", "bad", n.Error
	}
	add(&h.Node, node)
	errs := templates.HealthItem{ID: "5xx", Label: "5xx", Value: rate(n.Errors5xx), Title: "answers of status 5xx over the last minute, of " + rate(n.Requests)}
	if n.Requests > 0 && n.Errors5xx > 0 {
		errs.Value += " (" + pct(n.Errors5xx, n.Requests) + ")"
		errs.State = "warn"
		if n.Errors5xx/n.Requests >= fleet.ErrorShare {
			errs.State = "bad"
		}
	}
	add(&h.Node, errs)
	add(&h.Node, templates.HealthItem{ID: "p50", Label: "p50", Value: msValue(n.P50), Title: "median time of the node's answers over the last minute"})
	add(&h.Node, templates.HealthItem{ID: "p99", Label: "p99", Value: msValue(n.P99), Title: "99th percentile of the node's answers over the last minute"})
	last := templates.HealthItem{ID: "last-error", Label: "last error", Value: "none"}
	if n.LastErrorAt > 0 {
		at := time.UnixMilli(n.LastErrorAt)
		last.Value, last.Title = agoText(now, at), n.LastError+" ("+stamp(at).Text+")"
		if now.Sub(at) < time.Minute {
			last.State = "warn"
		}
	}
	add(&h.Node, last)

	d := &self.Daemon
	add(&h.Daemon, templates.HealthItem{ID: "version", Label: "limiterd", Value: orDash(self.Version)})
	if self.Started > 0 {
		add(&h.Daemon, templates.HealthItem{ID: "uptime", Label: "up", Value: spanText(now.Sub(time.UnixMilli(self.Started))), Title: "since " + stamp(time.UnixMilli(self.Started)).Text})
	}
	reload := templates.HealthItem{ID: "reload", Label: "reload", Value: "none since start"}
	if d.ReloadAt > 0 {
		at := time.UnixMilli(d.ReloadAt)
		reload.Value, reload.Title = "ok "+agoText(now, at), stamp(at).Text
		if d.ReloadError != "" {
			reload.Value, reload.State, reload.Title = "refused "+agoText(now, at), "bad", d.ReloadError
		}
	}
	add(&h.Daemon, reload)
	snap := templates.HealthItem{ID: "snapshot", Label: "snapshot", Value: "none yet"}
	switch {
	case d.SnapshotFailedAt > d.SnapshotAt:
		snap.Value, snap.State, snap.Title = "failing "+agoText(now, time.UnixMilli(d.SnapshotFailedAt)), "bad", d.SnapshotError
	case d.SnapshotAt > 0:
		at := time.UnixMilli(d.SnapshotAt)
		snap.Value, snap.Title = agoText(now, at), stamp(at).Text
		if d.SnapshotEvery > 0 && now.Sub(at) > 3*time.Duration(d.SnapshotEvery)*time.Millisecond+10*time.Second {
			snap.State = "warn"
		}
	}
	add(&h.Daemon, snap)
	add(&h.Daemon, templates.HealthItem{ID: "db", Label: "database", Value: bytesText(d.DBBytes)})
	backend := templates.HealthItem{ID: "backend", Label: "backend", Value: "local"}
	if d.Backend == "redis" {
		since := ""
		if d.BackendSince > 0 {
			since = " " + spanText(now.Sub(time.UnixMilli(d.BackendSince)))
		}
		backend.Value = "Redis up" + since
		switch {
		case !d.BackendUp:
			backend.Value, backend.State, backend.Title = "Redis down"+since, "bad", d.BackendReason
		case d.BackendSlotsDown > 0:
			backend.Value, backend.State = fmt.Sprintf("Redis up, %d slots down", d.BackendSlotsDown), "bad"
			backend.Title = fmt.Sprintf("%d of 16384 hash slots decided as on_failure says since %s: %s",
				d.BackendSlotsDown, time.UnixMilli(d.BackendSlotsSince).UTC().Format(time.RFC3339), d.BackendSlotsReason)
		}
	}
	add(&h.Daemon, backend)
	if v.Cluster {
		in := templates.HealthItem{ID: "instances", Label: "instances", Value: fmt.Sprint(len(v.Instances)), Href: "/#fleet"}
		for _, i := range v.Instances {
			if !i.Up || i.ClockOff != 0 || i.Drift {
				in.State = "warn"
			}
		}
		if v.Error != "" {
			in.Value, in.State, in.Title = "unknown", "warn", v.Error
		}
		add(&h.Daemon, in)
	}
	return h
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// problems are what is wrong in v, red first.
func problems(v *fleet.View, now time.Time) []templates.Problem {
	var bad, warn []templates.Problem
	for _, p := range v.Problems(now) {
		tp := templates.Problem{Bad: p.Bad, Title: p.Title, Text: p.Text}
		if v.Cluster {
			tp.Instance = p.Instance
		}
		if p.Bad {
			bad = append(bad, tp)
		} else {
			warn = append(warn, tp)
		}
	}
	return append(bad, warn...)
}

// fleetSection is the overview's section on the fleet (cluster mode).
func fleetSection(v *fleet.View, now time.Time) *templates.Fleet {
	if !v.Cluster {
		return nil
	}
	f := &templates.Fleet{ReadAt: stamp(v.ReadAt), Error: v.Error, Window: nowText(v.Window)}
	for _, g := range v.Groups {
		f.Groups = append(f.Groups, templates.FleetGroup{Name: g.Name, RequestRate: rate(g.Requests), RejectRate: rate(g.Rejected),
			DeniedRate: rate(g.Denied), RejectedPct: pct(g.Rejected, g.Requests), Hot: g.Requests > 0 && g.Rejected/g.Requests > 0.1})
	}
	for _, in := range v.Instances {
		req, rej, den := in.Rates()
		row := templates.InstanceRow{ID: in.Instance, Self: in.Self, Version: orDash(in.Version), Up: in.Up,
			RequestRate: rate(req), RejectRate: rate(rej), DeniedRate: rate(den), RejectedPct: pct(rej, req),
			Config: in.Config, Drift: in.Drift}
		row.Age = "now"
		if !in.Self {
			row.Age = spanText(in.Age) + " ago"
		}
		if in.Started > 0 {
			row.Uptime = spanText(time.Duration(in.At-in.Started) * time.Millisecond)
		}
		var node []string
		if in.Node.Up {
			node = append(node, "up")
		} else {
			node, row.NodeBad = append(node, "down"), true
		}
		if in.Node.Requests > 0 {
			node = append(node, "5xx "+pct(in.Node.Errors5xx, in.Node.Requests))
			if in.Node.Errors5xx/in.Node.Requests >= fleet.ErrorShare {
				row.NodeBad = true
			}
		}
		if in.Node.P99 >= 0 {
			node = append(node, "p99 "+msValue(in.Node.P99))
		}
		row.Node = strings.Join(node, " · ")
		row.Backend = "local"
		if in.Daemon.Backend == "redis" {
			row.Backend = "Redis up"
			switch {
			case !in.Daemon.BackendUp:
				row.Backend, row.BackendBad = "Redis down", true
			case in.Daemon.BackendSlotsDown > 0:
				row.Backend, row.BackendBad = fmt.Sprintf("Redis up, %d slots down", in.Daemon.BackendSlotsDown), true
			}
		}
		if in.ClockOff != 0 {
			row.Clock = fmt.Sprintf("clock %s %s", fleet.Seconds(in.ClockOff.Abs()), map[bool]string{true: "ahead", false: "behind"}[in.ClockOff > 0])
		}
		f.Instances = append(f.Instances, row)
	}
	return f
}

// nowText says what "now" covers: "the last 25 s".
func nowText(secs float64) string {
	return fmt.Sprintf("the last %.0f s", secs)
}

// handleHealth serves the health strip alone, for htmx to refresh it.
func (d *Dashboard) handleHealth(w http.ResponseWriter, r *http.Request) {
	v := d.opts.Fleet(r.Context(), false)
	render(w, r, http.StatusOK, templates.HealthStrip(healthStrip(&v, d.now())))
}

// handleProblems serves what is wrong alone, for htmx to refresh the
// overview's lead.
func (d *Dashboard) handleProblems(w http.ResponseWriter, r *http.Request) {
	v := d.opts.Fleet(r.Context(), false)
	render(w, r, http.StatusOK, templates.ProblemsSection(problems(&v, d.now())))
}
