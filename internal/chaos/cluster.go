package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// clusterLimit is general's leaky_limit in the cluster crash loop: a new
// peer gets exactly this many admissions over both instances together
// while they share Redis.
const clusterLimit = 20

// ClusterResult is what a ClusterCrashLoop found.
type ClusterResult struct {
	Rounds, RedisKills int
	// DownAnswers are the statuses the instances gave while Redis was
	// down (on_failure = "local": 200 and 429 only).
	DownAnswers map[int]int
	// Recovery is the longest time from Redis's restart until both
	// instances said limiterd_cluster_redis_up 1.
	Recovery time.Duration
	// Repeated counts the checks of shared decisions made again because
	// an instance decided without Redis during them.
	Repeated int
	Requests string
	Failures []string
}

// OK reports whether nothing failed.
func (r *ClusterResult) OK() bool { return len(r.Failures) == 0 }

// String is the report.
func (r *ClusterResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster crash loop: %d rounds (an instance killed with -9 in each, Redis killed with -9 in %d); answers %s\n",
		r.Rounds, r.RedisKills, r.Requests)
	fmt.Fprintf(&b, "while Redis was down (on_failure = \"local\"): %v\n", r.DownAnswers)
	fmt.Fprintf(&b, "back to shared decisions (exactly %d of %d for a new peer over both) at most %v after Redis restarted\n",
		clusterLimit, 2*clusterLimit, r.Recovery.Round(time.Millisecond))
	if r.Repeated > 0 {
		fmt.Fprintf(&b, "  (%d of those checks made again: Redis answered an instance later than cluster.timeout during them)\n", r.Repeated)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL %s\n", f)
	}
	return b.String()
}

