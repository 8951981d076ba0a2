package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
)

// SoakOptions configure Soak.
type SoakOptions struct {
	Bin, Dir string
	// Duration is how long the load runs (its first tenth, at least 5 s,
	// is the warm-up the end is compared with).
	Duration time.Duration
	// Rate is the GET load's requests per second (default 1000); POST /tx
	// runs at a tenth of it.
	Rate float64
	// Interval is snapshot.interval (default 1s).
	Interval time.Duration
	// Every is the pace of the live edits, admin reductions (each one
	// Every), forced snapshots (every 10) and SIGHUP reloads (every 30);
	// default 1s.
	Every time.Duration
	// Cluster runs two instances in cluster mode (backend = "redis",
	// strict, on_failure = "local") on a redis-server of their own, the
	// load split between them and one GET in 20 from a peer never seen
	// before; Redis's keys and memory are judged besides the instances'.
	Cluster bool
	// Profiles, when set, is a directory for each instance's heap
	// profile (admin.pprof; the live heap by allocation site) at the
	// warm-up and at the end: instanceN-warm.pb.gz, instanceN-end.pb.gz,
	// for `go tool pprof -top -base WARM END`.
	Profiles string
	// Log receives the daemons' log, Progress a sample a minute.
	Log, Progress io.Writer
}

// Sample is a daemon's resources at one moment.
type Sample struct {
	At         time.Duration // since the load started
	Goroutines int64
	Heap       int64 // go_memstats_heap_inuse_bytes
	// GCGoal is go_memstats_next_gc_bytes: twice the heap live after the
	// last collection (GOGC=100), steadier than Heap, which depends on
	// when in the cycle it is read.
	GCGoal          int64
	RSS, Anon, File int64 // VmRSS, RssAnon, RssFile
	DB              int64 // limiterd_snapshot_database_bytes
	FDs             int
	Tracked         int64
	// Records is limiterd_dashboard_record_bytes summed: the memory of
	// the dashboard's bounded records, which fill over their first hour
	// by design (16 MiB of request log, 5.9 MB of peer history).
	Records            int64
	Snapshots, Compact int64
	// Cluster is the shared Redis and the daemon's calls to it, nil for
	// the local backend.
	Cluster *ClusterSample
}

// String formats the sample on one line.
func (s Sample) String() string {
	line := fmt.Sprintf("goroutines %d, heap in use %s, GC goal %s (%s net), RSS %s (anon %s, file %s; %s net), dashboard records %s, open fds %d, tracked %d, snapshots %d, compactions %d, database %s",
		s.Goroutines, MiB(s.Heap), MiB(s.GCGoal), MiB(s.NetGCGoal()), MiB(s.RSS), MiB(s.Anon), MiB(s.File), MiB(s.NetRSS()), MiB(s.Records), s.FDs, s.Tracked, s.Snapshots, s.Compact, MiB(s.DB))
	if s.Cluster != nil {
		line += "; " + s.Cluster.String()
	}
	return line
}

// NetGCGoal is the GC goal less what the dashboard's records account for
// in it: twice their bytes, the collector letting the heap grow to twice
// what is live (GOGC=100).
func (s Sample) NetGCGoal() int64 { return s.GCGoal - 2*s.Records }

// NetRSS is RSS less the same: the heap's pages follow the GC goal.
func (s Sample) NetRSS() int64 { return s.RSS - 2*s.Records }

// NetFDs is the open fds less, in cluster mode, the connections to Redis:
// the Redis client's pool keeps those it opened under load, idle
// (judgeCluster bounds them).
func (s Sample) NetFDs() int {
	if s.Cluster == nil {
		return s.FDs
	}
	return s.FDs - s.Cluster.Conns
}

// Figures are what a soak measured of one daemon.
type Figures struct {
	// IdleBefore and IdleAfter are taken with no load (before it started;
	// after it stopped and its connections closed), Warm after the
	// warm-up and End at the end, both under load.
	IdleBefore, Warm, End, IdleAfter Sample
	// MaxHeap and MaxRSS are the highest sampled under load.
	MaxHeap, MaxRSS int64
	// GoalSlope and AnonSlope are the trends (bytes an hour, least
	// squares) of the GC goal and of RssAnon over the samples after the
	// warm-up; NetGoalSlope and RecordsSlope those of NetGCGoal and of
	// the dashboard's records.
	GoalSlope, AnonSlope, NetGoalSlope, RecordsSlope float64
}

