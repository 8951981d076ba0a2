package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// logBuffer collects a backend's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// open opens a backend as o says (zero: strict, on_failure local), with a
// 50 ms timeout, a 10 s lease and a log, and its limiter, for one group
// general of 3 tokens and 2 in flight.
func open(t *testing.T, o cluster.Options) (*cluster.Backend, *limiter.Limiter, *logBuffer) {
	t.Helper()
	return openWith(t, o, limiter.Config{IPv6Prefix: 64, Groups: map[string]limiter.GroupSettings{
		"general": group(0, 1000, 3, 600000, 3, 2, 120000, 120000),
	}})
}

// openWith is open for the groups of cfg.
func openWith(t *testing.T, o cluster.Options, cfg limiter.Config) (*cluster.Backend, *limiter.Limiter, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if o.Timeout == 0 {
		o.Timeout = 50 * time.Millisecond
	}
	if o.Lease == 0 {
		o.Lease = 10 * time.Second
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = 100 * time.Millisecond
	}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	o.Fallback = memory.New()
	b, err := cluster.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lim, err := limiter.New(b, time.Now(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, lim, logs
}

func peerOf(s string) peer.Peer {
	a := netip.MustParseAddr(s)
	return peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
}

func decide(lim *limiter.Limiter, peer string) limiter.Decision {
	g, _ := lim.GroupID("general")
	return lim.Decide(time.Now(), peerOf(peer), g)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableRedis: with no Redis at the address, the backend starts
// down with a clear log line, and each on_failure answers as configured,
// at once: open admits as unlimited, closed rejects as unavailable (503),
// local decides with the instance's own state.
func TestUnreachableRedis(t *testing.T) {
	addr := closedPort(t)
	for _, f := range []cluster.OnFailure{cluster.FailOpen, cluster.FailClosed, cluster.FailLocal} {
		t.Run(f.String(), func(t *testing.T) {
			b, lim, logs := open(t, cluster.Options{Addrs: []string{addr}, OnFailure: f})
			st := b.Status()
			if st.Up || !strings.HasPrefix(st.Reason, "connection: ") {
				t.Fatalf("status %+v", st)
			}
			if !strings.Contains(logs.String(), "redis unavailable at start") || !strings.Contains(logs.String(), addr) {
				t.Fatalf("log:\n%s", logs)
			}
			var got []string
			for range 5 {
				start := time.Now()
				d := decide(lim, "192.0.2.1")
				if took := time.Since(start); took > 20*time.Millisecond {
					t.Errorf("a decision with the breaker down took %s", took)
				}
				got = append(got, fmt.Sprintf("%v/%v", d.Allowed, d.Reason))
			}
			want := map[cluster.OnFailure]string{
				cluster.FailOpen:   "[true/ true/ true/ true/ true/]",
				cluster.FailClosed: "[false/unavailable false/unavailable false/unavailable false/unavailable false/unavailable]",
				// leaky_limit 3, concurrency 2: the local state limits (slots held).
				cluster.FailLocal: "[true/ true/ false/concurrency false/concurrency false/concurrency]",
			}[f]
			if fmt.Sprint(got) != want {
				t.Fatalf("decisions %v, want %v", got, want)
			}
			s := b.Stats()
			if s.Up || s.Errors[cluster.KindConnection] == 0 || s.FailOpen+s.FailClosed+s.FailLocal != 5 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestAuthFailure: a wrong password, and a user without the right to run
// scripts, are reported as auth failures and answered as on_failure says.
func TestAuthFailure(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right")
	b, lim, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}, Password: "wrong", OnFailure: cluster.FailClosed})
	if st := b.Status(); st.Up || !strings.HasPrefix(st.Reason, "auth: ") {
		t.Fatalf("wrong password: %+v", st)
	}
	if !strings.Contains(logs.String(), "kind=auth") {
		t.Fatalf("log:\n%s", logs)
	}
	if d := decide(lim, "192.0.2.1"); d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("decision %+v", d)
	}

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "right"})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	b, _, _ = open(t, cluster.Options{Addrs: []string{srv.Addr()}, Username: "noscripts", Password: "pw"})
	if st := b.Status(); st.Up || !strings.HasPrefix(st.Reason, "auth: ") || !strings.Contains(st.Reason, "NOPERM") {
		t.Fatalf("no right to run scripts: %+v", st)
	}
	b, _, _ = open(t, cluster.Options{Addrs: []string{srv.Addr()}, Password: "right"})
	if st := b.Status(); !st.Up {
		t.Fatalf("right password: %+v", st)
	}
}

// fakeRedis answers like a Redis whose scripts fail: every EVALSHA, EVAL
// and SCRIPT call with reply, the handshake and INFO as a Redis would.
func fakeRedis(t *testing.T, reply string) string {
	return fakeRedisRaw(t, "-"+reply+"\r\n")
}

// fakeRedisRaw is fakeRedis answering the scripts with raw, a whole RESP
// reply as written on the wire.
func fakeRedisRaw(t *testing.T, raw string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(c, raw)
		}
	}()
	return ln.Addr().String()
}

