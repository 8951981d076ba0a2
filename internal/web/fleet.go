package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
)

// StoreHealth is the database's health, for the dashboard.
type StoreHealth struct {
	// SnapshotOK is when the last snapshot was written, SnapshotFailed
	// when one last failed and SnapshotError why (zero: none yet);
	// SnapshotEvery is snapshot.interval.
	SnapshotOK, SnapshotFailed time.Time
	SnapshotError              string
	SnapshotEvery              time.Duration
	// DBBytes is the database file's size.
	DBBytes int64
}

// DefaultNowWindow is admin.now_window's default: what "now" covers.
const DefaultNowWindow = 30 * time.Second

// probeEvery is how often Run checks that the node accepts connections.
const probeEvery = 2 * time.Second

// SetNowWindow changes what the dashboard's "now" covers (admin.now_window,
// on SIGHUP); d ≤ 0 is DefaultNowWindow.
func (s *Server) SetNowWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultNowWindow
	}
	s.nowWindow.Store(int64(d))
}

// NowWindow returns what the dashboard's "now" covers.
func (s *Server) NowWindow() time.Duration { return time.Duration(s.nowWindow.Load()) }

// runHealth checks the node every probeEvery until ctx ends (its result
// is cached: the pages never dial).
func (s *Server) runHealth(ctx context.Context) {
	if s.opts.Upstream == nil {
		return
	}
	check := func() {
		s.upMu.Lock()
		s.upChecked = time.Time{} // a fresh dial, not the cached answer
		s.upMu.Unlock()
		_ = s.upstreamReachable(ctx)
	}
	check()
	ticker.Every(ctx, probeEvery, check)
}

// nodeCheck returns the last check of the node: checked false before the
// first (and without an upstream).
func (s *Server) nodeCheck() (checked bool, err error) {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	return !s.upChecked.IsZero(), s.upErr
}

// health returns the node's health over the last minute and the daemon's,
// as of now.
func (s *Server) health(now time.Time) (fleet.Node, fleet.Daemon) {
	m := s.node.Minute()
	n := fleet.Node{Up: true, Requests: m.Requests, Errors5xx: m.Errors5xx, P50: -1, P99: -1}
	if m.P50 >= 0 {
		n.P50, n.P99 = ms(m.P50), ms(m.P99)
	}
	if checked, err := s.nodeCheck(); checked && err != nil {
		n.Up, n.Error = false, err.Error()
	}
	if f := s.opts.UpstreamError; f != nil {
		if e, ok := f(); ok {
			n.LastError, n.LastErrorAt = e.Err, e.At.UnixMilli()
			if e.Timeout {
				n.LastError = "timeout: " + e.Err
			}
		}
	}
	d := fleet.Daemon{Backend: "local", BackendUp: true}
	if s.opts.Daemon != nil {
		info := s.opts.Daemon()
		d.ReloadAt, d.ReloadError = unixMS(info.LastReloadAt), info.LastReloadError
	}
	if f := s.opts.Store; f != nil {
		st := f()
		d.SnapshotAt, d.SnapshotFailedAt, d.SnapshotError = unixMS(st.SnapshotOK), unixMS(st.SnapshotFailed), st.SnapshotError
		d.SnapshotEvery, d.DBBytes = st.SnapshotEvery.Milliseconds(), st.DBBytes
	}
	if c := s.opts.Cluster; c != nil {
		st := c.ClusterState()
		d.Backend, d.BackendUp, d.BackendSince, d.BackendReason = "redis", st.Up, unixMS(st.Since), st.Reason
		d.BackendSlotsDown, d.BackendSlotsSince, d.BackendSlotsReason = st.SlotsDown, unixMS(st.SlotsSince), st.SlotsReason
	}
	return n, d
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e5) / 10 }

func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// summary returns this instance's summary as of now: its health, and
// with full its groups' rates and its top offenders over the now window
// (both over the same seconds: those the top talkers' buckets cover).
func (s *Server) summary(now time.Time, full bool) fleet.Summary {
	sum := fleet.Summary{Schema: fleet.Schema, Instance: s.opts.Instance, Version: s.opts.Build.Version, Config: s.fingerprint(now), At: now.UnixMilli()}
	if s.opts.Daemon != nil {
		sum.Started = unixMS(s.opts.Daemon().StartedAt)
	}
	sum.Node, sum.Daemon = s.health(now)
	if !full {
		sum.Window = s.activity.Talkers().RecentSeconds(now, s.NowWindow())
		return sum
	}
	set := s.activity.Talkers().Recent(now, s.NowWindow())
	sum.Window = set.Seconds()
	span := int(math.Round(set.Seconds()))
	stats := s.lim.Stats()
	since := now.Add(-time.Duration(span+2) * time.Second)
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		r := s.history.Series(name, since).Rates(span)
		sum.Groups = append(sum.Groups, fleet.Group{Name: name, Requests: r.Requests, Rejected: r.Rejected, Denied: r.Denied, Inflight: r.Inflight})
	}
	seen := map[[2]string]bool{}
	for _, by := range []string{insight.ByRejections, insight.ByRequests} {
		for _, t := range set.Top(by, fleet.TopShown, 0) {
			o := fleet.Offender{Peer: t.Peer.String(), Group: s.lim.GroupName(t.Group), Requests: t.RequestRate(), Rejected: t.RejectRate()}
			if k := [2]string{o.Peer, o.Group}; !seen[k] {
				seen[k] = true
				sum.Top = append(sum.Top, o)
			}
		}
	}
	return sum
}

// fingerprints caches the fingerprint of the limiter's configuration for
// a few seconds (a JSON encoding and a hash).
type fingerprints struct {
	mu  sync.Mutex
	at  time.Time
	val string
}

// fingerprint returns the first 12 hex digits of the SHA-256 of the
// limiter's configuration in force (file and live edits: groups, routes,
// peers), recomputed at most every fleet.Every.
func (s *Server) fingerprint(now time.Time) string {
	f := &s.fp
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.val != "" && now.Sub(f.at) < fleet.Every && !now.Before(f.at) {
		return f.val
	}
	b, err := json.Marshal(configOf(s.lim))
	if err != nil {
		return "unknown"
	}
	h := sha256.Sum256(b)
	f.at, f.val = now, hex.EncodeToString(h[:6])
	return f.val
}

// configOf is what the fingerprint covers: the limiter's configuration
// but its bound on tracked entries (each instance's own memory).
func configOf(lim *limiter.Limiter) limiter.Config {
	c := lim.Config()
	c.MaxTracked = 0
	return c
}

// FleetView returns the fleet as this instance sees it now (its own
// summary alone outside cluster mode); full adds every instance's groups
// and offenders to its own (the others' are always whole).
func (s *Server) FleetView(ctx context.Context, full bool) fleet.View {
	self := s.summary(s.now(), full)
	if s.publisher != nil {
		self.ClockOffset = s.publisher.ClockOffset()
	}
	return s.fleetReader.View(ctx, self)
}

// runFleet publishes this instance's summary every fleet.Every until ctx
// ends (cluster mode).
func (s *Server) runFleet(ctx context.Context) {
	if s.publisher != nil {
		s.publisher.Run(ctx)
	}
}

// PublishSummary writes this instance's summary to the fleet's board now
// (Run does it every fleet.Every); nil outside cluster mode.
func (s *Server) PublishSummary(ctx context.Context) error {
	if s.publisher == nil {
		return nil
	}
	return s.publisher.Publish(ctx)
}
