package web

import (
	"context"
	"sync"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/internal/web/ui"
)

// OffenseStore keeps the record of offenders: who the limiter rejected in
// the last 24 hours, beyond the life of its entries. Run saves to it, the
// dashboard reads it. The daemon passes its database; nil keeps no
// record.
type OffenseStore interface {
	AddOffenses(ctx context.Context, now time.Time, batch []live.Offense) error
	ui.OffenseStore
}

// offensesEvery is how often the collected rejections are saved.
const offensesEvery = time.Minute

// runActivity drains the limiter's record of decisions and saves the
// rejections to the record of offenders once a minute (and once more when
// ctx ends), until ctx ends.
func (s *Server) runActivity(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.activity.Run(ctx) }()
	ticker.Every(ctx, offensesEvery, func() { s.SaveOffenses(ctx) })
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.SaveOffenses(sctx)
}

// SaveOffenses saves the rejections collected so far to the record of
// offenders now (Run does it every minute).
func (s *Server) SaveOffenses(ctx context.Context) {
	offs, dropped := s.activity.TakeOffenses()
	st := s.opts.Offenses
	if st == nil || len(offs) == 0 {
		return
	}
	batch := make([]live.Offense, 0, len(offs))
	for _, o := range offs {
		batch = append(batch, live.Offense{Peer: o.Peer, Group: o.Group, Rejections: o.Rejections, First: o.First, Last: o.Last})
	}
	if dropped > 0 {
		s.log.Warn("record of offenders: too many rejected (peer, group)s in a minute, some not recorded", "kept", len(batch), "dropped", dropped)
	}
	if err := st.AddOffenses(ctx, s.now(), batch); err != nil {
		s.log.Error("record of offenders: save", "err", err)
	}
}

// DrainActivity takes the limiter's record of decisions now (Run does it
// every 100 ms).
func (s *Server) DrainActivity() { s.activity.Drain() }

// recorder returns Options.Recorder, or one that nothing feeds.
func (s *Server) recorder() *insight.Recorder {
	if s.opts.Recorder != nil {
		return s.opts.Recorder
	}
	return insight.NewRecorder(2)
}
