package ui

import "github.com/limiterd/limiterd/internal/web/ui/templates"

// ClusterStatus reports the state of cluster mode (docs/cluster.md) for the
// overview. Implementations must be safe for concurrent use.
type ClusterStatus interface {
	ClusterState() templates.Cluster
}