func serveFake(c net.Conn, raw string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		// An array of bulk strings: *N, then $len and the value N times.
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var n int
		fmt.Sscanf(line, "*%d", &n)
		var args []string
		for range n {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			v, err := r.ReadString('\n')
			if err != nil {
				return
			}
			args = append(args, strings.TrimRight(v, "\r\n"))
		}
		if len(args) == 0 {
			return
		}
		var out string
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			out = "-ERR unknown command 'HELLO'\r\n"
		case "PING":
			out = "+PONG\r\n"
		case "INFO":
			info := "redis_version:7.0.15\r\nevicted_keys:0\r\n"
			out = fmt.Sprintf("$%d\r\n%s\r\n", len(info), info)
		case "EVALSHA", "EVAL", "SCRIPT":
			out = raw
		case "DEL":
			out = ":0\r\n"
		default:
			out = "+OK\r\n"
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

// TestScriptErrors: a Redis that answers errors to scripts (a CROSSSLOT,
// as spring-cloud-gateway #248 met on Redis Cluster and then failed open)
// is never a silent admission: the breaker goes down with the error in the
// log and the status, and on_failure answers.
func TestScriptErrors(t *testing.T) {
	addr := fakeRedis(t, "CROSSSLOT Keys in request don't hash to the same slot")
	b, lim, logs := open(t, cluster.Options{Addrs: []string{addr}, OnFailure: cluster.FailClosed})
	st := b.Status()
	if st.Up || !strings.HasPrefix(st.Reason, "script: ") || !strings.Contains(st.Reason, "CROSSSLOT") {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "CROSSSLOT") {
		t.Fatalf("log:\n%s", logs)
	}
	if d := decide(lim, "192.0.2.1"); d.Allowed {
		t.Fatalf("admitted through a failing script: %+v", d)
	}
	if s := b.Stats(); s.Errors[cluster.KindScript] == 0 || s.FailClosed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestKeyErrors: a (peer, group) key of the wrong type (another
// application writing into the namespace) or holding a value no decision
// wrote (a count that is not a number, a negative one, a state field
// out of range) fails that key's decisions only: on_failure answers them,
// the breaker stays up, every other peer is decided as usual, and the key
// is repaired (deleted, logged, counted): its next decision starts afresh.
func TestKeyErrors(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	key := func(peer string) string { return "ld:" + cluster.TagOf(peer, "general") + ":pt" }
	cases := []struct {
		name  string
		plant func(peer string) error
	}{
		{"wrong type", func(p string) error { return rdb.HSet(ctx, key(p), "tok", 1).Err() }},
		{"tokens not a number", func(p string) error { return rdb.Set(ctx, key(p), packed(0, math.NaN(), 1), 0).Err() }},
		{"negative tokens", func(p string) error { return rdb.Set(ctx, key(p), packed(0, -40, 1), 0).Err() }},
		{"tokens not whole", func(p string) error { return rdb.Set(ctx, key(p), packed(0, 1.5, 1), 0).Err() }},
		{"tick infinite", func(p string) error { return rdb.Set(ctx, key(p), packed(0, 1, math.Inf(-1)), 0).Err() }},
		{"count not a number", func(p string) error {
			return rdb.Set(ctx, key(p), packed(0, 1, 1)+inflight("other", math.NaN(), 99999999999999), 0).Err()
		}},
		{"negative count", func(p string) error {
			return rdb.Set(ctx, key(p), packed(0, 1, 1)+inflight("other", -3, 99999999999999), 0).Err()
		}},
		{"lease not whole", func(p string) error {
			return rdb.Set(ctx, key(p), packed(0, 1, 1)+inflight("other", 1, 99999999999999.5), 0).Err()
		}},
		{"in-flight part cut short", func(p string) error {
			v := packed(0, 1, 1) + inflight("other", 1, 99999999999999)
			return rdb.Set(ctx, key(p), v[:len(v)-3], 0).Err()
		}},
		{"expiry not a number", func(p string) error { return rdb.Set(ctx, key(p), packedExp(math.NaN(), 0, 1, 1), 0).Err() }},
		{"fields cut short", func(p string) error { return rdb.Set(ctx, key(p), packed(0, 1, 1)[:20], 0).Err() }},
		{"the text layout", func(p string) error { return rdb.Set(ctx, key(p), "0 1 1;other 1 99999999999999", 0).Err() }},
		{"garbage", func(p string) error { return rdb.Set(ctx, key(p), "\x00\xff;;", 0).Err() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A generous timeout: the test is of one key's corruption, and a
			// loaded host once took a write past 50 ms, which is another failure.
			b, lim, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed, Timeout: 2 * time.Second})
			bad := "192.0.2.9"
			// Warm: the group's schedule is established (generation 0).
			warm := decide(lim, "192.0.2.200")
			warm.Release()
			if err := tc.plant(bad); err != nil {
				t.Fatal(err)
			}
			if d := decide(lim, bad); d.Allowed || d.Reason != limiter.ReasonUnavailable {
				t.Fatalf("decision on a bad key: %+v", d)
			}
			// Innocent peers, many of them, while the bad key is there.
			for i := range 200 {
				if d := decide(lim, fmt.Sprintf("198.51.100.%d", i)); !d.Allowed {
					t.Fatalf("peer %d: %+v (status %+v), log:\n%s", i, d, b.Status(), logs)
				} else {
					d.Release()
				}
			}
			if !b.Status().Up {
				t.Fatalf("one bad key took the breaker down: %+v", b.Status())
			}
			waitFor(t, "the key repaired", func() bool { return b.Stats().Repaired == 1 })
			if d := decide(lim, bad); !d.Allowed {
				t.Fatalf("after the repair: %+v", d)
			}
			s := b.Stats()
			if s.Errors[cluster.KindKey] != 1 || s.FailClosed != 1 || !strings.Contains(logs.String(), "repaired") {
				t.Fatalf("stats %+v, log:\n%s", s, logs)
			}
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoScript: a Redis that lost its scripts (SCRIPT FLUSH, a restart, a
// failover) has them loaded again by the next call, which still decides.
func TestNoScript(t *testing.T) {
	srv := redistest.Start(t)
	b, lim, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	d := decide(lim, "192.0.2.1")
	d.Release()
	for i := range 3 {
		if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		// (A release reaches Redis a moment later: a concurrency rejection
		// is a decision too.)
		d := decide(lim, "192.0.2.1")
		if !d.Limited || d.Reason == limiter.ReasonUnavailable {
			t.Fatalf("decision %d after SCRIPT FLUSH: %+v", i, d)
		}
		d.Release()
	}
	if !b.Status().Up {
		t.Fatalf("%+v", b.Status())
	}
}

// TestMemoryPressure: a Redis that evicts keys (limiter state lost: a
// silent fail-open otherwise) is taken as down, with a clear log line and
// the evicted kind counted, until it stops evicting; a Redis out of memory
// under noeviction fails the writes, answered as on_failure says.
func TestMemoryPressure(t *testing.T) {
	t.Run("evicting", func(t *testing.T) {
		srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-random")
		b, lim, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed})
		if !b.Status().Up {
			t.Fatalf("%+v", b.Status())
		}
		d := decide(lim, "192.0.2.1")
		d.Release()
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		fill(t, rdb, 12<<20)
		waitFor(t, "the eviction noticed", func() bool { return !b.Status().Up })
		if st := b.Status(); !strings.HasPrefix(st.Reason, "evicted: ") || !strings.Contains(logs.String(), "evicted") {
			t.Fatalf("status %+v, log:\n%s", st, logs)
		}
		if d := decide(lim, "192.0.2.1"); d.Allowed || d.Reason != limiter.ReasonUnavailable {
			t.Fatalf("decision while evicting: %+v", d)
		}
		if b.Stats().Errors[cluster.KindEvicted] == 0 {
			t.Fatalf("%+v", b.Stats())
		}
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "redis in use again once it stopped evicting", func() bool { return b.Status().Up })
	})
	t.Run("noeviction", func(t *testing.T) {
		srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		b, lim, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed})
		fill(t, rdb, 12<<20)
		if d := decide(lim, "192.0.2.1"); d.Allowed {
			t.Fatalf("admitted by a Redis out of memory: %+v", d)
		}
		if s := b.Stats(); s.Errors[cluster.KindMemory] == 0 {
			t.Fatalf("stats %+v, status %+v", s, b.Status())
		}
	})
}

// fill writes about n bytes of other data into Redis, or until it is out
// of memory, in big values then small ones (so that it is full to the
// byte).
func fill(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	written := 0
	for _, size := range []int{64 << 10, 1 << 10, 64} {
		val := strings.Repeat("x", size)
		for written < n {
			err := rdb.Set(ctx, fmt.Sprintf("junk:%d:%d", size, written), val, 0).Err()
			if err != nil && strings.HasPrefix(err.Error(), "OOM") {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			written += size
		}
	}
}

// TestStallAndRestart: Redis stopped mid-load (SIGSTOP: connections open,
// nothing answered) — no decision waits much longer than the timeout, the
// goroutines do not pile up (envoyproxy/ratelimit #978), every on_failure
// answers as configured; Redis continued, or killed and started again
// empty, is used again within seconds.
func TestStallAndRestart(t *testing.T) {
	for _, f := range []cluster.OnFailure{cluster.FailOpen, cluster.FailClosed, cluster.FailLocal} {
		t.Run(f.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			b, lim, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: f})
			g := lim
			// load decides for d on 64 goroutines and returns the slowest
			// decision, the answers, and the most goroutines seen meanwhile.
			load := func(d time.Duration) (maxTook time.Duration, answers map[string]int, peak int) {
				var mu sync.Mutex
				answers = map[string]int{}
				var wg sync.WaitGroup
				stop := time.Now().Add(d)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(stop) {
						peak = max(peak, runtime.NumGoroutine())
						time.Sleep(5 * time.Millisecond)
					}
				}()
				for w := range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; time.Now().Before(stop); i++ {
							start := time.Now()
							dec := decide(g, fmt.Sprintf("198.51.%d.%d", w, i%200))
							took := time.Since(start)
							dec.Release()
							mu.Lock()
							maxTook = max(maxTook, took)
							answers[fmt.Sprintf("%v/%v", dec.Allowed, dec.Reason)]++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				return maxTook, answers, peak
			}
			_, _, before := load(300 * time.Millisecond) // Redis up
			srv.Pause()
			took, answers, during := load(2 * time.Second)
			t.Logf("stalled: slowest decision %s, goroutines at most %d with Redis up, %d stalled; answers %v", took, before, during, answers)
			if took > time.Second {
				t.Errorf("a decision waited %s with Redis stalled (timeout 50ms)", took)
			}
			if during > before+20 {
				t.Errorf("goroutines: at most %d with Redis up, %d with Redis stalled", before, during)
			}
			if b.Status().Up {
				t.Errorf("up during the stall: %+v", b.Status())
			}
			want := map[cluster.OnFailure]string{cluster.FailOpen: "true/", cluster.FailClosed: "false/unavailable", cluster.FailLocal: "true/"}[f]
			if answers[want] == 0 {
				t.Errorf("answers during the stall %v, want mostly %q", answers, want)
			}
			srv.Resume()
			waitFor(t, "redis in use after SIGCONT", func() bool { return b.Status().Up })
			srv.Restart()
			waitFor(t, "the restart noticed", func() bool {
				d := decide(lim, "192.0.2.77")
				d.Release()
				return !b.Status().Up || d.Allowed
			})
			start := time.Now()
			waitFor(t, "redis in use after a restart", func() bool { return b.Status().Up })
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("limiting resumed %s after the restart", took)
			}
			// Shared again: the new Redis counts this peer from zero, up to
			// leaky_limit 3.
			// (Releases reach Redis a moment later: a concurrency
			// rejection is tried again.)
			var admitted int
			for n := 0; n < 6; {
				d := decide(lim, "203.0.113.50")
				d.Release()
				if d.Reason == limiter.ReasonConcurrency {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				n++
				if d.Allowed {
					admitted++
				}
			}
			if admitted != 3 || !b.Status().Up {
				t.Errorf("after the restart %d admitted of 6, want 3; %+v %+v\n%s", admitted, b.Status(), b.Stats(), logs)
			}
			if !strings.Contains(logs.String(), "redis available") {
				t.Errorf("no recovery logged:\n%s", logs)
			}
		})
	}
}

