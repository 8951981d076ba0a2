package ui

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
)

// shedSeconds is what the adaptive card's shed rate covers: the last
// minute of the per-second history.
const shedSeconds = 60

// adaptiveRows are the rows of the groups whose adaptive concurrency is
// on (docs/limiting.md, "Adaptive concurrency"), by name: now, and their
// last sparkMinutes from the history.
func (d *Dashboard) adaptiveRows() []templates.AdaptiveRow {
	var out []templates.AdaptiveRow
	for _, name := range slices.Sorted(maps.Keys(d.lim.Stats())) {
		if r, ok := d.adaptiveRow(name); ok {
			out = append(out, r)
		}
	}
	return out
}

// adaptiveRow is group name's row; ok is false when its adaptive
// concurrency is off.
func (d *Dashboard) adaptiveRow(name string) (templates.AdaptiveRow, bool) {
	g, ok := d.lim.GroupID(name)
	if !ok {
		return templates.AdaptiveRow{}, false
	}
	v, ok := d.lim.Adaptive(g)
	if !ok {
		return templates.AdaptiveRow{}, false
	}
	r := templates.AdaptiveRow{Group: name, Limit: v.Limit, Inflight: v.Inflight, Probing: v.Probing,
		Latency: latencyText(v.Latency), Unloaded: latencyText(v.Unloaded), ShedRate: rate(0), ShedPct: "—"}
	if s, ok := d.lim.Settings(g); ok {
		r.Mode = s.Mode.String()
	}
	if d.history == nil {
		return r, true
	}
	s := d.history.Series(name, d.now().Add(-sparkMinutes*time.Minute))
	n := len(s.T)
	var req, shed float64
	for i := n - min(n, shedSeconds); i < n; i++ {
		req += float64(s.Requests[i])
		shed += float64(s.Shed[i])
	}
	if r.Mode == limiter.ModeDryRun.String() {
		// Nothing is shed: what would have been is in would_reject.
		shed = 0
		for i := n - min(n, shedSeconds); i < n; i++ {
			shed += float64(s.WouldReject[i])
		}
	}
	secs := float64(max(min(n, shedSeconds), 1))
	r.ShedRate, r.ShedPct = rate(shed/secs), pct(shed, req)
	limits, lats, sheds := perMinute(s)
	r.LimitSpark = line(limits, fmt.Sprintf("%s: the adaptive limit at each minute's end, last %d minutes", name, sparkMinutes))
	r.LatencySpark = line(lats, fmt.Sprintf("%s: the latency it followed, last %d minutes", name, sparkMinutes))
	r.ShedSpark = line(sheds, fmt.Sprintf("%s: requests shed per minute, last %d minutes", name, sparkMinutes))
	r.ShedSpark.Rejected, r.ShedSpark.Requests = r.ShedSpark.Requests, ""
	return r, true
}

// perMinute folds s into sparkMinutes minutes, the newest last: the limit
// and the latency at each minute's last second, the requests shed during
// it.
func perMinute(s insight.Series) (limits, lats, sheds []float64) {
	limits, lats, sheds = make([]float64, sparkMinutes), make([]float64, sparkMinutes), make([]float64, sparkMinutes)
	n := len(s.T)
	if n == 0 {
		return
	}
	end := s.T[n-1]
	for i, t := range s.T {
		m := sparkMinutes - 1 - int((end-t)/60)
		if m < 0 {
			continue
		}
		limits[m], lats[m] = float64(s.AdaptiveLimit[i]), float64(s.AdaptiveLatencyUS[i])
		sheds[m] += float64(s.Shed[i])
	}
	return
}

// line draws v (one value a minute) on its own scale, as the Requests
// line of a sparkline.
func line(v []float64, label string) templates.Spark {
	return templates.Spark{Width: sparkW, Height: sparkH, Requests: points(v, max(slices.Max(v), 1)), Label: label, Idle: slices.Max(v) == 0}
}

// latencyText says a latency: "—" for none, "850 µs", "12.3 ms", "1.25 s".
func latencyText(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
