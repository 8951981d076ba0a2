package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.etcd.io/bbolt"
)

// CrashOptions configure CrashLoop.
type CrashOptions struct {
	Bin, Dir string
	Rounds   int
	// Interval is snapshot.interval (default 1s).
	Interval time.Duration
	// MinUp and MaxUp bound the random time a round runs before its kill
	// (default 1s to 4s).
	MinUp, MaxUp time.Duration
	// Rate is the load's requests per second (default 2000).
	Rate float64
	Seed uint64
	// Log receives the daemon's log, Progress a line a round.
	Log, Progress io.Writer
}

func (o *CrashOptions) defaults() {
	orDefault(&o.Interval, time.Second)
	orDefault(&o.MinUp, time.Second)
	if o.MaxUp <= o.MinUp {
		o.MaxUp = o.MinUp + 3*time.Second
	}
	orDefault(&o.Rate, 2000)
	orDefault(&o.Seed, uint64(time.Now().UnixNano()))
}

// CrashResult is what a CrashLoop found.
type CrashResult struct {
	Rounds   int
	Acked    int           // edits the admin API acknowledged
	Lost     []string      // acknowledged edits missing after a restart
	Corrupt  []string      // tx.Check's findings, or a database that would not open
	Stale    []string      // rounds whose restored peer state was older than the last snapshot committed before the kill
	MaxLag   time.Duration // the most state lost by a kill (the probe's view)
	Interval time.Duration // snapshot.interval
	// Checked counts the kills whose round had a snapshot committed
	// before them (those where a lost snapshot would show).
	Checked int
	// OverInterval lists the kills that lost more than one interval of
	// the probe's state (the snapshot under way when the kill came had
	// taken longer than the rest of the interval to commit).
	OverInterval []string
	Requests     string
	ProbeBefore  []int64 // the probe's acknowledged requests before each kill
	ProbeAfter   []int64 // and what its restored entry counted
}

// OK reports whether nothing was lost, corrupt or stale.
func (r *CrashResult) OK() bool { return len(r.Lost)+len(r.Corrupt)+len(r.Stale) == 0 }

// String is the report.
func (r *CrashResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crash loop: %d rounds of kill -9 under load; answers %s\n", r.Rounds, r.Requests)
	fmt.Fprintf(&b, "acknowledged edits: %d, lost: %d\n", r.Acked, len(r.Lost))
	fmt.Fprintf(&b, "database: opened and passed tx.Check after every kill: %v\n", len(r.Corrupt) == 0)
	fmt.Fprintf(&b, "peer state: every kill kept the last snapshot committed before it: %v (%d kills came after a snapshot of their round); state lost at most %v (snapshot.interval %v)\n",
		len(r.Stale) == 0, r.Checked, r.MaxLag.Round(time.Millisecond), r.Interval)
	for _, o := range r.OverInterval {
		fmt.Fprintf(&b, "  over one interval: %s\n", o)
	}
	fmt.Fprintf(&b, "probe requests acknowledged before each kill / restored: %v / %v\n", r.ProbeBefore, r.ProbeAfter)
	for _, l := range [][]string{r.Lost, r.Corrupt, r.Stale} {
		for _, s := range l {
			fmt.Fprintf(&b, "  FAIL %s\n", s)
		}
	}
	return b.String()
}

// probePeer is the peer whose restored state CrashLoop measures.
const probePeer = "203.0.113.77"

// CheckDB opens the bbolt file read-only and runs tx.Check on it.
func CheckDB(path string) []string {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return []string{fmt.Sprintf("open %s: %v", path, err)}
	}
	defer db.Close()
	var found []string
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			found = append(found, err.Error())
		}
		return nil
	})
	if err != nil {
		found = append(found, err.Error())
	}
	return found
}

