// Package ticker runs work at a fixed interval for the daemon's background
// loops (the sweeper, snapshots, the peer index, the histories), each owned
// by a context that stops it.
package ticker

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends, the first time d after it starts;
// a call that overruns skips the ticks it missed. It returns when ctx
// ends, never during a call of f.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