// TestLeaseFreesSlots: an instance that stops with requests in flight (it
// never releases them, nor renews their lease) holds the peer's
// concurrency only until its lease ends; a living instance's slots are
// renewed past the lease.
func TestLeaseFreesSlots(t *testing.T) {
	srv := redistest.Start(t)
	// 2 s, not the minimum of 1 s: the renewals run on the real clock, and
	// a host loaded by the whole suite under -race delayed one past a 1 s
	// lease (seen once at load average 15).
	lease := 2 * time.Second
	// And Redis's timeout at 1 s: a renewal timed out at 50 ms is a lost
	// renewal, which is not what this test is about.
	dead, deadLim, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, Lease: lease, Timeout: time.Second})
	_, other, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, Lease: lease, Timeout: time.Second})
	// concurrency_limit 2: two requests in flight on the instance that dies.
	for range 2 {
		if d := decide(deadLim, "192.0.2.5"); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	}
	dead.Close()
	if d := decide(other, "192.0.2.5"); d.Allowed || d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("the dead instance's slots are not counted: %+v", d)
	}
	start := time.Now()
	waitFor(t, "the slots freed", func() bool {
		d := decide(other, "192.0.2.5")
		d.Release()
		return d.Allowed
	})
	if took := time.Since(start); took > lease+2*time.Second {
		t.Errorf("slots freed %s after the instance died, lease %s", took, lease)
	}

	// A living instance keeps its slot for as long as it holds it.
	held := decide(other, "192.0.2.6")
	held2 := decide(other, "192.0.2.6")
	if !held.Allowed || !held2.Allowed {
		t.Fatalf("%+v %+v", held, held2)
	}
	time.Sleep(3 * lease)
	if d := decide(other, "192.0.2.6"); d.Allowed || d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("a held slot expired though its instance lives: %+v", d)
	}
	held.Release()
	waitFor(t, "the release applied", func() bool {
		d := decide(other, "192.0.2.6")
		d.Release()
		return d.Allowed
	})
	held2.Release()
}

