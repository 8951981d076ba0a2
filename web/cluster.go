package web

import (
	"fmt"
	"time"
)

// ClusterStatus reports the state of cluster mode (SPEC §12) for the
// dashboard. Implementations must be safe for concurrent use.
type ClusterStatus interface {
	ClusterState() ClusterState
}

// ClusterState is what the overview says of cluster mode.
type ClusterState struct {
	// Mode is "strict" or "local_first"; OnFailure "open", "closed" or
	// "local".
	Mode, OnFailure string
	// Redis names the servers.
	Redis string
	// Up is true while decisions use Redis; Since is when that last
	// changed, Reason why Redis is not used.
	Up     bool
	Since  time.Time
	Reason string
}

// clusterLine is the overview's sentence on where the limits live.
func clusterLine(cs ClusterStatus, now time.Time) (line string, up bool) {
	if cs == nil {
		return `Limits are this instance's own (cluster.backend = "local").`, true
	}
	st := cs.ClusterState()
	ago := now.Sub(st.Since).Round(time.Second)
	if st.Up {
		return fmt.Sprintf("Limits are shared through Redis (%s), mode %s: Redis up for %s.", st.Redis, st.Mode, ago), true
	}
	var doing string
	switch st.OnFailure {
	case "open":
		doing = "Admitting every request (on_failure = open)."
	case "closed":
		doing = "Answering 503 (on_failure = closed)."
	default:
		doing = "Deciding with this instance's own state (on_failure = local)."
	}
	return fmt.Sprintf("Redis (%s) unavailable for %s: %s. %s", st.Redis, ago, st.Reason, doing), false
}
