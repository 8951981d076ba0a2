package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestRedisClusterSlotBreaker: one master of three stops for good (no
// replica, and a cluster that serves its other slots meanwhile). The
// peers whose keys the other masters serve stay shared — one limit across
// two instances, never decided by on_failure — while the stopped master's
// peers are answered as on_failure says, at once; the backend stays up,
// its slots are counted down; the master back, its peers are shared
// again.
func TestRedisClusterSlotBreaker(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	c := redistest.StartPartialCluster(t)
	addrs := c.Addrs()
	o := cluster.Options{Addrs: addrs, OnFailure: cluster.FailClosed, Timeout: time.Second}
	a, limA, logA := open(t, o)
	b, limB, logB := open(t, o)
	defer func() {
		if t.Failed() {
			t.Logf("instance a:\n%s\ninstance b:\n%s", logA, logB)
		}
	}()
	key := func(peer string) string { return "ld:" + cluster.TagOf(peer, "general") + ":pt" }
	victim := c.MasterOf(key("192.0.2.1"))
	var onVictim, elsewhere []string
	for i := 0; len(onVictim) < 4 || len(elsewhere) < 8; i++ {
		p := fmt.Sprintf("198.51.100.%d", i)
		if c.MasterOf(key(p)) == victim {
			onVictim = append(onVictim, p)
		} else {
			elsewhere = append(elsewhere, p)
		}
	}
	// shared decides 8 requests of peer across both instances (general:
	// leaky_limit 3 and concurrency 2, released at once) and returns how
	// many were admitted, and how many answered unavailable.
	shared := func(peer string) (admitted, unavailable int) {
		for i := range 8 {
			lim := limA
			if i%2 == 1 {
				lim = limB
			}
			d := decide(lim, peer)
			if d.Reason == limiter.ReasonUnavailable {
				unavailable++
			}
			if d.Allowed {
				admitted++
			}
			d.Release()
		}
		return admitted, unavailable
	}
	victim.Stop()
	// The first decisions on the victim's keys trip its slots (or the
	// probe does, within a second).
	waitFor(t, "the stopped master's slots tripped", func() bool {
		_, _ = shared(onVictim[0])
		return a.Status().Down.Count > 0 && b.Status().Down.Count > 0
	})
	for _, p := range elsewhere {
		if n, u := shared(p); n != 3 || u != 0 {
			t.Errorf("peer %s on a running master: %d admitted (want 3 across two instances), %d unavailable (want 0)", p, n, u)
		}
	}
	for _, p := range onVictim[1:] {
		start := time.Now()
		d := decide(limA, p)
		if took := time.Since(start); d.Reason != limiter.ReasonUnavailable || took > o.Timeout {
			t.Errorf("peer %s on the stopped master: %v/%v in %s, want unavailable without waiting for Redis", p, d.Allowed, d.Reason, took)
		}
	}
	// The breaker's probe finds the master not answering, and trips all
	// of its slots: a third of them.
	waitFor(t, "every slot of the stopped master tripped", func() bool {
		n := a.Status().Down.Count
		return n == 5461 || n == 5462
	})
	st := a.Status()
	if !st.Up || !strings.Contains(st.Down.Reason, "connection") {
		t.Errorf("status with one master of three stopped: up %v, %d slots down, reason %q", st.Up, st.Down.Count, st.Down.Reason)
	}
	if s := a.Stats(); !s.Up || s.SlotsDown != st.Down.Count {
		t.Errorf("stats: up %v, %d slots down; status says %d", s.Up, s.SlotsDown, st.Down.Count)
	}

	victim.Restart()
	start := time.Now()
	// Restarted, the master answers for its keys once it is back in the
	// cluster (CLUSTERDOWN until then).
	c.WaitOK(15 * time.Second)
	waitFor(t, "the master's slots closed again", func() bool {
		return a.Status().Down.Count == 0 && b.Status().Down.Count == 0 && a.Status().Up && b.Status().Up
	})
	t.Logf("slots closed %s after the master's restart", time.Since(start).Round(10*time.Millisecond))
	for _, p := range onVictim[1:] {
		if n, u := shared(p); n != 3 || u != 0 {
			t.Errorf("peer %s on the restarted master: %d admitted (want 3), %d unavailable", p, n, u)
		}
	}
	if !strings.Contains(logA.String(), "redis cluster master is unavailable") || !strings.Contains(logA.String(), "shared again") {
		t.Errorf("the trip and the recovery are not logged:\n%s", logA)
	}
}

// TestRedisClusterScheduleMasterDown: the master of the groups' shared
// schedules (ld:sched) stops before an instance has read its group's: the
// decisions that need it fail as on_failure says, and the slot tripped is
// ld:sched's, not those of the peers deciding, whose masters answer.
func TestRedisClusterScheduleMasterDown(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	c := redistest.StartPartialCluster(t)
	addrs := c.Addrs()
	a, limA, _ := open(t, cluster.Options{Addrs: addrs, OnFailure: cluster.FailClosed, Timeout: time.Second})
	victim := c.MasterOf("ld:sched")
	key := func(peer string) string { return "ld:" + cluster.TagOf(peer, "general") + ":pt" }
	var elsewhere []string
	for i := 0; len(elsewhere) < 4; i++ {
		if p := fmt.Sprintf("198.51.100.%d", i); c.MasterOf(key(p)) != victim {
			elsewhere = append(elsewhere, p)
		}
	}
	victim.Stop()
	for _, p := range elsewhere {
		if d := decide(limA, p); d.Reason != limiter.ReasonUnavailable {
			t.Fatalf("peer %s without its group's schedule: %v/%v, want unavailable", p, d.Allowed, d.Reason)
		}
	}
	// ld:sched's slot alone, or (the probe's) every slot of its master
	if n := a.Status().Down.Count; n != 1 && n != 5461 && n != 5462 {
		t.Fatalf("%d slots down after the schedules' master stopped: want ld:sched's, or its master's", n)
	}
}
