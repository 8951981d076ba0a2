package api

import (
	"net/http"
	"time"

	"github.com/limiterd/limiterd/internal/fleet"
)

// overviewAnswer is GET /api/v1/overview's body (docs/api.md): the fleet
// as the dashboard's overview shows it, rates per second over window_s.
type overviewAnswer struct {
	Cluster     bool             `json:"cluster"`
	At          time.Time        `json:"at"`
	Window      float64          `json:"window_s"`
	Instances   []instanceAnswer `json:"instances"`
	Groups      []groupRates     `json:"groups"`
	TopRejected []peerRates      `json:"top_rejected"`
	TopRequests []peerRates      `json:"top_requests"`
	Problems    []problemAnswer  `json:"problems"`
	Skipped     []skipAnswer     `json:"skipped,omitempty"`
	ReadError   string           `json:"read_error,omitempty"`
}

type instanceAnswer struct {
	ID      string `json:"id"`
	Self    bool   `json:"self"`
	Version string `json:"version"`
	// Up is false once the instance's summary is older than 3 publishing
	// periods (it stopped, or cannot reach Redis).
	Up       bool    `json:"up"`
	AgeS     float64 `json:"age_s"`
	Requests float64 `json:"requests"`
	Rejected float64 `json:"rejected"`
	Denied   float64 `json:"denied"`
	// StartedAt is when it started serving.
	StartedAt   *time.Time   `json:"started_at,omitempty"`
	Config      string       `json:"config"`
	ConfigDrift bool         `json:"config_drift"`
	ClockOffMS  int64        `json:"clock_off_ms"`
	Node        fleet.Node   `json:"node"`
	Daemon      fleet.Daemon `json:"daemon"`
	Groups      []groupRates `json:"groups"`
}

type groupRates struct {
	Group    string  `json:"group"`
	Requests float64 `json:"requests"`
	Rejected float64 `json:"rejected"`
	Denied   float64 `json:"denied"`
	Inflight int64   `json:"inflight"`
}

type peerRates struct {
	Peer  string `json:"peer"`
	Group string `json:"group"`
	// Rate is the rejections per second for top_rejected, the requests
	// per second for top_requests.
	Rate      float64  `json:"rate"`
	Requests  float64  `json:"requests"`
	Rejected  float64  `json:"rejected"`
	Instances []string `json:"instances"`
}

type problemAnswer struct {
	Severity string `json:"severity"`
	Instance string `json:"instance,omitempty"`
	Title    string `json:"title"`
	Text     string `json:"text"`
}

type skipAnswer struct {
	Instance string `json:"instance"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail"`
}

// handleOverview answers GET /api/v1/overview: the fleet's instances,
// totals per group and top (peer, group)s, fleet-wide in cluster mode and
// this instance's own otherwise, with what is wrong.
func (a *API) handleOverview(w http.ResponseWriter, r *http.Request) {
	if a.opts.Fleet == nil {
		writeError(w, http.StatusNotImplemented, "no overview in this build", "")
		return
	}
	now := a.now()
	v := a.opts.Fleet(r.Context(), true)
	ans := overviewAnswer{Cluster: v.Cluster, At: now.UTC(), Window: v.Window, ReadError: v.Error,
		Instances: []instanceAnswer{}, Groups: groupsOf(v.Groups), Problems: []problemAnswer{}}
	for _, in := range v.Instances {
		req, rej, den := in.Rates()
		ia := instanceAnswer{ID: in.Instance, Self: in.Self, Version: in.Version, Up: in.Up, AgeS: in.Age.Seconds(),
			Requests: req, Rejected: rej, Denied: den, Config: in.Config, ConfigDrift: in.Drift,
			ClockOffMS: in.ClockOff.Milliseconds(), Node: in.Node, Daemon: in.Daemon, Groups: groupsOf(in.Groups)}
		if in.Started > 0 {
			t := time.UnixMilli(in.Started).UTC()
			ia.StartedAt = &t
		}
		ans.Instances = append(ans.Instances, ia)
	}
	ans.TopRejected = peersOf(v.TopRejected, func(p fleet.Peer) float64 { return p.Rejected })
	ans.TopRequests = peersOf(v.TopRequests, func(p fleet.Peer) float64 { return p.Requests })
	for _, p := range v.Problems(now) {
		sev := "warn"
		if p.Bad {
			sev = "bad"
		}
		ans.Problems = append(ans.Problems, problemAnswer{Severity: sev, Instance: p.Instance, Title: p.Title, Text: p.Text})
	}
	for _, s := range v.Skipped {
		ans.Skipped = append(ans.Skipped, skipAnswer{Instance: s.Instance, Reason: s.Reason, Detail: s.Detail})
	}
	writeJSON(w, http.StatusOK, ans)
}

func groupsOf(gs []fleet.Group) []groupRates {
	out := make([]groupRates, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupRates{Group: g.Name, Requests: g.Requests, Rejected: g.Rejected, Denied: g.Denied, Inflight: g.Inflight})
	}
	return out
}

func peersOf(ps []fleet.Peer, rate func(fleet.Peer) float64) []peerRates {
	out := make([]peerRates, 0, len(ps))
	for _, p := range ps {
		out = append(out, peerRates{Peer: p.Peer, Group: p.Group, Rate: rate(p), Requests: p.Requests, Rejected: p.Rejected, Instances: p.Instances})
	}
	return out
}
