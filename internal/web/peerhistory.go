package web

import (
	"context"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// RefreshPeerIndex rebuilds the peer index now (Run does it in the
// background, insight.PeerIndex.Run).
func (s *Server) RefreshPeerIndex() { s.peers.Refresh() }

// PeerHistory returns the server's per-peer history (fed by Run).
func (s *Server) PeerHistory() *insight.PeerHistory { return s.peerHist }

// historyTop returns the distinct peers of the top insight.PeerHistoryTop entries
// by requests and by rejections (those with any), from the peer index.
func (s *Server) historyTop() []peer.Key {
	seen := map[peer.Key]bool{}
	var out []peer.Key
	for _, order := range []string{"requests", "rejections"} {
		key, _ := insight.SortKey(order)
		for _, v := range s.peers.Query(insight.PeerQuery{Sort: order, Limit: insight.PeerHistoryTop}).Rows {
			if key(&v) > 0 && !seen[v.Peer] {
				seen[v.Peer] = true
				out = append(out, v.Peer)
			}
		}
	}
	return out
}

// SamplePeerHistory takes one sample of the peer history now (Run calls it
// every insight.PeerHistoryStep).
func (s *Server) SamplePeerHistory() {
	now := s.now()
	s.peerHist.Sample(now, s.historyTop(), func(k peer.Key) []limiter.EntryView { return s.lim.Peer(now, k) })
}

// runPeerHistory samples the peer history every insight.PeerHistoryStep until ctx
// ends.
func (s *Server) runPeerHistory(ctx context.Context) {
	ticker.Every(ctx, insight.PeerHistoryStep, s.SamplePeerHistory)
}
