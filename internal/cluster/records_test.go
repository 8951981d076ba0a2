package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/livereplica"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// node is one limiterd instance as far as live edits go: its database
// (a real bbolt file), its live settings over a limiter on the cluster
// backend, and its Replicator, wired as the daemon wires them. stop ends
// its process state; start again on the same path is its restart.
type node struct {
	t    *testing.T
	path string
	db   *store.DB
	lv   *live.Live
	r    *cluster.Replicator
	logs *logBuffer
	stop func()
}

var recordsConfig = limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
	"general": group(0, 1000, 3, 600000, 3, 2, 120000, 120000),
}}

// startNode starts an instance on the database at path (created if
// absent) and the Redis at addr, stamping with now (nil: time.Now).
func startNode(t *testing.T, path, addr string, now func() time.Time) *node {
	t.Helper()
	n := &node{t: t, path: path, logs: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(n.logs, nil))
	db, err := store.Open(path, store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.Open(cluster.Options{Addrs: []string{addr}, OnFailure: cluster.FailClosed,
		Timeout: 200 * time.Millisecond, Lease: 10 * time.Second, SyncInterval: 100 * time.Millisecond,
		Logger: log, Fallback: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(b, time.Now(), recordsConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lv, err := live.New(ctx, lim, db, recordsConfig, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	r, err := livereplica.New(ctx, b, lv, db, now)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	n.db, n.lv, n.r = db, lv, r
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		b.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(n.stop)
	return n
}

// restart ends n's process state and starts it again on its database.
func (n *node) restart(addr string, now func() time.Time) *node {
	n.stop()
	return startNode(n.t, n.path, addr, now)
}

// fields is n's live state as fields.
func (n *node) fields() map[string]string { return live.EncodeFields(n.lv.State()) }

func (n *node) add(kind live.ExemptionKind, value string) {
	n.t.Helper()
	if _, err := n.lv.AddExemption(context.Background(), "test", live.Exemption{Kind: kind, Value: value}); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) remove(kind live.ExemptionKind, value string) {
	n.t.Helper()
	if err := n.lv.RemoveExemption(context.Background(), "test", live.Exemption{Kind: kind, Value: value}); err != nil {
		n.t.Fatal(err)
	}
}

// has reports whether n's live state holds the exemption.
func (n *node) has(kind live.ExemptionKind, value string) bool {
	f, _ := live.ExemptionField(live.Exemption{Kind: kind, Value: value})
	_, ok := n.fields()[f]
	return ok
}

// nodesEqual waits until every node's live state is the first's and that
// state satisfies ok.
func nodesEqual(t *testing.T, what string, ok func(map[string]string) bool, ns ...*node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		first := ns[0].fields()
		same := ok(first)
		for _, n := range ns[1:] {
			same = same && maps.Equal(n.fields(), first)
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			for i, n := range ns {
				t.Errorf("instance %d: %v\n%s", i, n.fields(), n.logs)
			}
			t.Fatalf("not converged: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dbPath(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name+".db") }

// TestRecordsSurviveRestarts: the records kept in each instance's database
// make acknowledged edits outlive a restart while Redis is down or lost its
// data (decision 221).
func TestRecordsSurviveRestarts(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	const deny, ip = live.DenyPeer, "192.0.2.7"
	// A adds a deny entry while Redis is down and restarts; Redis comes
	// up empty: the entry reaches B — also when B held the entry's
	// earlier removal, which the lowest stamp an unrecorded field gets
	// would lose to.
	t.Run("edit while down, restart, redis empty", func(t *testing.T) {
		srv := redistest.Start(t)
		a := startNode(t, dbPath(t, "a"), srv.Addr(), nil)
		b := startNode(t, dbPath(t, "b"), srv.Addr(), nil)
		b.add(deny, ip)
		nodesEqual(t, "b's deny entry", func(f map[string]string) bool { return a.has(deny, ip) }, a, b)
		b.remove(deny, ip)
		nodesEqual(t, "b's removal", func(f map[string]string) bool { return len(f) == 0 }, a, b)

		srv.Stop()
		a.add(deny, ip) // acknowledged while Redis is down
		a = a.restart(srv.Addr(), nil)
		if !a.has(deny, ip) {
			t.Fatalf("a lost its own edit at the restart: %v", a.fields())
		}
		srv.Restart() // empty
		nodesEqual(t, "a's deny entry everywhere", func(map[string]string) bool { return b.has(deny, ip) }, a, b)
		// An instance that starts afresh gets it too.
		c := startNode(t, dbPath(t, "c"), srv.Addr(), nil)
		nodesEqual(t, "a's deny entry on a new instance", func(map[string]string) bool { return c.has(deny, ip) }, a, b, c)
	})

	// A removes an exemption; C, which still holds it, was stopped
	// meanwhile; every instance restarts while Redis lost its data: the
	// exemption stays removed everywhere (decision 193's gap: no running
	// instance held the tombstone but in its database).
	t.Run("removal, every instance restarts, redis lost its data", func(t *testing.T) {
		srv := redistest.Start(t)
		a := startNode(t, dbPath(t, "a"), srv.Addr(), nil)
		b := startNode(t, dbPath(t, "b"), srv.Addr(), nil)
		c := startNode(t, dbPath(t, "c"), srv.Addr(), nil)
		a.add(live.ExemptPeer, "198.51.100.0/24")
		nodesEqual(t, "the exemption", func(map[string]string) bool { return c.has(live.ExemptPeer, "198.51.100.0/24") }, a, b, c)
		c.stop()
		a.remove(live.ExemptPeer, "198.51.100.0/24")
		nodesEqual(t, "the removal", func(f map[string]string) bool { return len(f) == 0 }, a, b)

		srv.Restart() // empty
		a = a.restart(srv.Addr(), nil)
		b = b.restart(srv.Addr(), nil)
		c = c.restart(srv.Addr(), nil)
		nodesEqual(t, "the removal everywhere", func(f map[string]string) bool { return len(f) == 0 }, a, b, c)
		// Still so once the instances had time to republish.
		time.Sleep(1500 * time.Millisecond)
		nodesEqual(t, "the removal everywhere, later", func(f map[string]string) bool { return len(f) == 0 }, a, b, c)
	})

	// A stamp made after a restart is greater than every stamp before it,
	// even with the wall clock stepped back an hour: the edit wins.
	t.Run("stamps never go back", func(t *testing.T) {
		srv := redistest.Start(t)
		clk := limitertest.NewClock(limitertest.T0)
		a := startNode(t, dbPath(t, "a"), srv.Addr(), clk.Now)
		b := startNode(t, dbPath(t, "b"), srv.Addr(), nil)
		f, _ := live.ExemptionField(live.Exemption{Kind: deny, Value: ip})
		a.add(deny, ip)
		nodesEqual(t, "the deny entry", func(map[string]string) bool { return b.has(deny, ip) }, a, b)
		before := a.r.Records()[f].Stamp

		clk.Add(-time.Hour)
		a = a.restart(srv.Addr(), clk.Now)
		a.remove(deny, ip)
		after := a.r.Records()[f]
		if !after.Removed || after.Stamp <= before {
			t.Fatalf("after the restart with the clock an hour back: %+v, want a removal stamped after %s", after, before)
		}
		nodesEqual(t, "the removal", func(f map[string]string) bool { return len(f) == 0 }, a, b)
		if got := b.r.Records()[f]; got != after {
			t.Errorf("b holds %+v, want %+v", got, after)
		}
		// And again, with Redis empty and the clock stepped back further:
		// the clock comes from the database, not from the records alone.
		srv.Restart()
		clk.Add(-time.Hour)
		a = a.restart(srv.Addr(), clk.Now)
		a.add(deny, ip)
		if again := a.r.Records()[f]; again.Removed || again.Stamp <= after.Stamp {
			t.Fatalf("second restart: %+v, want a value stamped after %s", again, after.Stamp)
		}
		nodesEqual(t, "the entry again", func(map[string]string) bool { return b.has(deny, ip) }, a, b)
	})

	// Records in the database that are not ones limiterd writes are
	// logged naming their field and left out; the start goes on and the
	// other records count.
	t.Run("bad records in the database", func(t *testing.T) {
		srv := redistest.Start(t)
		a := startNode(t, dbPath(t, "a"), srv.Addr(), nil)
		a.add(deny, ip)
		a.stop()
		bad := map[string]string{
			"bogus":                   `{"stamp":"0000000000001.000000.x","value":"v"}`,
			"group:general":           `{"stamp":"0000000000001.000000.x","value":"{\"no_such_key\":1}"}`,
			"exemption:deny_peer:1.2": `{"stamp":"0000000000001.000000.x","removed":true}`,
			"switch":                  `{"stamp":"not a stamp at all","value":"off"}`,
		}
		raw, err := bbolt.Open(a.path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = raw.Update(func(tx *bbolt.Tx) error {
			for k, v := range bad {
				if err := tx.Bucket([]byte("live_records")).Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
		raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		a = startNode(t, a.path, srv.Addr(), nil)
		f, _ := live.ExemptionField(live.Exemption{Kind: deny, Value: ip})
		recs := a.r.Records()
		if recs[f].Removed || recs[f].Stamp == "" || len(recs) != 1 {
			t.Errorf("records after the start: %v", recs)
		}
		for k := range bad {
			if !strings.Contains(a.logs.String(), "field="+k) {
				t.Errorf("the log does not name %q:\n%s", k, a.logs)
			}
		}
		b := startNode(t, dbPath(t, "b"), srv.Addr(), nil)
		nodesEqual(t, "the deny entry", func(map[string]string) bool { return b.has(deny, ip) }, a, b)
	})
}

// memRecords is a RecordStore in memory, for what a database may hold.
type memRecords struct {
	recs  map[string]cluster.Record
	clock string
}

func (m memRecords) LoadRecords(context.Context) (map[string]cluster.Record, string, error) {
	return maps.Clone(m.recs), m.clock, nil
}

func (m memRecords) SaveRecords(context.Context, map[string]cluster.Record, string) error { return nil }

// TestStampWidth: a stamp after the counter's last value moves the
// milliseconds on, so that it still sorts after the ones before; a kept
// stamp not of the fixed width is left out.
func TestStampWidth(t *testing.T) {
	srv := redistest.Start(t)
	b, _, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}})
	clk := limitertest.NewClock(limitertest.T0)
	ms := limitertest.T0.UnixMilli()
	r := b.NewReplicator(cluster.ReplicatorOptions{
		Local: func() map[string]string { return nil },
		Apply: func(context.Context, func(map[string]string) map[string]string) error { return nil },
		Now:   clk.Now,
		Records: memRecords{clock: fmt.Sprintf("%013d.999998.x", ms), recs: map[string]cluster.Record{
			"group:general": {Stamp: "12.3.x", Value: `{"leaky_limit":1}`},
		}},
	})
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if recs := r.Records(); len(recs) != 0 || !strings.Contains(logs.String(), "field=group:general") {
		t.Errorf("a stamp of another width was kept: %v\n%s", recs, logs)
	}
	var stamps []string
	for range 3 {
		rec, _ := r.Stamp("switch", "off", false)
		stamps = append(stamps, rec.Stamp)
	}
	inst := b.Instance()
	want := []string{
		fmt.Sprintf("%013d.999999.%s", ms, inst),
		fmt.Sprintf("%013d.000000.%s", ms+1, inst),
		fmt.Sprintf("%013d.000001.%s", ms+1, inst),
	}
	if !slices.Equal(stamps, want) || !slices.IsSorted(stamps) {
		t.Errorf("stamps %v, want %v", stamps, want)
	}
}
