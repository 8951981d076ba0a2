package ui

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
)

// Sizes of the overview.
const (
	// sparkMinutes is what a sparkline covers, a point a minute.
	sparkMinutes   = 30
	sparkW, sparkH = 120, 24
)

// windowText says what a record covering secs seconds covers.
func windowText(secs float64) string {
	if secs >= insight.TalkersWindow.Seconds() {
		return "the last " + minutesText(insight.TalkersWindow)
	}
	return fmt.Sprintf("the last %.0f s (since limiterd started)", secs)
}

// nowWindow returns what "now" covers.
func (d *Dashboard) nowWindow() time.Duration {
	if d.opts.NowWindow == nil {
		return 30 * time.Second
	}
	return d.opts.NowWindow()
}

// nowSentence says what the overview's rates cover: the seconds of the
// window held (whole 10 s buckets), and the window.
func (d *Dashboard) nowSentence(secs float64) string {
	w := d.nowWindow()
	s := nowText(secs)
	if secs < w.Seconds()-insight.TalkersBucket.Seconds() {
		s += " (since limiterd started)"
	}
	return s + fmt.Sprintf(", of a %s window (admin.now_window) counted in %s steps", spanText(w), spanText(insight.TalkersBucket))
}

func talkerRow(p fleet.Peer, cluster bool) templates.TalkerRow {
	r := templates.TalkerRow{
		Peer: p.Peer, Group: p.Group, RequestPerSec: p.Requests, RejectPerSec: p.Rejected,
		RequestRate: rate(p.Requests), RejectRate: rate(p.Rejected),
		RejectedPct: pct(p.Rejected, p.Requests),
	}
	if cluster {
		r.Instances = strings.Join(p.Instances, ", ")
	}
	return r
}

// estimate says how the counts are sampled, and what the record lost,
// "" when they are exact.
func (d *Dashboard) estimate() string {
	_, nth, lost := d.activity.Sampling()
	var s string
	if nth > 0 {
		s = fmt.Sprintf("estimated from 1 in %d decisions (busy: limiterd samples them)", uint64(1)<<nth)
	}
	if lost > 0 {
		if s != "" {
			s += "; "
		}
		s += count(int64(lost)) + " decisions since the start came faster than they could be recorded and are missing"
	}
	return s
}

// overview is the overview's data: what is wrong first, then who is
// hammering now — across the fleet in cluster mode — and this instance's
// groups, all over the now window (the fleet's View, whose own summary
// this instance's rates come from, so that the page, the API and the
// other instances say the same numbers).
func (d *Dashboard) overview(ctx context.Context) templates.Overview {
	now := d.now()
	lim := d.lim
	v := d.opts.Fleet(ctx, true)
	self := v.Self()
	stats := lim.Stats()
	o := templates.Overview{
		Enabled: lim.Enabled(), Now: stamp(now), Window: d.nowSentence(self.Window), WindowSeconds: self.Window,
		Estimate: d.estimate(), Tracked: lim.Tracked(), Problems: problems(&v, now),
		Fleet: fleetSection(&v, now), ClusterMode: v.Cluster,
	}
	var cs *templates.Cluster
	if c := d.opts.Cluster; c != nil {
		st := c.ClusterState()
		cs = &st
	}
	o.Cluster, o.ClusterUp = templates.ClusterLine(cs, now)
	for _, p := range v.TopRejected {
		o.TopRejected = append(o.TopRejected, talkerRow(p, v.Cluster))
	}
	for _, p := range v.TopRequests {
		o.TopRequests = append(o.TopRequests, talkerRow(p, v.Cluster))
	}
	rates := map[string]fleet.Group{}
	for _, g := range self.Groups {
		rates[g.Name] = g
	}
	since := now.Add(-sparkMinutes * time.Minute)
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		id, _ := lim.GroupID(name)
		mode := "—"
		if s, ok := lim.Settings(id); ok && id != limiter.LocalPeers {
			mode = s.Mode.String()
		}
		o.Groups = append(o.Groups, groupNow(name, mode, id != limiter.LocalPeers, rates[name], d.history.Series(name, since)))
		o.Totals = append(o.Totals, templates.GroupRow{Name: name, Mode: mode, Stats: stats[name]})
	}
	o.Adaptive = templates.Adaptive{Rows: d.adaptiveRows(), Minutes: sparkMinutes}
	return o
}

// emptySeries is no history: a flat sparkline.
var emptySeries insight.Series