// write writes the figures' lines, each after indent.
func (f *Figures) write(b *strings.Builder, indent string) {
	fmt.Fprintf(b, "%sidle before: %v\n", indent, f.IdleBefore)
	fmt.Fprintf(b, "%swarm (%v): %v\n", indent, f.Warm.At.Round(time.Second), f.Warm)
	fmt.Fprintf(b, "%send  (%v): %v\n", indent, f.End.At.Round(time.Second), f.End)
	fmt.Fprintf(b, "%sidle after: %v\n", indent, f.IdleAfter)
	fmt.Fprintf(b, "%shighest under load: heap in use %s, RSS %s\n", indent, MiB(f.MaxHeap), MiB(f.MaxRSS))
	fmt.Fprintf(b, "%strend after the warm-up: GC goal %+.1f MiB/h (net of the dashboard's records %+.1f MiB/h; the records %+.1f MiB/h), RssAnon %+.1f MiB/h\n",
		indent, f.GoalSlope/(1<<20), f.NetGoalSlope/(1<<20), f.RecordsSlope/(1<<20), f.AnonSlope/(1<<20))
}

// SoakResult is what a Soak measured.
type SoakResult struct {
	Duration time.Duration
	// Figures are the first (in the local mode, the only) instance's.
	Figures
	// Second is the second instance's in cluster mode, nil otherwise.
	Second *Figures
	// Fresh is the number of GETs from a peer never seen before (cluster
	// mode: one in 20).
	Fresh int64
	// KeysSlope and RedisMemSlope are, in cluster mode, the trends (an
	// hour, least squares) of Redis's keys and used_memory after the
	// warm-up.
	KeysSlope, RedisMemSlope float64
	Requests, Tx             string
	Edits, Reductions        int64
	Reloads, ForcedSnaps     int64
	Failures                 []string
}

// OK reports whether nothing grew beyond noise and nothing failed.
func (r *SoakResult) OK() bool { return len(r.Failures) == 0 }

// String is the report.
func (r *SoakResult) String() string {
	var b strings.Builder
	mode := ""
	if r.Second != nil {
		mode = fmt.Sprintf(" in cluster mode (two instances on one redis-server, the load split between them, %d GETs from fresh peers)", r.Fresh)
	}
	fmt.Fprintf(&b, "soak: %v of mixed load%s; GET %s; POST /tx %s\n", r.Duration.Round(time.Second), mode, r.Requests, r.Tx)
	fmt.Fprintf(&b, "  %d live edits acknowledged, %d admin reductions, %d SIGHUP reloads, %d forced snapshots\n",
		r.Edits, r.Reductions, r.Reloads, r.ForcedSnaps)
	if r.Second == nil {
		r.Figures.write(&b, "  ")
	} else {
		b.WriteString("  instance 0 (the live edits made there):\n")
		r.Figures.write(&b, "    ")
		b.WriteString("  instance 1:\n")
		r.Second.write(&b, "    ")
		if w, e, i := r.Warm.Cluster, r.End.Cluster, r.IdleAfter.Cluster; w != nil && e != nil && i != nil {
			fmt.Fprintf(&b, "  Redis: keys %d warm, %d at the end, %d idle after; used_memory %s warm, %s at the end; trend after the warm-up: keys %+.0f/h, used_memory %+.1f MiB/h\n",
				w.Keys, e.Keys, i.Keys, MiB(w.UsedMemory), MiB(e.UsedMemory), r.KeysSlope, r.RedisMemSlope/(1<<20))
		}
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL %s\n", f)
	}
	return b.String()
}