// ClusterCrashLoop runs two limiterd instances in cluster mode (strict,
// on_failure = "local") on one redis-server, under load on both; each
// round kills one instance with SIGKILL at a random moment and restarts
// it (its database must open and pass tx.Check), and every other round
// kills Redis with SIGKILL too: while it is down both instances must
// answer (200 or 429: a new peer gets exactly general's limit from the
// survivor, decided locally), and once it is back a new peer must get
// exactly general's limit over both instances together (each of those
// peers a /64 of its own).
func ClusterCrashLoop(ctx context.Context, o CrashOptions) (*ClusterResult, error) {
	o.defaults()
	up, err := StartUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	red, err := StartRedis(filepath.Join(o.Dir, "redis"))
	if err != nil {
		return nil, err
	}
	defer red.Stop()
	toml := snapshotTOML(o.Interval) + "\n" + clusterTOML(red.Addr())
	var ds [2]*Daemon
	var setups [2]*Setup
	for i := range ds {
		dir := filepath.Join(o.Dir, fmt.Sprint("instance", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if setups[i], err = NewSetup(dir, up.URL, clusterLimit, 0, "", toml); err != nil {
			return nil, err
		}
		ds[i] = &Daemon{Bin: o.Bin, Config: setups[i].Config, Log: o.Log}
		if err := ds[i].Start(); err != nil {
			return nil, err
		}
		defer ds[i].Stop()
	}
	res := &ClusterResult{DownAnswers: map[int]int{}}
	fail := func(f string, a ...any) { res.Failures = append(res.Failures, fmt.Sprintf(f, a...)) }
	rng := rand.New(rand.NewPCG(o.Seed, 3))
	as := func(i int, peer string) (int, error) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + setups[i].Public + "/info")
		req.Header.Set("X-Forwarded-For", peer)
		if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
			return 0, err
		}
		return resp.StatusCode(), nil
	}
	// waitUp waits until the instances say limiterd_cluster_redis_up want.
	waitUp := func(want string, within time.Duration, instances ...int) error {
		deadline := time.Now().Add(within)
		for len(instances) > 0 {
			i := instances[0]
			m, err := Metrics(ds[i].Admin())
			if err == nil && fmt.Sprint(m["limiterd_cluster_redis_up"]) == want {
				instances = instances[1:]
				continue
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("instance %d: limiterd_cluster_redis_up is not %s after %v (%v)", i, want, within, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	// failed sums the decisions both instances made without Redis.
	failed := func() (float64, error) {
		var n float64
		for _, d := range ds {
			m, err := Metrics(d.Admin())
			if err != nil {
				return 0, err
			}
			for k, v := range m {
				if strings.HasPrefix(k, "limiterd_cluster_failure_decisions_total") {
					n += v
				}
			}
		}
		return n, nil
	}
	// shared: a new peer (a /64 of the round's and the attempt's), its
	// requests alternating between the instances,
	// gets exactly clusterLimit admissions. A check during which an
	// instance decided without Redis (it answered later than
	// cluster.timeout: a loaded machine) proves nothing and is made again
	// with another peer, up to 5 times.
	shared := func(round int) string {
		for attempt := 0; ; attempt++ {
			if err := waitUp("1", 30*time.Second, 0, 1); err != nil {
				return err.Error()
			}
			before, err := failed()
			if err != nil {
				return err.Error()
			}
			ok := 0
			for k := range 2 * clusterLimit {
				c, err := as(k%2, fmt.Sprintf("2001:db8:%x:%x::1", 0xc00+attempt, round))
				if err != nil {
					return err.Error()
				}
				if c == 200 {
					ok++
				}
			}
			after, err := failed()
			if err != nil {
				return err.Error()
			}
			if after != before && attempt < 5 {
				res.Repeated++
				continue
			}
			if ok != clusterLimit {
				return fmt.Sprintf("%d of %d admitted over both instances, want %d (%v decisions without Redis meanwhile)",
					ok, 2*clusterLimit, clusterLimit, after-before)
			}
			return ""
		}
	}
	if msg := shared(0xffff); msg != "" {
		return nil, fmt.Errorf("before the first round: %s", msg)
	}
	codes := map[string]int64{}
	for round := 1; round <= o.Rounds && ctx.Err() == nil; round++ {
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		loads := make([]*Load, 2)
		for i := range loads {
			loads[i] = &Load{Addr: setups[i].Public, Conns: 4, Rate: o.Rate / 2, Next: func(w int, n int64, req *fasthttp.Request) bool {
				req.SetRequestURI("/info")
				req.Header.Set("X-Forwarded-For", IPv4(int64((w*7919+int(n))%40)))
				return true
			}}
			wg.Go(func() { loads[i].Run(rctx) })
		}
		victim := round % 2
		upFor := o.MinUp + time.Duration(rng.Int64N(int64(o.MaxUp-o.MinUp)))
		time.Sleep(upFor)
		if err := ds[victim].Kill(); err != nil {
			stop()
			return nil, err
		}
		killRedis := round%2 == 0
		if killRedis {
			res.RedisKills++
			red.Kill()
			// The survivor answers on its own while Redis is down.
			if err := waitUp("0", 15*time.Second, 1-victim); err != nil {
				fail("round %d: %v", round, err)
			}
			// A new peer there: its limit applied on the instance's own
			// state, exactly.
			ok := 0
			for range 2 * clusterLimit {
				c, err := as(1-victim, fmt.Sprintf("2001:db8:a:%x::1", round))
				if err != nil {
					fail("round %d, Redis down: instance %d: %v", round, 1-victim, err)
					break
				}
				res.DownAnswers[c]++
				if c == 200 {
					ok++
				} else if c != 429 {
					fail("round %d, Redis down: instance %d answered %d", round, 1-victim, c)
				}
			}
			if ok != clusterLimit {
				fail("round %d, Redis down: a new peer was admitted %d times of %d by instance %d, want %d (decided locally)",
					round, ok, 2*clusterLimit, 1-victim, clusterLimit)
			}
		}
		for _, f := range CheckDB(filepath.Join(setups[victim].DataDir, "limiterd.db")) {
			fail("round %d: instance %d's database: %s", round, victim, f)
		}
		if err := ds[victim].Start(); err != nil {
			stop()
			return nil, fmt.Errorf("round %d: restart of instance %d: %w", round, victim, err)
		}
		if killRedis {
			// The restarted instance answers too, Redis still down.
			if c, err := as(victim, fmt.Sprintf("2001:db8:b:%x::1", round)); err != nil || (c != 200 && c != 429) {
				fail("round %d, Redis down: restarted instance %d answered %d %v", round, victim, c, err)
			} else {
				res.DownAnswers[c]++
			}
			if err := red.Start(); err != nil {
				stop()
				return nil, err
			}
			restarted := time.Now()
			if err := waitUp("1", 30*time.Second, 0, 1); err != nil {
				fail("round %d: %v", round, err)
			}
			res.Recovery = max(res.Recovery, time.Since(restarted))
		}
		if msg := shared(round); msg != "" {
			fail("round %d: after the restarts: %s", round, msg)
		}
		stop()
		wg.Wait()
		for _, l := range loads {
			for c, n := range l.Codes() {
				codes[fmt.Sprint(c)] += n
			}
			codes["errors"] += l.Errors()
		}
		res.Rounds = round
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  round %d: instance %d killed after %v, Redis killed: %v\n", round, victim, upFor.Round(time.Millisecond), killRedis)
		}
	}
	res.Requests = fmt.Sprint(codes)
	return res, ctx.Err()
}
