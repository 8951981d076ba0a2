// Package persist keeps the limiter's state across restarts: the
// Snapshotter restores the stored snapshot at start, saves what changed
// since the last save (deltas) every interval and at shutdown, and has the
// store fold its log into the base when it has grown.
package persist

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/prometheus/client_golang/prometheus"
)

// New returns a Snapshotter of lim's state (and opts.Throttle's) into db.
func New(lim *limiter.Limiter, db *store.DB, opts Options) *Snapshotter {
	s := &Snapshotter{lim: lim, th: opts.Throttle, db: db, log: opts.Logger, now: opts.Now, wall: opts.Wall, enabled: opts.Enabled, interval: opts.Interval}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.interval <= 0 {
		s.interval = 5 * time.Second
	}
	return s
}

// LastWritten returns how many entries the last save wrote.
func (s *Snapshotter) LastWritten() int64 { return s.lastWritten.Load() }

// Throttle is what the Snapshotter saves and restores of the outbound
// throttle (package throttle's Throttle).
type Throttle interface {
	// MarshalSnapshot returns the throttle's state as of now, as JSON.
	MarshalSnapshot(now time.Time) ([]byte, error)
	// RestoreSnapshot restores a state MarshalSnapshot wrote.
	RestoreSnapshot(now time.Time, state []byte) error
}

// Options configure a Snapshotter.
type Options struct {
	// Throttle is the outbound throttle whose state is saved with the
	// limiter's; nil saves none.
	Throttle Throttle
	// Interval is how often Run saves; at least a millisecond.
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Wall is the system's wall clock when Now is not it (the daemon's
	// monotonic clock, internal/clock): each snapshot records its reading
	// beside Now's (limiter.Snapshot.WallAt), so that a restart, on the
	// wall clock, places the saved times right after a step of it. Nil:
	// Now is the wall clock.
	Wall func() time.Time
	// Enabled is the global switch as the live settings store it: a
	// restore keeps it over the snapshot's (nil: the snapshot's).
	Enabled func() bool
}

// Snapshotter writes the limiter's changes to the store: every interval
// (Run), on demand (Save) and once more at shutdown; and restores them at
// start. It is safe for concurrent use.
type Snapshotter struct {
	lim      *limiter.Limiter
	th       Throttle
	db       *store.DB
	log      *slog.Logger
	now      func() time.Time
	wall     func() time.Time
	enabled  func() bool
	interval time.Duration

	mu       sync.Mutex
	needFull bool

	lastDuration atomic.Int64 // ns
	lastWritten  atomic.Int64
	written      atomic.Uint64
	deleted      atomic.Uint64
	errors       atomic.Uint64
	taken        atomic.Uint64
	compactions  atomic.Uint64
	// okAt and failedAt are the last save that succeeded and the last
	// that failed (unix ms, by s.now), failure why.
	okAt, failedAt atomic.Int64
	failure        atomic.Pointer[string]
}

// Status is how the snapshots fare, for the dashboard's health.
type Status struct {
	// Every is the interval of Run's saves.
	Every time.Duration
	// OK is when the last save succeeded, Failed when the last one failed
	// and Err why (zero times: none yet).
	OK, Failed time.Time
	Err        string
}

// Status returns how the snapshots fare now.
func (s *Snapshotter) Status() Status {
	st := Status{Every: s.interval}
	if ms := s.okAt.Load(); ms != 0 {
		st.OK = time.UnixMilli(ms)
	}
	if ms := s.failedAt.Load(); ms != 0 {
		st.Failed = time.UnixMilli(ms)
		if e := s.failure.Load(); e != nil {
			st.Err = *e
		}
	}
	return st
}

// noteFailure records err as the last save's failure.
func (s *Snapshotter) noteFailure(err error) {
	msg := err.Error()
	s.failure.Store(&msg)
	s.failedAt.Store(s.now().UnixMilli())
}

// Restore loads the stored state into the limiter, applying the ticks that
// fell while the daemon was down. It saves nothing: the stored snapshot
// stays valid (restoring it again applies the same ticks), and the next
// save, in the background while the daemon serves, writes every restored
// entry (Restore marks them changed). That save is incremental, not whole,
// so the entries of groups the config lacks now (a typo, a start from the
// wrong directory on the embedded defaults) stay in the store for when the
// group is back.
func (s *Snapshotter) Restore(ctx context.Context) error {
	snap, rep, err := s.db.LoadSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("load the snapshot: %w", err)
	}
	if rep.Skipped > 0 {
		s.log.Warn("snapshot records that did not decode were skipped", "skipped", rep.Skipped)
	}
	if s.th != nil {
		if ts, ok, err := s.db.LoadThrottle(ctx); err != nil {
			s.log.Warn("the outbound throttle's saved state is unreadable: starting it empty", "err", err)
		} else if ok {
			if err := s.th.RestoreSnapshot(s.now(), ts); err != nil {
				s.log.Warn("the outbound throttle's saved state does not decode: starting it empty", "err", err)
			}
		}
	}
	if snap.TakenAt == 0 {
		s.log.Info("no snapshot yet: starting with no peer state")
		s.needFull = true
		return nil
	}
	r, err := s.lim.Restore(s.now(), snap)
	if err != nil {
		return fmt.Errorf("restore the snapshot: %w", err)
	}
	if s.enabled != nil {
		// The switch as stored at its last change, not as of the snapshot.
		s.lim.SetEnabled(s.enabled())
	}
	s.log.Info("restored peer state", "loaded", r.Loaded, "expired", r.Expired, "skipped", r.Skipped, "dropped_other_algorithm", r.Dropped, "gap", r.Gap.Round(time.Millisecond), "switch_on", s.lim.Enabled())
	s.needFull = false
	return nil
}