// sample reads d's metrics and /proc.
func sample(d *Daemon, since time.Time) (Sample, error) {
	m, err := Metrics(d.Admin())
	if err != nil {
		return Sample{}, err
	}
	st, err := ReadProcStats(d.Pid())
	if err != nil {
		return Sample{}, err
	}
	return Sample{At: time.Since(since), Goroutines: int64(m["go_goroutines"]), Heap: int64(m["go_memstats_heap_inuse_bytes"]),
		GCGoal: int64(m["go_memstats_next_gc_bytes"]),
		RSS:    st.RSS, Anon: st.Anon, File: st.File, DB: int64(m["limiterd_snapshot_database_bytes"]), FDs: st.FDs, Tracked: int64(m["limiterd_tracked_entries"]),
		Snapshots: int64(m["limiterd_snapshots_total"]), Compact: int64(m["limiterd_snapshot_compactions_total"]),
		Records: int64(m[`limiterd_dashboard_record_bytes{record="request_log"}`] + m[`limiterd_dashboard_record_bytes{record="peer_history"}`]),
		Cluster: clusterCounters(m)}, nil
}

// soakDaemon is one daemon of a soak and the samples taken of it under
// load.
type soakDaemon struct {
	d       *Daemon
	s       *Setup
	fig     *Figures
	samples []Sample
	// redisPort is the shared Redis's (cluster mode), 0 for none.
	redisPort int
}

// fds reads the daemon's open fds into sm, once the driver's connection
// to the admin listener is closed (the daemon may take a moment to see
// it), and in cluster mode its connections to Redis among them.
func (sd *soakDaemon) fds(sm *Sample) error {
	time.Sleep(100 * time.Millisecond)
	st, err := ReadProcStats(sd.d.Pid())
	if err != nil {
		return err
	}
	sm.FDs = st.FDs
	if sm.Cluster != nil {
		sm.Cluster.Conns, err = connsTo(sd.d.Pid(), sd.redisPort)
	}
	return err
}

// sampleAll samples every daemon, and Redis (rdb, nil for the local
// backend) once for all.
func sampleAll(ctx context.Context, ds []*soakDaemon, rdb *redis.Client, since time.Time) ([]Sample, error) {
	out := make([]Sample, len(ds))
	for i, sd := range ds {
		var err error
		if out[i], err = sample(sd.d, since); err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		if c := out[i].Cluster; c != nil && sd.redisPort != 0 {
			if c.Conns, err = connsTo(sd.d.Pid(), sd.redisPort); err != nil {
				return nil, fmt.Errorf("instance %d: %w", i, err)
			}
		}
	}
	if rdb != nil {
		keys, mem, err := redisFigures(ctx, rdb)
		if err != nil {
			return nil, err
		}
		for i, s := range out {
			if s.Cluster == nil {
				return nil, fmt.Errorf("instance %d exports no limiterd_cluster_redis_up: not in cluster mode", i)
			}
			s.Cluster.Keys, s.Cluster.UsedMemory = keys, mem
		}
	}
	return out, nil
}

