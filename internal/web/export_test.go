package web

import (
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter/peer"
)

// What the dashboard's benchmark (a test of package web_test) fills by
// hand, as Run would have after an hour.

// Activity returns the record of decisions the dashboard reads.
func (s *Server) Activity() *insight.Activity { return s.activity }

// HistoryTop returns the peers Run's peer history samples (historyTop).
func (s *Server) HistoryTop() []peer.Key { return s.historyTop() }
