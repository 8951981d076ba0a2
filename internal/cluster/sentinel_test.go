package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestSentinelFailover: two instances find the master through three real
// redis-sentinel processes (with their own password) and share one limit;
// the master is stopped, the sentinels promote the replica, and
// meanwhile the instances decide as on_failure says (closed: 503, never an
// admission beyond the limit); once the replica is master they share the
// limit again. A master name the sentinels do not know is a clear error
// naming the key.
func TestSentinelFailover(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	master := redistest.Start(t)
	redistest.StartReplica(t, master)
	sentinels := redistest.StartSentinels(t, 3, "limits", master, 2, "sentinel-pw")
	var addrs []string
	for _, s := range sentinels {
		addrs = append(addrs, s.Addr())
	}
	o := cluster.Options{MasterName: "limits", SentinelAddrs: addrs, SentinelPassword: "sentinel-pw",
		OnFailure: cluster.FailClosed, Timeout: 100 * time.Millisecond}
	a, limA, _ := open(t, o)
	b, limB, _ := open(t, o)
	if !a.Status().Up || !b.Status().Up {
		t.Fatalf("%+v %+v", a.Status(), b.Status())
	}
	// general: leaky_limit 3 and concurrency 2 (open's group): one limit
	// across both instances.
	shared := func(peer string) int {
		n := 0
		for i := range 8 {
			lim := limA
			if i%2 == 1 {
				lim = limB
			}
			d := decide(lim, peer)
			if d.Allowed {
				n++
				d.Release()
			}
		}
		return n
	}
	if n := shared("192.0.2.10"); n != 3 {
		t.Fatalf("before the failover: %d admitted across two instances, want 3", n)
	}
	master.Stop()
	start := time.Now()
	sawClosed := false
	waitUp := func(bk *cluster.Backend) bool { return bk.Status().Up }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d := decide(limA, "192.0.2.11")
		if d.Reason == limiter.ReasonUnavailable {
			sawClosed = true
		}
		d.Release()
		if sawClosed && waitUp(a) && waitUp(b) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover within 30s: %+v %+v", a.Status(), b.Status())
		}
	}
	t.Logf("failover: decisions by on_failure, then shared again after %s", time.Since(start).Round(100*time.Millisecond))
	if n := shared("192.0.2.12"); n != 3 {
		t.Fatalf("after the failover: %d admitted across two instances, want 3", n)
	}

	t.Run("unknown master name", func(t *testing.T) {
		bad := o
		bad.MasterName = "nobody"
		bk, _, _ := open(t, bad)
		if st := bk.Status(); st.Up || !strings.Contains(st.Reason, "cluster.redis.sentinel.master_name") {
			t.Fatalf("%+v", st)
		}
	})
}
