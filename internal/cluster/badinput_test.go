package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestRepliesNoScriptGives: a Redis (here a fake one on loopback) that
// answers the scripts with a reply they cannot have returned — a string,
// an integer, a nil, a map, a double, a boolean, an array of the wrong
// length or of the wrong types, a verdict out of range, bytes that are not
// RESP — never panics and never admits: the decision is answered by
// on_failure, the error is counted, and the status or the log says what
// came back.
func TestRepliesNoScriptGives(t *testing.T) {
	replies := []struct{ name, raw, want string }{
		{"string", "$2\r\nhi\r\n", "unexpected reply"},
		{"integer", ":7\r\n", "unexpected reply"},
		{"nil", "$-1\r\n", "unexpected reply from redis: nil"},
		{"nil array", "*-1\r\n", "unexpected reply from redis: nil"},
		{"map", "%1\r\n+a\r\n:1\r\n", "unexpected reply"},
		{"double", ",1.5\r\n", "unexpected reply"},
		{"boolean", "#t\r\n", "unexpected reply"},
		{"empty array", "*0\r\n", "unexpected reply"},
		{"array of strings", "*1\r\n$3\r\nabc\r\n", "unexpected reply"},
		{"array of arrays of strings", "*1\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n", "unexpected reply"},
		{"an array of nine integers", "*1\r\n*9\r\n:42\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n", "unexpected reply"},
		{"not RESP", "?what\r\n", "can't parse"},
	}
	for _, mode := range []cluster.Mode{cluster.Strict, cluster.LocalFirst} {
		for _, r := range replies {
			t.Run(mode.String()+"/"+r.name, func(t *testing.T) {
				addr := fakeRedisRaw(t, r.raw)
				b, lim, logs := open(t, cluster.Options{Addrs: []string{addr}, Mode: mode, OnFailure: cluster.FailClosed})
				for range 3 {
					if d := decide(lim, "192.0.2.1"); d.Allowed || d.Reason != limiter.ReasonUnavailable {
						t.Fatalf("decision on %q: %+v", r.raw, d)
					}
				}
				g, _ := lim.GroupID("general")
				if res := lim.Reduce(time.Now(), peerOf("192.0.2.1").Key, g); res != limiter.ReduceNoop {
					t.Fatalf("reduce on %q: %v", r.raw, res)
				}
				s := b.Stats()
				said := b.Status().Reason + "\n" + logs.String()
				if s.FailClosed != 3 || !strings.Contains(said, r.want) {
					t.Fatalf("stats %+v, log:\n%s", s, logs)
				}
				t.Logf("status: %s", b.Status().Reason)
				var errs uint64
				for _, n := range s.Errors {
					errs += n
				}
				if errs == 0 {
					t.Fatalf("no error counted: %+v", s)
				}
			})
		}
	}
}

// TestSlotUncovered: a Redis Cluster one of whose hash slots no master
// serves (CLUSTER DELSLOTS; with cluster-require-full-coverage, the
// default, the whole cluster then answers CLUSTERDOWN) is a connection
// failure, not a script's: decisions go by on_failure, the status names
// CLUSTERDOWN, and once the slot is served again limits are shared again.
func TestSlotUncovered(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	nodes := redistest.StartCluster(t, 3)
	var addrs []string
	clients := map[string]*redis.Client{}
	for _, s := range nodes {
		addrs = append(addrs, s.Addr())
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer c.Close()
		clients[s.Addr()] = c
	}
	ctx := context.Background()
	anyc := clients[addrs[0]]
	b, lim, logs := open(t, cluster.Options{Addrs: addrs, OnFailure: cluster.FailClosed, Timeout: 500 * time.Millisecond})
	if d := decide(lim, "192.0.2.1"); !d.Allowed {
		t.Fatalf("%+v", d)
	} else {
		d.Release()
	}
	slot, err := anyc.ClusterKeySlot(ctx, "ld:"+cluster.TagOf("192.0.2.2", "general")+":pt").Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := ""
	shards, err := anyc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						owner = fmt.Sprintf("%s:%d", n.IP, n.Port)
					}
				}
			}
		}
	}
	if clients[owner] == nil {
		t.Fatalf("no node of the test serves slot %d: %+v", slot, shards)
	}
	for _, c := range clients {
		if err := c.Do(ctx, "CLUSTER", "DELSLOTS", slot).Err(); err != nil && !strings.Contains(err.Error(), "already unassigned") {
			t.Fatal(err)
		}
	}
	waitFor(t, "the cluster down", func() bool {
		info, _ := anyc.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:fail")
	})
	waitFor(t, "decisions by on_failure", func() bool {
		d := decide(lim, "192.0.2.2")
		d.Release()
		return d.Reason == limiter.ReasonUnavailable
	})
	// The first CLUSTERDOWN trips the key's slot alone; the breaker's
	// probe then finds the whole cluster down (decision 236).
	waitFor(t, "the backend down", func() bool { return !b.Status().Up })
	if st := b.Status(); st.Up || !strings.HasPrefix(st.Reason, "connection: ") || !strings.Contains(st.Reason, "CLUSTERDOWN") {
		t.Fatalf("status %+v, log:\n%s", st, logs)
	}
	if s := b.Stats(); s.Errors[cluster.KindScript] != 0 {
		t.Fatalf("CLUSTERDOWN counted as a script error: %+v", s)
	}
	if err := clients[owner].Do(ctx, "CLUSTER", "ADDSLOTS", slot).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "limits shared again", func() bool {
		d := decide(lim, "192.0.2.2")
		d.Release()
		return d.Reason != limiter.ReasonUnavailable && b.Status().Up
	})
}

// TestSentinelUnreachableMaster: sentinels that name a master nobody can
// reach (it stopped, with no replica to promote) leave the instance down
// with a reason naming the sentinels' master and its address, decisions by
// on_failure; nothing hangs past the timeout.
func TestSentinelUnreachableMaster(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	master := redistest.Start(t)
	sentinels := redistest.StartSentinels(t, 1, "limits", master, 1, "")
	master.Stop()
	o := cluster.Options{MasterName: "limits", SentinelAddrs: []string{sentinels[0].Addr()}, OnFailure: cluster.FailClosed,
		Timeout: 100 * time.Millisecond}
	b, lim, logs := open(t, o)
	st := b.Status()
	if st.Up || !strings.HasPrefix(st.Reason, "connection: ") || !strings.Contains(st.Reason, master.Addr()) ||
		!strings.Contains(st.Reason, "cluster.redis.sentinel.master_name") {
		t.Fatalf("status %+v, log:\n%s", st, logs)
	}
	start := time.Now()
	if d := decide(lim, "192.0.2.1"); d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("%+v", d)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a decision took %s", took)
	}
}

// TestInstanceNameBound: an instance name is at most 255 bytes (a byte
// holds its length in the packed state strings, decision 220); a longer
// one is refused at Open, naming why, before any script runs.
func TestInstanceNameBound(t *testing.T) {
	_, err := cluster.Open(cluster.Options{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second, Lease: time.Second,
		SyncInterval: time.Second, Instance: strings.Repeat("i", 256)})
	if err == nil || !strings.Contains(err.Error(), "at most 255 bytes") {
		t.Fatalf("256-byte instance name: %v", err)
	}
}
