package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSample is, in cluster mode, the shared redis-server at one
// moment (the same for every instance sampled then) and what one daemon
// counted of its calls to it since it started.
type ClusterSample struct {
	Keys       int64 // DBSIZE
	UsedMemory int64 // used_memory of INFO memory
	// Conns is the daemon's open connections to Redis (of its open fds).
	Conns int
	// Up is limiterd_cluster_redis_up.
	Up bool
	// Errors is limiterd_cluster_redis_errors_total over its kinds,
	// Failures limiterd_cluster_failure_decisions_total over its answers
	// (decisions made without Redis), Dropped
	// limiterd_cluster_dropped_releases_total.
	Errors, Failures, Dropped int64
}

// String formats the sample.
func (c *ClusterSample) String() string {
	return fmt.Sprintf("Redis keys %d, used_memory %s; connections to Redis %d, Redis up %v, errors %d, decisions without Redis %d, dropped releases %d",
		c.Keys, MiB(c.UsedMemory), c.Conns, c.Up, c.Errors, c.Failures, c.Dropped)
}

// clusterCounters reads the daemon's cluster series from its metrics, nil
// when it exports none (the local backend).
func clusterCounters(m map[string]float64) *ClusterSample {
	up, ok := m["limiterd_cluster_redis_up"]
	if !ok {
		return nil
	}
	sum := func(name string) int64 {
		var n float64
		for k, v := range m {
			if rest, ok := strings.CutPrefix(k, name); ok && (rest == "" || rest[0] == '{') {
				n += v
			}
		}
		return int64(n)
	}
	return &ClusterSample{Up: up == 1, Errors: sum("limiterd_cluster_redis_errors_total"),
		Failures: sum("limiterd_cluster_failure_decisions_total"), Dropped: sum("limiterd_cluster_dropped_releases_total")}
}

// redisFigures reads Redis's key count (DBSIZE) and used_memory.
func redisFigures(ctx context.Context, rdb *redis.Client) (keys, usedMemory int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if keys, err = rdb.DBSize(ctx).Result(); err != nil {
		return 0, 0, fmt.Errorf("redis DBSIZE: %w", err)
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("redis INFO memory: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			if usedMemory, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, 0, fmt.Errorf("redis INFO memory: used_memory %q: %w", v, err)
			}
			return keys, usedMemory, nil
		}
	}
	return 0, 0, fmt.Errorf("redis INFO memory: no used_memory in %q", info)
}

// connsTo counts pid's established TCP connections to port on 127.0.0.1
// (/proc/PID/net/tcp's sockets whose inode is among pid's fds).
func connsTo(pid, port int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	inodes := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) >= 10 && f[2] == want && f[3] == "01" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[l] {
			n++
		}
	}
	return n, nil
}

// redisConnsMax is the most connections to Redis an idle instance may
// hold: its client's pool (cluster/backend.go: PoolSize, 4 workers and 8)
// and the subscription to the live edits' channel.
const redisConnsMax = 13

// freshPeers is where the cluster soak's fresh peers begin, IPv4(freshPeers
// + n): 11.16.0.0 on, away from the 3 200 of the steady load (11.0.x.x).
const freshPeers = 1 << 20

// idleRedisKeys is the most keys Redis may hold once the load is over
// and the last slots' leases ended: the shared state's (ld:sched, the
// groups' tick schedules; ld:{cfg}:ver and ld:{cfg}:state, the live
// edits; cluster/keys.go, cluster/replicate.go) and a few to spare, none
// of a peer.
const idleRedisKeys = 10

// judgeCluster calls fail when the daemon's calls to Redis failed, Redis
// being up throughout: its counters, read idle after the load, count
// from its start.
func judgeCluster(fail func(string, ...any), f *Figures) {
	c := f.IdleAfter.Cluster
	if c == nil {
		fail("no cluster metrics (limiterd_cluster_redis_up) after the load")
		return
	}
	if !c.Up {
		fail("limiterd_cluster_redis_up 0 after the load, Redis up throughout")
	}
	if c.Conns > redisConnsMax {
		fail("%d connections to Redis after the load, over the client's pool and the subscription (%d)", c.Conns, redisConnsMax)
	}
	if c.Errors > 0 || c.Failures > 0 || c.Dropped > 0 {
		fail("%d failed Redis calls (limiterd_cluster_redis_errors_total), %d decisions without Redis, %d dropped releases, Redis up throughout (warm: %v)",
			c.Errors, c.Failures, c.Dropped, f.Warm.Cluster)
	}
}

// judgeRedis calls fail when Redis's keys or memory grew from the
// warm-up (warm) to the end (end) beyond noise, or idle after the load
// (idle) it holds a peer's keys.
//
// The keys of the soak's load (strict mode, general a hybrid with no
// sliding window): each (peer, general) admitted holds a hash of its
// tokens, ld:{<peer>|general}:<generation>:h, whose TTL runs until its
// tokens are back at 0 and a second (cluster/lua/hybrid.lua and
// reduce.lua: general's 10 tokens go in one 5 s tick, so at most 6 s),
// and while a request of it is in flight a ZSET of slots, :f, deleted
// with its last slot, else expiring a second after the lease (11 s). The
// count therefore follows the peers seen in the last few seconds (the
// 200 hot ones and the others of those seconds: 436 to 445 keys all
// through a 20-minute soak at 1 000 GETs a second), not the length of the
// run. The bound, the warm count
// half again and 1 000 more, absorbs the pacing's swings; keys that did
// not expire would add the 50 fresh peers a second (about 80 000 over a
// 30-minute soak) and cross it within a minute or so.
func judgeRedis(fail func(string, ...any), warm, end, idle *ClusterSample) {
	if warm == nil || end == nil || idle == nil {
		fail("no Redis figures")
		return
	}
	if end.Keys > warm.Keys*3/2+1000 {
		fail("Redis keys grew from %d (warm) to %d (end)", warm.Keys, end.Keys)
	}
	if w, e := warm.UsedMemory, end.UsedMemory; e > max(w*3/2, w+16<<20) {
		fail("Redis used_memory grew from %s (warm) to %s (end)", MiB(w), MiB(e))
	}
	if idle.Keys > idleRedisKeys {
		fail("Redis holds %d keys %v after the load, want at most %d (the shared state's): peers' keys that do not expire",
			idle.Keys, idleWait, idleRedisKeys)
	}
}
