package templates

import (
	"fmt"
	"strings"
	"time"
)

// Cluster is cluster mode's state (docs/cluster.md) as the overview says it.
type Cluster struct {
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
	// SlotsDown is how many hash slots of a Redis Cluster are decided as
	// OnFailure says while Up (their master does not answer), since
	// SlotsSince, for SlotsReason.
	SlotsDown   int
	SlotsSince  time.Time
	SlotsReason string
}

// ClusterLine is the overview's sentence on where the limits live at now
// (c nil: this instance's own), and whether that is as configured.
func ClusterLine(c *Cluster, now time.Time) (line string, up bool) {
	if c == nil {
		return `Limits are this instance's own (cluster.backend = "local").`, true
	}
	ago := now.Sub(c.Since).Round(time.Second)
	doing := map[string]string{
		"open":   "Admitting every request (on_failure = open).",
		"closed": "Answering 503 (on_failure = closed).",
	}[c.OnFailure]
	if doing == "" {
		doing = "Deciding with this instance's own state (on_failure = local)."
	}
	if c.Up && c.SlotsDown > 0 {
		return fmt.Sprintf("Limits are shared through Redis (%s), mode %s, but %d of 16384 hash slots have been unavailable for %s (%s): for the peers whose keys they hold, %s%s",
			c.Redis, c.Mode, c.SlotsDown, now.Sub(c.SlotsSince).Round(time.Second), c.SlotsReason,
			strings.ToLower(doing[:1]), doing[1:]), false
	}
	if c.Up {
		return fmt.Sprintf("Limits are shared through Redis (%s), mode %s: Redis up for %s.", c.Redis, c.Mode, ago), true
	}
	return fmt.Sprintf("Redis (%s) unavailable for %s: %s. %s", c.Redis, ago, c.Reason, doing), false
}
