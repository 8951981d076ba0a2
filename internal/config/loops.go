package config

import (
	"fmt"
	"time"
)

// The minimums of the durations that drive a loop (docs/config.md, "Loop
// intervals"; why each, decision 161): a smaller value is refused at
// load, and so on reload, with the key and the minimum named. None of
// these keys is live-editable.
const (
	// MinSnapshotInterval bounds snapshot.interval: each snapshot scans
	// every tracked entry (tens of ms at a million) before writing the
	// changed ones.
	MinSnapshotInterval = time.Second
	// MinSyncInterval bounds cluster.sync_interval: each local_first push
	// is a pipeline of Redis round trips.
	MinSyncInterval = 10 * time.Millisecond
	// MinRetryInterval bounds throttle.retry_interval: every waiting call
	// is evaluated again once an interval.
	MinRetryInterval = 10 * time.Millisecond
)

// atLeast checks that d, a duration > 0 read at key, is at least min.
func atLeast(p *problems, key string, d, min time.Duration) {
	if d > 0 && d < min {
		p.addErr(key, fmt.Sprintf("must be at least %s: it drives a loop (docs/config.md, \"Loop intervals\"), got %s", min, d), upgradeLoopMinimums)
	}
}
