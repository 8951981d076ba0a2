package redistest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster runs a Redis Cluster of n masters (n ≥ 3, no replicas), each
// a Server as Start runs it, and waits until it serves every slot. It
// needs redis-cli (Debian's redis-tools, which redis-server brings).
func StartCluster(tb testing.TB, n int) []*Server {
	tb.Helper()
	return StartClusterReplicas(tb, n, 0, 5000).Nodes
}

// Cluster is a Redis Cluster run by a test.
type Cluster struct {
	tb testing.TB
	// Nodes are its servers, masters and replicas, in no particular role
	// order (redis-cli assigns them).
	Nodes []*Server
}

// StartClusterReplicas runs a Redis Cluster of masters masters (≥ 3) with
// replicas replicas each and a cluster-node-timeout of nodeTimeoutMS (a
// master stopped is failed over by its replica after about that much and
// a second), and waits until every node sees every slot served. Each
// server is also given extra (e.g. "--cluster-require-full-coverage", "no").
func StartClusterReplicas(tb testing.TB, masters, replicas, nodeTimeoutMS int, extra ...string) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb}
	var addrs []string
	for range masters * (1 + replicas) {
		dir := tb.TempDir()
		args := []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(nodeTimeoutMS),
			// a replica takes over whatever its data's age: the tests stop
			// masters on purpose
			"--cluster-replica-validity-factor", "0"}
		s := Start(tb, append(args, extra...)...)
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cliPath(tb), args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(15 * time.Second)
	if replicas > 0 {
		// every replica's link to its master is up, so that it can be
		// promoted
		for _, s := range c.Nodes {
			if c.role(s) == "slave" {
				waitInfo(tb, s, "master_link_status:up")
			}
		}
	}
	return c
}

// StartPartialCluster runs a Redis Cluster of three masters without
// replicas that go on serving their slots while one of them is down
// (cluster-require-full-coverage off): a master stopped stays down.
func StartPartialCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return StartClusterReplicas(tb, 3, 0, 1000, "--cluster-require-full-coverage", "no")
}

// Addrs returns the addresses of c's nodes.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, s := range c.Nodes {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// WaitOK waits up to within until every running node says cluster_state:ok
// and sees each slot served by a master not failing.
func (c *Cluster) WaitOK(within time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(within)
	for _, s := range c.Nodes {
		if s.Pid() == 0 {
			continue
		}
		for {
			out, _ := exec.Command(cliPath(c.tb), "-p", fmt.Sprint(s.port), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.tb.Fatalf("the cluster is not ok on %s within %s:\n%s", s.Addr(), within, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// role returns s's role as ROLE says: "master" or "slave".
func (c *Cluster) role(s *Server) string {
	out, _ := exec.Command(cliPath(c.tb), "-p", fmt.Sprint(s.port), "role").Output()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(first)
}

// MasterOf returns the running node that serves key's hash slot now, as
// the first running node's CLUSTER SLOTS says.
func (c *Cluster) MasterOf(key string) *Server {
	c.tb.Helper()
	var ask *Server
	for _, s := range c.Nodes {
		if s.Pid() != 0 {
			ask = s
			break
		}
	}
	if ask == nil {
		c.tb.Fatal("no node of the cluster runs")
	}
	cli := cliPath(c.tb)
	port := fmt.Sprint(ask.port)
	out, err := exec.Command(cli, "-p", port, "cluster", "keyslot", key).Output()
	if err != nil {
		c.tb.Fatalf("cluster keyslot: %v", err)
	}
	slot, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		c.tb.Fatalf("cluster keyslot answered %q", out)
	}
	// CLUSTER NODES: <id> <ip:port@cport> <flags> <master> <ping> <pong>
	// <epoch> <link> <slot ranges…>
	out, err = exec.Command(cli, "-p", port, "cluster", "nodes").Output()
	if err != nil {
		c.tb.Fatalf("cluster nodes: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || slot < a || slot > b {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			for _, s := range c.Nodes {
				if s.Addr() == addr {
					return s
				}
			}
		}
	}
	c.tb.Fatalf("no master serves slot %d of %q:\n%s", slot, key, out)
	return nil
}