// groupNow is a group's line: its rates r over the now window and the
// sparkline of s per minute.
func groupNow(name, mode string, editable bool, r fleet.Group, s insight.Series) templates.GroupNow {
	g := templates.GroupNow{Name: name, Mode: mode, Editable: editable, Inflight: r.Inflight,
		RequestPerSec: r.Requests, RejectPerSec: r.Rejected, DeniedPerSec: r.Denied}
	g.RequestRate, g.RejectRate, g.DeniedRate = rate(r.Requests), rate(r.Rejected), rate(r.Denied)
	g.RejectedPct = pct(r.Rejected, r.Requests)
	g.Hot = r.Requests > 0 && r.Rejected/r.Requests > 0.1
	// Per minute, the newest last.
	n := len(s.T)
	reqs, rejs := make([]float64, sparkMinutes), make([]float64, sparkMinutes)
	if n > 0 {
		end := s.T[n-1]
		for i, t := range s.T {
			m := sparkMinutes - 1 - int((end-t)/60)
			if m < 0 {
				continue
			}
			reqs[m] += float64(s.Requests[i])
			rejs[m] += float64(s.RejectedConcurrency[i] + s.RejectedRateLimit[i] + s.WouldReject[i] + s.ShedAt(i))
		}
	}
	g.Spark = spark(reqs, rejs, fmt.Sprintf("%s: requests and rejections per minute over the last %d minutes", name, sparkMinutes))
	return g
}

// spark draws reqs and rejs (one value a minute) on one scale.
func spark(reqs, rejs []float64, label string) templates.Spark {
	top := 1.0
	for i := range reqs {
		top = max(top, reqs[i], rejs[i])
	}
	return templates.Spark{Width: sparkW, Height: sparkH, Requests: points(reqs, top), Rejected: points(rejs, top), Label: label, Idle: top == 1 && slices.Max(reqs) == 0}
}

// points is v (one value a minute) as a sparkline's polyline points, top
// at its top edge.
func points(v []float64, top float64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		px := float64(i) * float64(sparkW-2) / float64(max(len(v)-1, 1))
		py := float64(sparkH-2) - x/top*float64(sparkH-4)
		fmt.Fprintf(&b, "%.1f,%.1f", px+1, py)
	}
	return b.String()
}

func (d *Dashboard) handleOverview(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OverviewPage(d.page(r, "Overview", "/"), d.overview(r.Context()), d.charts()))
}

func (d *Dashboard) handleStats(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.Stats(d.overview(r.Context())))
}

func (d *Dashboard) handleSwitch(w http.ResponseWriter, r *http.Request) {
	on, err := strconv.ParseBool(r.PostFormValue("on"))
	if err != nil {
		d.fail(w, r, &limiter.FieldError{Field: "on", Problem: "must be true or false"})
		return
	}
	if err := d.live.SetEnabled(r.Context(), d.viewer(r).Actor, on); err != nil {
		d.fail(w, r, err)
		return
	}
	done := "off"
	if on {
		done = "on"
	}
	redirect(w, r, "/?done="+done)
}

// rejectionsStep is the most seconds a point of the stacked rejections
// covers; a stretch shorter than rejectionsPoints of them takes shorter
// steps, so that a chart just begun has points to draw.
const (
	rejectionsStep   = 10
	rejectionsPoints = 60
)

// Rejections is the stacked chart's data: per group with any rejection
// in the stretch, its rejections per second (concurrency, rate limit and
// dry run's would-be) averaged over Step seconds (1 to 10) from each T.
type Rejections struct {
	T      []int64          `json:"t"`
	Step   int              `json:"step"`
	Groups []GroupRejection `json:"groups"`
}

// GroupRejection is one group's series of Rejections.
type GroupRejection struct {
	Group    string    `json:"group"`
	Rejected []float64 `json:"rejected"`
}

// handleRejections serves GET /stats/rejections?minutes=: the last
// minutes (1 to 60, default 60) of every group's rejections, for the
// overview's stacked chart.
func (d *Dashboard) handleRejections(w http.ResponseWriter, r *http.Request) {
	minutes, ok := minutesParam(w, r.URL.Query())
	if !ok {
		return
	}
	since := d.now().Add(-time.Duration(minutes) * time.Minute)
	out := Rejections{T: []int64{}, Groups: []GroupRejection{}}
	for _, name := range slices.Sorted(maps.Keys(d.lim.Stats())) {
		s := d.history.Series(name, since)
		if out.Step == 0 {
			out.Step = min(max(len(s.T)/rejectionsPoints, 1), rejectionsStep)
			for i := 0; i < len(s.T); i += out.Step {
				out.T = append(out.T, s.T[i])
			}
		}
		vals := make([]float64, len(out.T))
		any := false
		for i := range s.T {
			n := s.RejectedConcurrency[i] + s.RejectedRateLimit[i] + s.WouldReject[i]
			if n > 0 && i/out.Step < len(vals) {
				vals[i/out.Step] += float64(n) / float64(out.Step)
				any = true
			}
		}
		if any {
			out.Groups = append(out.Groups, GroupRejection{Group: name, Rejected: vals})
		}
	}
	jsonbody.Write(w, http.StatusOK, out)
}

// talkerSet returns the top talkers' counts as of now.
func (d *Dashboard) talkerSet(now time.Time) insight.TalkerSet {
	return d.activity.Talkers().Snapshot(now)
}
