package ui

import (
	"context"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// ClusterStatus reports the state of cluster mode (docs/cluster.md) for the
// overview. Implementations must be safe for concurrent use.
type ClusterStatus interface {
	ClusterState() templates.Cluster
}

// SharedStates is a ClusterStatus that also reads a peer's state as the
// instances share it in Redis (the peer page shows it). ok is false when
// Redis holds no state of the peer in the group; an error says why the
// state is not shown (a corrupt value, a mode or algorithm the reading
// does not cover, Redis unreachable).
type SharedStates interface {
	SharedEntry(ctx context.Context, k peer.Key, group string, s *limiter.GroupSettings) (v limiter.EntryView, ok bool, err error)
}
