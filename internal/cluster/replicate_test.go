package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
)

// liveInstance is one instance's live state as fields, edited by its
// operator (edit, remove) and by its Replicator.
type liveInstance struct {
	mu sync.Mutex
	st map[string]string
	r  *cluster.Replicator
}

func (l *liveInstance) local() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.st)
}

// edit is an acknowledged edit: applied here and told to the Replicator,
// as live.Live does under its lock.
func (l *liveInstance) edit(field, value string) {
	l.mu.Lock()
	old := maps.Clone(l.st)
	if value == "" {
		delete(l.st, field)
	} else {
		l.st[field] = value
	}
	l.r.Publish(old, maps.Clone(l.st))
	l.mu.Unlock()
}

func startLive(t *testing.T, addr string) *liveInstance {
	t.Helper()
	b, _, _ := open(t, cluster.Options{Addrs: []string{addr}, OnFailure: cluster.FailClosed, Timeout: 200 * time.Millisecond})
	l := &liveInstance{st: map[string]string{}}
	l.r = b.NewReplicator(cluster.ReplicatorOptions{
		Local: l.local,
		Apply: func(_ context.Context, merge func(map[string]string) map[string]string) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.st = merge(maps.Clone(l.st))
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// converged waits until every instance holds want.
func converged(t *testing.T, want map[string]string, ls ...*liveInstance) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := true
		for _, l := range ls {
			if !maps.Equal(l.local(), want) {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for i, l := range ls {
				t.Errorf("instance %d: %v", i, l.local())
			}
			t.Fatalf("not converged on %v", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEditsConverge: edits an instance acknowledged reach every instance
// once Redis answers, whatever Redis lost meanwhile, and a removal is
// never inferred from Redis's silence.
func TestEditsConverge(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	t.Run("started while redis is down", func(t *testing.T) {
		srv := redistest.Start(t)
		addr := srv.Addr()
		srv.Stop()
		a, b := startLive(t, addr), startLive(t, addr)
		a.edit("group:general", `{"leaky_limit":10}`)
		b.edit("exemption:deny:192.0.2.7", `{"kind":"deny","value":"192.0.2.7"}`)
		srv.Restart() // empty
		converged(t, map[string]string{
			"group:general":            `{"leaky_limit":10}`,
			"exemption:deny:192.0.2.7": `{"kind":"deny","value":"192.0.2.7"}`,
		}, a, b)
	})
	t.Run("each edits while redis is down, restarted empty", func(t *testing.T) {
		srv := redistest.Start(t)
		a, b := startLive(t, srv.Addr()), startLive(t, srv.Addr())
		a.edit("exemption:deny:192.0.2.1", "d1")
		converged(t, map[string]string{"exemption:deny:192.0.2.1": "d1"}, a, b)
		srv.Stop()
		a.edit("exemption:deny:192.0.2.2", "d2")
		b.edit("exemption:deny:192.0.2.3", "d3")
		b.edit("exemption:deny:192.0.2.1", "") // a removal while down
		srv.Restart()
		converged(t, map[string]string{"exemption:deny:192.0.2.2": "d2", "exemption:deny:192.0.2.3": "d3"}, a, b)
	})
	t.Run("redis loses the shared state under load", func(t *testing.T) {
		srv := redistest.Start(t)
		ls := []*liveInstance{startLive(t, srv.Addr()), startLive(t, srv.Addr()), startLive(t, srv.Addr())}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		want := map[string]string{}
		for i := range 60 {
			l := ls[i%3]
			f := fmt.Sprintf("exemption:deny:198.51.100.%d", i%20)
			v := fmt.Sprintf("v%d", i)
			if i%7 == 3 {
				v = "" // removals too
				delete(want, f)
			} else {
				want[f] = v
			}
			l.edit(f, v)
			if i%15 == 14 {
				// Redis forgets everything (FLUSHALL), or only the records.
				if i%30 == 14 {
					rdb.FlushAll(context.Background())
				} else {
					rdb.Del(context.Background(), "ld:{cfg}:live")
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		converged(t, want, ls...)
	})
}

// TestRecordFromFarAheadRefused: a shared record stamped more than a day
// ahead of the instances' clocks (a clock set years ahead, or a record
// planted in Redis) is refused and replaced by the instances' own, so it
// cannot hold a field against every edit until then; one an hour ahead,
// within any clock skew, is taken.
func TestRecordFromFarAheadRefused(t *testing.T) {
	srv := redistest.Start(t)
	a, b := startLive(t, srv.Addr()), startLive(t, srv.Addr())
	a.edit("group:general", "limit=5")
	converged(t, map[string]string{"group:general": "limit=5"}, a, b)

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	stamp := func(ahead time.Duration) string {
		return fmt.Sprintf("%013d.%06d.%s", time.Now().Add(ahead).UnixMilli(), 0, "planted")
	}
	ctx := context.Background()
	if err := rdb.HSet(ctx, "ld:{cfg}:live", "group:general", stamp(48*time.Hour)+" slimit=1",
		"group:chunk", stamp(time.Hour)+" slimit=7").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Incr(ctx, "ld:{cfg}:ver")
	converged(t, map[string]string{"group:general": "limit=5", "group:chunk": "limit=7"}, a, b)
	// And an edit made now still wins over nothing but its own field's
	// older records.
	b.edit("group:general", "limit=6")
	converged(t, map[string]string{"group:general": "limit=6", "group:chunk": "limit=7"}, a, b)
	// The planted record itself was replaced in Redis.
	if got, _ := rdb.HGet(ctx, "ld:{cfg}:live", "group:general").Result(); strings.Contains(got, "planted") {
		t.Fatalf("the record from far ahead is still shared: %q", got)
	}
}

// TestLivePollReadsOnlyWhatMoved: instances at rest ask Redis each second
// for the live state's version and number of records, not for every
// record; a record Redis gains or loses without a version bump (written
// by hand, the hash deleted) is still read within a poll or two.
func TestLivePollReadsOnlyWhatMoved(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	srv := redistest.Start(t)
	a, b := startLive(t, srv.Addr()), startLive(t, srv.Addr())
	a.edit("group:general", "limit=5")
	converged(t, map[string]string{"group:general": "limit=5"}, a, b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	time.Sleep(1500 * time.Millisecond) // the reads after the edit
	full0, peeks0 := a.r.Reads()
	time.Sleep(3 * time.Second)
	if full, peeks := a.r.Reads(); full != full0 || peeks-peeks0 < 2 {
		t.Fatalf("at rest for 3 s: %d full reads, %d peeks; want none and a peek a second", full-full0, peeks-peeks0)
	}
	// A record written by hand, no version bump: Redis holds one more.
	stamp := fmt.Sprintf("%013d.%06d.%s", time.Now().UnixMilli(), 0, "byhand")
	if err := rdb.HSet(ctx, "ld:{cfg}:live", "group:chunk", stamp+" slimit=7").Err(); err != nil {
		t.Fatal(err)
	}
	converged(t, map[string]string{"group:general": "limit=5", "group:chunk": "limit=7"}, a, b)
	// The records deleted: given back by the instances.
	rdb.Del(ctx, "ld:{cfg}:live")
	deadline := time.Now().Add(5 * time.Second)
	for rdb.HLen(ctx, "ld:{cfg}:live").Val() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted records not given back: %v", rdb.HGetAll(ctx, "ld:{cfg}:live").Val())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