// CrashLoop runs Rounds rounds: limiterd under load (a pool of peers
// hitting general, a probe peer at a steady pace) with live edits made
// all the while, killed with SIGKILL at a random moment; then it checks
// the database file (tx.Check), restarts, and checks every acknowledged
// edit and the probe's restored count against what it had acknowledged
// before the kill.
func CrashLoop(ctx context.Context, o CrashOptions) (*CrashResult, error) {
	o.defaults()
	up, err := StartUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	s, err := NewSetup(o.Dir, up.URL, 50, 0, "", snapshotTOML(o.Interval))
	if err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	rng := rand.New(rand.NewPCG(o.Seed, 2))
	edits := NewEdits(o.Seed)
	res := &CrashResult{Interval: o.Interval}
	codes := map[string]int64{}
	var probed int64 // the probe's requests its entry counts at a round's start
	var prev *kill
	for round := 1; round <= o.Rounds+1; round++ {
		if err := d.Start(); err != nil {
			return nil, fmt.Errorf("start of round %d: %w", round, err)
		}
		if prev != nil {
			lost, err := edits.Verify(d.Admin())
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", round, err)
			}
			for _, l := range lost {
				res.Lost = append(res.Lost, fmt.Sprintf("after kill %d: %s", round-1, l))
			}
			e, found, err := Peer(d.Admin(), probePeer, "general")
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", round, err)
			}
			var restored int64
			if found {
				restored = num(e, "requests")
			}
			res.ProbeAfter = append(res.ProbeAfter, restored)
			if prev.durable.After(time.Time{}) {
				res.Checked++
			}
			msg, lag := prev.check(restored)
			if msg != "" {
				res.Stale = append(res.Stale, fmt.Sprintf("after kill %d: %s", round-1, msg))
			}
			res.MaxLag = max(res.MaxLag, lag)
			if lag > o.Interval {
				res.OverInterval = append(res.OverInterval, fmt.Sprintf("kill %d lost %v", round-1, lag.Round(time.Millisecond)))
			}
			probed = restored
		}
		if round > o.Rounds || ctx.Err() != nil {
			break
		}
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		// The load: 40 peers of general (limit 50, the same peers every
		// round): admitted, then rejected, restored rejected.
		l := &Load{Addr: s.Public, Conns: 8, Rate: o.Rate, Next: func(w int, n int64, req *fasthttp.Request) bool {
			req.SetRequestURI("/info")
			req.Header.Set("X-Forwarded-For", IPv4(int64((w*7919+int(n))%40)))
			return true
		}}
		wg.Go(func() { l.Run(rctx) })
		// The probe: one request at a time, each acknowledged at a time.
		var acks []time.Time
		var pmu sync.Mutex
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for rctx.Err() == nil {
				req.Reset()
				req.SetRequestURI("http://" + s.Public + "/info")
				req.Header.Set("X-Forwarded-For", probePeer)
				if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
					return // killed
				}
				pmu.Lock()
				acks = append(acks, time.Now())
				pmu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
		// The snapshots: limiterd_snapshots_total counts a save once its
		// transaction committed, and the save read the state when it
		// started, limiterd_snapshot_duration_seconds before it ended. So
		// when a poll finds the count grown, every request answered before
		// the previous poll began, less that duration, is durable.
		var durable time.Time
		wg.Go(func() {
			var prevPoll time.Time
			prevCount, prevErrs := -1.0, 0.0
			for rctx.Err() == nil {
				t := time.Now()
				m, err := Metrics(d.Admin())
				if err != nil {
					return // killed
				}
				c, e := m["limiterd_snapshots_total"], m["limiterd_snapshot_errors_total"]
				if prevCount >= 0 && c > prevCount && e == prevErrs {
					dur := time.Duration(m["limiterd_snapshot_duration_seconds"] * float64(time.Second))
					pmu.Lock()
					durable = prevPoll.Add(-dur)
					pmu.Unlock()
				}
				prevPoll, prevCount, prevErrs = t, c, e
				time.Sleep(50 * time.Millisecond)
			}
		})
		// The edits, one every 20 ms.
		editErr := make(chan error, 1)
		wg.Go(func() {
			for rctx.Err() == nil {
				if err := edits.One(d.Admin()); err != nil {
					editErr <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		up := o.MinUp + time.Duration(rng.Int64N(int64(o.MaxUp-o.MinUp)))
		select {
		case <-time.After(up):
		case err := <-editErr:
			stop()
			wg.Wait()
			d.Kill()
			return nil, fmt.Errorf("round %d: %w", round, err)
		case <-ctx.Done():
		}
		killed := time.Now()
		if err := d.Kill(); err != nil {
			stop()
			return nil, err
		}
		stop()
		wg.Wait()
		for c, n := range l.Codes() {
			codes[fmt.Sprint(c)] += n
		}
		codes["errors"] += l.Errors()
		pmu.Lock()
		prev = &kill{at: killed, base: probed, acks: acks, durable: durable}
		res.ProbeBefore = append(res.ProbeBefore, probed+int64(len(acks)))
		pmu.Unlock()
		for _, f := range CheckDB(filepath.Join(s.DataDir, "limiterd.db")) {
			res.Corrupt = append(res.Corrupt, fmt.Sprintf("round %d: %s", round, f))
		}
		res.Rounds = round
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  round %d: killed after %v, %d edits acknowledged so far\n", round, up.Round(time.Millisecond), edits.Acked())
		}
	}
	defer d.Stop()
	res.Acked = edits.Acked()
	res.Requests = fmt.Sprint(codes)
	return res, nil
}

// kill is what a round knew when it killed the daemon: when, the probe's
// count at the round's start, the times its requests were answered, and
// the time before which they were all in a committed snapshot.
type kill struct {
	at      time.Time
	base    int64
	acks    []time.Time
	durable time.Time
}

// check compares the probe's restored count with the kill: it returns a
// violation (a committed snapshot lost), and the state lost (the time
// between the first answered request the restored entry does not count
// and the kill).
func (k *kill) check(restored int64) (string, time.Duration) {
	n := k.base + int64(len(k.acks))
	need := k.base
	for _, t := range k.acks {
		if t.Before(k.durable) {
			need++
		}
	}
	switch {
	case restored >= n:
		return "", 0 // nothing lost (one more: the request in flight at the kill)
	case restored < k.base:
		return fmt.Sprintf("the probe's restored entry counts %d, below the %d of the round's start", restored, k.base), 0
	}
	lag := k.at.Sub(k.acks[restored-k.base])
	if restored < need {
		return fmt.Sprintf("the probe's restored entry counts %d of %d requests, %d of them in a snapshot committed before the kill: the state of %v before the kill",
			restored, n, need, lag.Round(time.Millisecond)), lag
	}
	return "", lag
}
