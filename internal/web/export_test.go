package web

import (
	"time"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter/peer"
)

// What the dashboard's benchmark (a test of package web_test) fills by
// hand, as Run would have after an hour.

// Activity returns the record of decisions the dashboard reads.
func (s *Server) Activity() *insight.Activity { return s.activity }

// HistoryTop returns the peers Run's peer history samples (historyTop).
func (s *Server) HistoryTop() []peer.Key { return s.historyTop() }

// SetFleetClock gives the reader of the fleet its own clock: the
// benchmark's pages run on a fixed clock, the reader on one that moves
// (time.Now, as in the daemon, or always a read's period later: a read
// of Redis for every page).
func (s *Server) SetFleetClock(now func() time.Time) {
	s.fleetReader = fleet.NewReader(s.opts.Fleet, s.log, now)
}

// FleetSummaryBytes is the size of the last summary this instance wrote.
func (s *Server) FleetSummaryBytes() int64 { return s.publisher.Stats().Bytes }
