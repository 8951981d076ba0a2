package chaos

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// trends sets End (the last sample) and the trends over the samples
// taken after the warm-up.
func (f *Figures) trends(samples []Sample, warmup time.Duration) {
	if len(samples) > 0 {
		f.End = samples[len(samples)-1]
	}
	var warm []Sample
	for _, sm := range samples {
		if sm.At >= warmup {
			warm = append(warm, sm)
		}
	}
	f.GoalSlope = slope(warm, func(s Sample) int64 { return s.GCGoal })
	f.AnonSlope = slope(warm, func(s Sample) int64 { return s.Anon })
	f.NetGoalSlope = slope(warm, Sample.NetGCGoal)
	f.RecordsSlope = slope(warm, func(s Sample) int64 { return s.Records })
}

// judge calls fail for what grew beyond noise.
func (f *Figures) judge(fail func(string, ...any), warmup time.Duration) {
	// Noise: a few goroutines and fds (a reload's, a snapshot's in
	// flight); memory: half again what the warm daemon held, or 16 MiB
	// (the GC goal) and 32 MiB (RSS) more, whichever is more.
	if g := f.IdleAfter.Goroutines - f.IdleBefore.Goroutines; g > idleNoise {
		fail("goroutines idle: %d before the load, %d after it", f.IdleBefore.Goroutines, f.IdleAfter.Goroutines)
	}
	if n := f.IdleAfter.NetFDs() - f.IdleBefore.NetFDs(); n > idleNoise {
		fail("open fds idle (less the connections to Redis): %d before the load, %d after it", f.IdleBefore.NetFDs(), f.IdleAfter.NetFDs())
	}
	if f.Warm.At == 0 {
		fail("the soak ended before its warm-up (%v)", warmup)
		return
	}
	// Not the heap in use: it swings between the live heap and twice
	// it with the collector's cycle (14.7 to 36.8 MiB over a soak whose
	// live heap stayed at 15 MiB), so its end says when the sample
	// fell, not what grew. And net of the dashboard's records, which
	// grow by design for their first hour (up to 22 MiB, twice that in
	// the GC goal): what they hold is read from the daemon, and their
	// bound is asserted by their own tests.
	if w, e := f.Warm.NetGCGoal(), f.End.NetGCGoal(); e > max(w*3/2, w+16<<20) {
		fail("the GC goal net of the dashboard's records grew from %s (warm) to %s (end)", MiB(w), MiB(e))
	}
	if w, e := f.Warm.NetRSS(), f.End.NetRSS(); e > max(w*3/2, w+32<<20) {
		fail("RSS net of the dashboard's records grew from %s (warm) to %s (end)", MiB(w), MiB(e))
	}
	if r := f.End.Records; r > insightRecordsMax {
		fail("the dashboard's records hold %s, over their bound %s", MiB(r), MiB(insightRecordsMax))
	}
	if g := f.End.Goroutines - f.Warm.Goroutines; g > 20 {
		fail("goroutines under load: %d warm, %d at the end", f.Warm.Goroutines, f.End.Goroutines)
	}
}

// waitIdle waits, once the load stopped and its connections closed
// (Load.Run closes its idle ones), until every daemon holds no more
// goroutines (noise aside) and fds than it did idle before the load and
// Redis (rdb, nil for the local backend) no more keys than its shared
// state, or idleWait passed; the samples then are the IdleAfter ones.
func waitIdle(ctx context.Context, ds []*soakDaemon, rdb *redis.Client, since time.Time) error {
	apiClient.CloseIdleConnections() // the driver's own keep-alives to the admin listeners
	for deadline := time.Now().Add(idleWait); ; time.Sleep(200 * time.Millisecond) {
		sms, err := sampleAll(ctx, ds, rdb, since)
		if err != nil {
			return err
		}
		apiClient.CloseIdleConnections()
		idle := true
		for i, sd := range ds {
			if err := sd.fds(&sms[i]); err != nil {
				return err
			}
			b := sd.fig.IdleBefore
			idle = idle && sms[i].Goroutines <= b.Goroutines+idleNoise && sms[i].NetFDs() <= b.NetFDs()
			// The client's pool may hold a connection over its size for a
			// moment (a dial to keep MinIdleConns racing a command's): a
			// leak stays, a moment's overshoot does not.
			if c := sms[i].Cluster; c != nil && (c.Keys > idleRedisKeys || c.Conns > redisConnsMax) {
				idle = false
			}
		}
		if idle || time.Now().After(deadline) {
			for i, sd := range ds {
				sd.fig.IdleAfter = sms[i]
			}
			return nil
		}
	}
}

// loadErrors sums the loads' requests that got no answer.
func loadErrors(ls []*Load) int64 {
	var n int64
	for _, l := range ls {
		n += l.Errors()
	}
	return n
}

// insightRecordsMax is the most limiterd_dashboard_record_bytes may sum
// to: the request log full and PeerHistoryMax peers of 5 872 bytes, with
// their baselines (a few dozen bytes a group).
const insightRecordsMax = 1<<24 + 6_000_000

// idleNoise is the goroutines and fds an idle daemon may hold more after
// the load than before it (a reload's, a snapshot's in flight).
const idleNoise = 5

// idleWait bounds the wait for the daemons to be idle again once the
// load stopped: the pool of connections to the node drops its idle ones
// after 10 s, Redis the keys of the last slots after the lease and a
// second (11 s).
var idleWait = 20 * time.Second

// slope is the least-squares trend of f over the samples, in bytes an
// hour (0 for fewer than 3 samples).
func slope(ss []Sample, f func(Sample) int64) float64 {
	if len(ss) < 3 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := s.At.Hours(), float64(f(s))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(ss))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