// Save writes one delta (or a full snapshot after a failure), then, when
// the store says its log has grown, folds the log into its base.
func (s *Snapshotter) Save(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.save(ctx)
	if err != nil {
		s.noteFailure(err)
	} else {
		s.okAt.Store(s.now().UnixMilli())
	}
	return err
}

// save is Save's work; s.mu is held.
func (s *Snapshotter) save(ctx context.Context) error {
	start := time.Now()
	d := s.lim.SnapshotDelta(s.now(), s.needFull)
	if s.wall != nil {
		d.WallAt = s.wall().UnixMilli()
	}
	st, err := s.db.SaveDelta(ctx, d)
	s.taken.Add(1)
	if err != nil {
		// The delta's entries were marked saved: the next one must be whole.
		s.needFull = true
		s.errors.Add(1)
		return fmt.Errorf("save the snapshot: %w", err)
	}
	s.needFull = false
	if s.th != nil {
		state, err := s.th.MarshalSnapshot(s.now())
		if err == nil {
			err = s.db.SaveThrottle(ctx, state)
		}
		if err != nil {
			s.errors.Add(1)
			return fmt.Errorf("save the throttle: %w", err)
		}
	}
	s.lastDuration.Store(int64(time.Since(start)))
	s.lastWritten.Store(int64(st.Written))
	s.written.Add(uint64(st.Written))
	s.deleted.Add(uint64(st.Deleted))
	if st.Compact {
		// The store merges its own records: nothing of the limiter is
		// scanned or copied for it. If it fails, the next save is full,
		// which compacts too.
		cst, err := s.db.Compact(ctx)
		if err != nil {
			s.needFull = true
			s.errors.Add(1)
			return fmt.Errorf("compact the snapshot log: %w", err)
		}
		s.compactions.Add(1)
		if cst.Skipped > 0 {
			s.log.Warn("compaction dropped stored entry records that do not decode", "skipped", cst.Skipped)
		}
	}
	return nil
}

// Run saves every interval until ctx ends. A save under way when it ends
// finishes (stopping waits for it): cancelled, it would count as a failed
// snapshot and make the final one a full rewrite.
func (s *Snapshotter) Run(ctx context.Context) error {
	ticker.Every(ctx, s.interval, func() {
		if err := s.Save(context.WithoutCancel(ctx)); err != nil {
			s.log.Error("snapshot", "err", err)
		}
	})
	return nil
}

var (
	descSnapDuration = prometheus.NewDesc("limiterd_snapshot_duration_seconds", "Duration of the last snapshot written to the database.", nil, nil)
	descSnapBytes    = prometheus.NewDesc("limiterd_snapshot_database_bytes", "Size of the bbolt database file.", nil, nil)
	descSnapTaken    = prometheus.NewDesc("limiterd_snapshots_total", "Snapshots attempted.", nil, nil)
	descSnapErrors   = prometheus.NewDesc("limiterd_snapshot_errors_total", "Snapshots that failed to be written (the next one is written whole).", nil, nil)
	descSnapWritten  = prometheus.NewDesc("limiterd_snapshot_entries_written_total", "(peer, group) entries written by snapshots.", nil, nil)
	descSnapDeleted  = prometheus.NewDesc("limiterd_snapshot_entries_deleted_total", "(peer, group) entries deleted from the database by snapshots.", nil, nil)
	descSnapCompact  = prometheus.NewDesc("limiterd_snapshot_compactions_total", "Times the log of incremental snapshots was folded into the stored base.", nil, nil)
)

// Collect sends the snapshot metrics (an extra of metrics.NewCollector),
// read from plain counters at scrape time.
func (s *Snapshotter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descSnapDuration, prometheus.GaugeValue, time.Duration(s.lastDuration.Load()).Seconds())
	ch <- prometheus.MustNewConstMetric(descSnapBytes, prometheus.GaugeValue, float64(s.db.Size()))
	ch <- prometheus.MustNewConstMetric(descSnapTaken, prometheus.CounterValue, float64(s.taken.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapErrors, prometheus.CounterValue, float64(s.errors.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapWritten, prometheus.CounterValue, float64(s.written.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapDeleted, prometheus.CounterValue, float64(s.deleted.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapCompact, prometheus.CounterValue, float64(s.compactions.Load()))
}