// Soak runs limiterd under steady mixed load for Duration: GETs of 3000
// peers of general (admitted, then rejected until general's 5 s leaky
// tick: 10 a peer), POST /tx answered 200 (a reduction each), admin reductions, live
// edits, forced snapshots besides the periodic ones (and the compactions
// they bring), SIGHUP reloads. It compares goroutines and open fds idle
// before and after, heap and RSS after the warm-up and at the end; in
// cluster mode (o.Cluster), for each of two instances sharing a
// redis-server, and Redis's keys and memory too.
func Soak(ctx context.Context, o SoakOptions) (*SoakResult, error) {
	orDefault(&o.Rate, 1000)
	orDefault(&o.Interval, time.Second)
	orDefault(&o.Every, time.Second)
	up, err := StartUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	toml, dirs := snapshotTOML(o.Interval), []string{o.Dir}
	var rdb *redis.Client
	var redisPort int
	if o.Cluster {
		red, err := StartRedis(filepath.Join(o.Dir, "redis"))
		if err != nil {
			return nil, err
		}
		defer red.Stop()
		redisPort = red.Port
		rdb = redis.NewClient(&redis.Options{Addr: red.Addr(), MaxRetries: -1})
		defer rdb.Close()
		toml += "\n" + clusterTOML(red.Addr())
		dirs = []string{filepath.Join(o.Dir, "instance0"), filepath.Join(o.Dir, "instance1")}
	}
	ds := make([]*soakDaemon, len(dirs))
	for i, dir := range dirs {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		s, err := NewSetup(dir, up.URL, 10, 5*time.Second, "", toml)
		if err != nil {
			return nil, err
		}
		d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
		if o.Profiles != "" {
			d.Env = ProfilingEnv
		}
		if err := d.Start(); err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		defer d.Stop()
		ds[i] = &soakDaemon{d: d, s: s, fig: &Figures{}, redisPort: redisPort}
	}
	res := &SoakResult{}
	ds[0].fig = &res.Figures
	if len(ds) > 1 {
		res.Second = ds[1].fig
	}
	fail := func(f string, a ...any) { res.Failures = append(res.Failures, fmt.Sprintf(f, a...)) }
	time.Sleep(time.Second)
	start := time.Now()
	idle, err := sampleAll(ctx, ds, rdb, start)
	if err != nil {
		return nil, err
	}
	apiClient.CloseIdleConnections()
	for i, sd := range ds {
		sd.fig.IdleBefore = idle[i]
		if err := sd.fds(&sd.fig.IdleBefore); err != nil {
			return nil, err
		}
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	// Four requests in five come from 200 hot peers (over general's 10
	// per 5 s: rejected half the time), the rest from 3000 others; in
	// cluster mode, one in 20 of those GETs from a peer never seen before
	// instead (freshPeers on), so that Redis keys that did not expire
	// would pile up.
	peer := func(w int, n int64) string {
		i := int64(w*1_000_003) + n*7919
		if n%5 != 0 {
			return IPv4(i % 200)
		}
		return IPv4(i % 3000)
	}
	var fresh atomic.Int64
	// The load is split evenly between the instances: the GETs over 8
	// connections in all, POST /tx over 2, each instance's senders
	// numbered on from the previous one's (the same peers on both).
	var gets, txs []*Load
	for j, sd := range ds {
		gets = append(gets, &Load{Addr: sd.s.Public, Conns: 8 / len(ds), Rate: o.Rate / float64(len(ds)), Next: func(w int, n int64, req *fasthttp.Request) bool {
			req.SetRequestURI("/info")
			p := peer(w+8*j, n)
			if o.Cluster && n%20 == 0 {
				p = IPv4(freshPeers + fresh.Add(1))
			}
			req.Header.Set("X-Forwarded-For", p)
			return true
		}})
		txs = append(txs, &Load{Addr: sd.s.Public, Conns: 2 / len(ds), Rate: o.Rate / 10 / float64(len(ds)), Next: func(w int, n int64, req *fasthttp.Request) bool {
			req.Header.SetMethod("POST")
			req.SetRequestURI("/tx")
			req.Header.Set("X-Forwarded-For", peer(w+5+8*j, n))
			req.SetBodyString(`{"id":"chaos"}`)
			return true
		}})
	}
	for _, l := range append(gets[:len(gets):len(gets)], txs...) {
		wg.Go(func() { l.Run(lctx) })
	}
	var edits, reductions, reloads, snaps atomic.Int64
	model := NewEdits(uint64(start.UnixNano()))
	// The live edits go to the first instance (in cluster mode Redis
	// carries them to the second, checked at the end); the reductions and
	// forced snapshots alternate between the instances; each reload is
	// of all.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 6))
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
			if err := model.One(ds[0].d.Admin()); err != nil {
				fail("live edit: %v", err)
			}
			edits.Store(int64(model.Acked()))
			p := IPv4(rng.Int64N(3000))
			if code, v, err := API(ds[i%len(ds)].d.Admin(), "POST", "/api/v1/peers/"+p+"/reduce?group=general", ""); err == nil && (code == 200 || code == 404) {
				reductions.Add(1)
			} else if lctx.Err() == nil {
				fail("reduce %s: %d %v %v", p, code, v, err)
			}
			if i%10 == 0 {
				if code, v, err := API(ds[i/10%len(ds)].d.Admin(), "POST", "/api/v1/snapshot", ""); err == nil && code == 200 {
					snaps.Add(1)
				} else if lctx.Err() == nil {
					fail("POST /api/v1/snapshot: %d %v %v", code, v, err)
				}
			}
			if i%30 == 0 {
				for _, sd := range ds {
					if err := sd.d.Signal(syscall.SIGHUP); err != nil {
						fail("SIGHUP: %v", err)
					} else {
						reloads.Add(1)
					}
				}
			}
		}
	})
	warmup := max(5*time.Second, o.Duration/10)
	saveProfile := func(i int, when string) {
		if o.Profiles == "" {
			return
		}
		if err := SaveHeapProfile(ds[i].d.Admin(), filepath.Join(o.Profiles, fmt.Sprintf("instance%d-%s.pb.gz", i, when))); err != nil {
			fail("instance %d: %s heap profile: %v", i, when, err)
		}
	}
	tick := time.NewTicker(max(time.Second, min(10*time.Second, o.Duration/20)))
	defer tick.Stop()
	lastProgress := time.Now()
	for time.Since(start) < o.Duration && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		sms, err := sampleAll(ctx, ds, rdb, start)
		if err != nil {
			fail("sample at %v: %v", time.Since(start).Round(time.Second), err)
			continue
		}
		progress := o.Progress != nil && time.Since(lastProgress) >= time.Minute
		if progress {
			lastProgress = time.Now()
		}
		for i, sd := range ds {
			sm := sms[i]
			sd.samples = append(sd.samples, sm)
			sd.fig.MaxHeap, sd.fig.MaxRSS = max(sd.fig.MaxHeap, sm.Heap), max(sd.fig.MaxRSS, sm.RSS)
			if sd.fig.Warm.At == 0 && sm.At >= warmup {
				sd.fig.Warm = sm
				saveProfile(i, "warm")
			}
			if progress {
				who := ""
				if len(ds) > 1 {
					who = fmt.Sprintf(" instance %d:", i)
				}
				fmt.Fprintf(o.Progress, "  %v:%s %v\n", sm.At.Round(time.Second), who, sm)
			}
		}
	}
	for i, sd := range ds {
		sd.fig.trends(sd.samples, warmup)
		if sd.fig.Warm.At != 0 {
			saveProfile(i, "end") // still under load, as the end sample
		}
	}
	if o.Cluster {
		var warm []Sample
		for _, sm := range ds[0].samples {
			if sm.At >= warmup {
				warm = append(warm, sm)
			}
		}
		res.KeysSlope = slope(warm, func(s Sample) int64 { return s.Cluster.Keys })
		res.RedisMemSlope = slope(warm, func(s Sample) int64 { return s.Cluster.UsedMemory })
	}
	stop()
	wg.Wait()
	res.Duration = time.Since(start)
	res.Requests, res.Tx, res.Fresh = codesString(gets), codesString(txs), fresh.Load()
	res.Edits, res.Reductions, res.Reloads, res.ForcedSnaps = edits.Load(), reductions.Load(), reloads.Load(), snaps.Load()
	if err := waitIdle(ctx, ds, rdb, start); err != nil {
		return nil, err
	}
	for i, sd := range ds {
		who := ""
		if len(ds) > 1 {
			who = fmt.Sprintf("instance %d: ", i)
		}
		sd.fig.judge(func(f string, a ...any) { fail(who+f, a...) }, warmup)
		if len(ds) > 1 {
			judgeCluster(func(f string, a ...any) { fail(who+f, a...) }, sd.fig)
		}
		// Every edit acknowledged is held, and in cluster mode by the
		// other instance too: the Replicator polls every second.
		var lost []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if lost, err = model.Verify(sd.d.Admin()); err != nil || len(lost) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fail("%sreading the live edits back: %v", who, err)
		} else if len(lost) > 0 {
			fail("%s%d acknowledged live edits missing 10 s after the load, such as %s", who, len(lost), lost[0])
		}
	}
	if len(ds) > 1 && res.Warm.At != 0 {
		judgeRedis(fail, res.Warm.Cluster, res.End.Cluster, res.IdleAfter.Cluster)
	}
	for _, l := range gets {
		for c, n := range l.Codes() {
			if c != 200 && c != 429 {
				fail("GET answered %d ×%d", c, n)
			}
		}
	}
	for _, l := range txs {
		for c, n := range l.Codes() {
			if c != 200 && c != 429 {
				fail("POST /tx answered %d ×%d", c, n)
			}
		}
	}
	if n := loadErrors(gets) + loadErrors(txs); n > 0 {
		fail("%d requests got no answer", n)
	}
	return res, nil
}
