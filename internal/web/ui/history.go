package ui

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// totals sums s: the counts over its seconds and the highest in-flight.
func totals(s insight.Series) templates.HistoryRow {
	var r templates.HistoryRow
	for k := range s.T {
		r.Requests += s.Requests[k]
		r.Admitted += s.Admitted[k]
		r.RejectedConcurrency += s.RejectedConcurrency[k]
		r.RejectedRateLimit += s.RejectedRateLimit[k]
		r.WouldReject += s.WouldReject[k]
		r.PeakInflight = max(r.PeakInflight, s.Inflight[k])
	}
	r.Seconds = len(s.T)
	return r
}

// historyTableMinutes is what the overview's table (shown without
// JavaScript, in place of the charts) sums.
const historyTableMinutes = 10

// charts is the overview's chart section: the groups to choose from and
// each group's totals over the last 10 minutes.
func (d *Dashboard) charts() templates.Charts {
	since := d.now().Add(-historyTableMinutes * time.Minute)
	c := templates.Charts{URL: "/stats/history?minutes=60", RejectionsURL: "/stats/rejections?minutes=60", Minutes: historyTableMinutes, Cluster: d.opts.Cluster != nil}
	for _, name := range slices.Sorted(maps.Keys(d.lim.Stats())) {
		c.Groups = append(c.Groups, name)
		r := totals(d.history.Series(name, since))
		r.Group = name
		c.Rows = append(c.Rows, r)
	}
	c.All = totals(d.history.Series("", since))
	c.All.Group = "All groups"
	return c
}

// minutesParam reads the charts' ?minutes= (1 to 60, default 60); on a bad
// value it answers 422 naming the field and returns false.
func minutesParam(w http.ResponseWriter, q url.Values) (int, bool) {
	m := q.Get("minutes")
	if m == "" {
		return 60, true
	}
	n, err := strconv.Atoi(m)
	if err != nil || n < 1 || n > 60 {
		jsonbody.WriteError(w, http.StatusUnprocessableEntity, "minutes must be an integer from 1 to 60", "minutes")
		return 0, false
	}
	return n, true
}

// handleHistory serves GET /stats/history?group=&minutes=: the last
// minutes (1 to 60, default 60) of group's per-second samples as JSON
// (insight.Series); no group means every group summed.
func (d *Dashboard) handleHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	minutes, ok := minutesParam(w, q)
	if !ok {
		return
	}
	group := q.Get("group")
	if group != "" {
		if _, ok := d.lim.Stats()[group]; !ok {
			jsonbody.WriteError(w, http.StatusUnprocessableEntity, "no group "+strconv.Quote(group), "group")
			return
		}
	}
	since := d.now().Add(-time.Duration(minutes) * time.Minute)
	jsonbody.Write(w, http.StatusOK, d.history.Series(group, since))
}
