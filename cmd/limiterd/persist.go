package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/config"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/live"
	"github.com/limiterd/limiterd/store"
	"github.com/limiterd/limiterd/throttle"
	"github.com/limiterd/limiterd/ticker"
)

// The bbolt store is the live.Store of the daemon.
var _ live.Store = (*store.DB)(nil)

func dbPath(dataDir string) string { return filepath.Join(dataDir, "limiterd.db") }

// snapshotter writes the limiter's changes to the store: every interval,
// on demand and once more at shutdown. Safe for concurrent use.
type snapshotter struct {
	lim *limiter.Limiter
	th  *throttle.Throttle
	db  *store.DB
	log *slog.Logger
	now func() time.Time
	// enabled is the global switch as the live settings store it; a
	// restore keeps it over the snapshot's (nil: the snapshot's).
	enabled func() bool

	mu       sync.Mutex
	needFull bool

	lastDuration atomic.Int64 // ns
	lastWritten  atomic.Int64
	written      atomic.Uint64
	deleted      atomic.Uint64
	errors       atomic.Uint64
	taken        atomic.Uint64
	compactions  atomic.Uint64
}

// restore loads the stored state into the limiter, applying the ticks that
// fell while the daemon was down. It saves nothing: the stored snapshot
// stays valid (restoring it again applies the same ticks), and the next
// save, in the background while the daemon serves, writes every restored
// entry (Restore marks them changed). That save is incremental, not whole,
// so the entries of groups the config lacks now (a typo, a start from the
// wrong directory on the embedded defaults) stay in the store for when the
// group is back.
func (s *snapshotter) restore(ctx context.Context) error {
	snap, rep, err := s.db.LoadSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("load the snapshot: %w", err)
	}
	if rep.Skipped > 0 {
		s.log.Warn("snapshot records that did not decode were skipped", "skipped", rep.Skipped)
	}
	if ts, ok, err := s.db.LoadThrottle(ctx); err != nil {
		s.log.Warn("the outbound throttle's saved state is unreadable: starting it empty", "err", err)
	} else if ok {
		s.th.Restore(s.now(), ts)
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
	s.log.Info("restored peer state", "loaded", r.Loaded, "expired", r.Expired, "skipped", r.Skipped, "gap", r.Gap.Round(time.Millisecond), "switch_on", s.lim.Enabled())
	s.needFull = false
	return nil
}

