package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/config"
)

// TestLoopMinimums: each duration that drives a loop is refused below its
// minimum, with the key and the minimum named, and taken at it.
func TestLoopMinimums(t *testing.T) {
	for _, tc := range []struct {
		table, key, below, at string
		min                   time.Duration
		got                   func(*config.Config) time.Duration
	}{
		{"snapshot", "interval", `"1ns"`, `"1s"`, config.MinSnapshotInterval, func(c *config.Config) time.Duration { return c.Snapshot.Interval }},
		{"snapshot", "interval", `"999ms"`, `"1s"`, config.MinSnapshotInterval, func(c *config.Config) time.Duration { return c.Snapshot.Interval }},
		{"cluster", "sync_interval", `"1ns"`, `"10ms"`, config.MinSyncInterval, func(c *config.Config) time.Duration { return c.Cluster.SyncInterval }},
		{"throttle", "retry_interval", `9`, `10`, config.MinRetryInterval, func(c *config.Config) time.Duration { return c.Throttle.RetryInterval }},
	} {
		key := tc.table + "." + tc.key
		_, err := loadFile(t, "["+tc.table+"]\n"+tc.key+" = "+tc.below+"\n")
		want := "config: " + key + ": must be at least " + tc.min.String() + ": it drives a loop"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %s: %v; want %q", key, tc.below, err, want)
		}
		c, err := loadFile(t, "["+tc.table+"]\n"+tc.key+" = "+tc.at+"\n")
		if err != nil {
			t.Errorf("%s = %s: %v", key, tc.at, err)
			continue
		}
		if got := tc.got(c); got != tc.min {
			t.Errorf("%s = %s: read as %s", key, tc.at, got)
		}
	}
	// Through the environment too: the same check, the same key.
	_, err := loadFile(t, "", "LIMITERD_SNAPSHOT__INTERVAL=1ns")
	if err == nil || !strings.Contains(err.Error(), "snapshot.interval: must be at least 1s") {
		t.Errorf("LIMITERD_SNAPSHOT__INTERVAL=1ns: %v", err)
	}
}