// TestLimitsTooLarge: a group whose limits the scripts cannot compute
// exactly (burst × period over 2⁵³: Lua's numbers are doubles) fails its
// own decisions only — answered as on_failure says, counted — and never
// takes the breaker down for the others.
func TestLimitsTooLarge(t *testing.T) {
	srv := redistest.Start(t)
	b, lim, logs := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed})
	cfg := lim.Config()
	huge := cfg.Groups["general"]
	huge.Algorithm, huge.Limit, huge.Period, huge.Burst = algo.GCRA, 10, 1<<31-1, 1<<31-1
	cfg.Groups["huge"] = huge
	if _, err := lim.Apply(time.Now(), cfg); err != nil {
		t.Fatal(err)
	}
	g, _ := lim.GroupID("huge")
	if d := lim.Decide(time.Now(), peerOf("192.0.2.1"), g); d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("decision in a group over the bound: %+v", d)
	}
	if !b.Status().Up {
		t.Fatalf("the breaker went down: %+v", b.Status())
	}
	if d := decide(lim, "192.0.2.1"); !d.Allowed {
		t.Fatalf("another group: %+v", d)
	}
	if s := b.Stats(); s.Errors[cluster.KindLimits] != 1 || !strings.Contains(logs.String(), "burst × period") {
		t.Fatalf("stats %+v, log:\n%s", s, logs)
	}
	gs := cfg.Groups["huge"]
	if err := cluster.CheckLimits("huge", &gs); !errors.Is(err, cluster.ErrLimits) || !strings.Contains(err.Error(), "http_api.limiter.huge") {
		t.Fatalf("CheckLimits: %v", err)
	}
}