// save writes one delta (or a full snapshot after a failure), then, when
// the store says its log has grown, folds the log into its base.
func (s *snapshotter) save(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	d := s.lim.SnapshotDelta(s.now(), s.needFull)
	st, err := s.db.SaveDelta(ctx, d)
	s.taken.Add(1)
	if err != nil {
		// The delta's entries were marked saved: the next one must be whole.
		s.needFull = true
		s.errors.Add(1)
		return fmt.Errorf("save the snapshot: %w", err)
	}
	s.needFull = false
	if err := s.db.SaveThrottle(ctx, s.th.Snapshot(s.now())); err != nil {
		s.errors.Add(1)
		return fmt.Errorf("save the throttle: %w", err)
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

// loop saves every interval until ctx ends. A save under way when it ends
// finishes (stopping waits for it): cancelled, it would count as a failed
// snapshot and make the final one a full rewrite.
func (s *snapshotter) loop(ctx context.Context, every time.Duration) {
	ticker.Every(ctx, every, func() {
		if err := s.save(context.WithoutCancel(ctx)); err != nil {
			s.log.Error("snapshot", "err", err)
		}
	})
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

// metrics sends the snapshot metrics (for web.NewCollector's extra).
func (s *snapshotter) metrics(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descSnapDuration, prometheus.GaugeValue, time.Duration(s.lastDuration.Load()).Seconds())
	ch <- prometheus.MustNewConstMetric(descSnapBytes, prometheus.GaugeValue, float64(s.db.Size()))
	ch <- prometheus.MustNewConstMetric(descSnapTaken, prometheus.CounterValue, float64(s.taken.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapErrors, prometheus.CounterValue, float64(s.errors.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapWritten, prometheus.CounterValue, float64(s.written.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapDeleted, prometheus.CounterValue, float64(s.deleted.Load()))
	ch <- prometheus.MustNewConstMetric(descSnapCompact, prometheus.CounterValue, float64(s.compactions.Load()))
}

// openDB opens <data_dir>/limiterd.db; the store's errors name the file
// and say when another process holds it.
func openDB(dataDir string, log *slog.Logger) (*store.DB, error) {
	return store.Open(dbPath(dataDir), store.Options{Timeout: time.Second, Logger: log})
}

// snapshotCmd runs `limiterd snapshot export [-o FILE]` and
// `limiterd snapshot import FILE`.
func (m *Main) snapshotCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		fmt.Fprintln(m.Stderr, "usage: limiterd snapshot export [-o FILE] | limiterd snapshot import FILE  [-config PATH] [-data-dir DIR]")
		return exitUsage
	}
	verb := args[0]
	var out string
	nargs := 0
	if verb == "import" {
		nargs = 1 // FILE, before or after the flags
	}
	src, pos, err := m.flagsAndArgs("snapshot "+verb, args[1:], nargs, func(fs *flag.FlagSet) {
		if verb == "export" {
			fs.StringVar(&out, "o", "", "write to FILE instead of standard output")
		}
	})
	var in string
	if len(pos) > 0 {
		in = pos[0]
	}
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd snapshot:", err)
		return exitUsage
	}
	if verb == "import" && in == "" {
		fmt.Fprintln(m.Stderr, "usage: limiterd snapshot import FILE")
		return exitUsage
	}
	cfg, _, err := config.Load(src)
	if err != nil {
		m.printConfigErrors(err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, nil))
	// Export only reads: a mistyped data dir must not get a new, empty
	// database, nor a backup of an older schema be migrated in place.
	db, err := store.Open(dbPath(cfg.Server.DataDir), store.Options{Timeout: time.Second, Logger: log, ReadOnly: verb == "export"})
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd snapshot:", err)
		if errors.Is(err, store.ErrNeedsMigration) {
			fmt.Fprintln(m.Stderr, "limiterd snapshot: export reads only; a limiterd serve (or import) on this data dir upgrades it first")
		}
		return exitRuntime
	}
	defer db.Close()
	if verb == "export" {
		var w io.Writer = m.Stdout
		if out != "" {
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				fmt.Fprintln(m.Stderr, "limiterd snapshot export:", err)
				return exitRuntime
			}
			defer f.Close()
			w = f
		}
		if err := db.Export(ctx, w); err != nil {
			fmt.Fprintln(m.Stderr, "limiterd snapshot export:", err)
			return exitRuntime
		}
		return exitOK
	}
	f, err := os.Open(in)
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd snapshot import:", err)
		return exitRuntime
	}
	defer f.Close()
	if err := db.Import(ctx, f); err != nil {
		fmt.Fprintf(m.Stderr, "limiterd snapshot import %s: %v\n", in, err)
		return exitRuntime
	}
	fmt.Fprintf(m.Stderr, "imported %s into %s\n", in, db.Path())
	return exitOK
}

var (
	descThrottleWaiters = prometheus.NewDesc("limiterd_throttle_waiters", "Outbound calls waiting in POST /api/v1/throttle.", nil, nil)
	descThrottleKeys    = prometheus.NewDesc("limiterd_throttle_keys", "(peer, type) keys the outbound throttle tracks.", nil, nil)
	descThrottleCalls   = prometheus.NewDesc("limiterd_throttle_calls_total", "Outbound throttle calls by outcome.", []string{"outcome"}, nil)
)

// throttleMetrics sends the outbound throttle's metrics.
func throttleMetrics(th *throttle.Throttle) func(ch chan<- prometheus.Metric) {
	return func(ch chan<- prometheus.Metric) {
		st := th.Stats()
		ch <- prometheus.MustNewConstMetric(descThrottleWaiters, prometheus.GaugeValue, float64(st.Waiters))
		ch <- prometheus.MustNewConstMetric(descThrottleKeys, prometheus.GaugeValue, float64(st.Keys))
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Admitted), "admitted")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Delayed), "delayed")
		ch <- prometheus.MustNewConstMetric(descThrottleCalls, prometheus.CounterValue, float64(st.Exempt), "exempt")
	}
}
