package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/store"
)

// auditBound applies admin.audit_max_entries to the database: it sets the
// bound (each new entry then removes a few of the oldest beyond it) and
// removes the whole backlog in the background, at start and after a reload
// that lowered the bound, so that neither waits for it.
type auditBound struct {
	db   *store.DB
	log  *slog.Logger
	kick chan int
}

func newAuditBound(db *store.DB, log *slog.Logger) *auditBound {
	return &auditBound{db: db, log: log, kick: make(chan int, 1)}
}

// set applies the bound n (0: keep every entry) and asks run to remove
// the backlog.
func (a *auditBound) set(n int) {
	a.db.SetAuditMax(n)
	select {
	case <-a.kick: // a pass not started yet: this one replaces it
	default:
	}
	a.kick <- n
}

// run removes the entries beyond the bound each time set asks, until ctx
// ends.
func (a *auditBound) run(ctx context.Context) {
	for {
		var n int
		select {
		case <-ctx.Done():
			return
		case n = <-a.kick:
		}
		removed, err := a.db.PruneAudit(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn("audit log: removing the entries beyond admin.audit_max_entries failed; the next edit tries again", "max_entries", n, "removed", removed, "err", err)
		case removed > 0:
			a.log.Info("audit log: oldest entries removed to keep admin.audit_max_entries", "max_entries", n, "removed", removed)
		}
	}
}

var descAuditPruned = prometheus.NewDesc("limiterd_audit_pruned_total",
	"Audit entries removed, oldest first, to keep the audit log within admin.audit_max_entries (since the start).", nil, nil)

// collect sends limiterd_audit_pruned_total (an extra of
// metrics.NewCollector).
func (a *auditBound) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descAuditPruned, prometheus.CounterValue, float64(a.db.AuditPruned()))
}
