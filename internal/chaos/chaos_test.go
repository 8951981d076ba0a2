package chaos

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/redistest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// limiterd builds the binary once for the package's tests.
func limiterd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath, buildErr = Build(context.Background(), dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(binPath[:len(binPath)-len("/limiterd")])
	}
	os.Exit(code)
}

// TestFloodShort: 10 000 distinct peers (7 500 IPv4, 2 500 IPv6 /64s)
// against max_tracked = 2500, paced (750 a second, light beside the other
// packages' tests) so that the table turns over in 3.3 s while the polite
// peer asks every 200 ms: the polite peer is never evicted, the /64
// rotator is one peer, the table stays at its cap.
func TestFloodShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Flood(ctx, FloodOptions{Bin: limiterd(t), Dir: t.TempDir(), IPv4: 7500, IPv6: 2500, MaxTracked: 2500,
		Conns: 4, Rate: 750, PoliteEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if len(r.PoliteEvicted) > 0 {
		t.Errorf("the polite peer was evicted: %v", r.PoliteEvicted)
	}
	if r.V6Requests != r.V6Sent || r.V6Admitted != floodLimit || r.V6Denied != r.V6Sent-floodLimit {
		t.Errorf("the /64 rotator: %d sent, %d on its entry, %d admitted, %d limited: want one peer with %d admitted",
			r.V6Sent, r.V6Requests, r.V6Admitted, r.V6Denied, floodLimit)
	}
	if r.AbuserBefore != 429 {
		t.Errorf("the exhausted abuser got %d before the flood", r.AbuserBefore)
	}
	if r.Tracked > 2500+4+4 || r.Evictions < 10000-2500 {
		t.Errorf("tracked %v, evictions %v: want the table held at max_tracked (2500)", r.Tracked, r.Evictions)
	}
	// Not a benchmark: a bound far above the 30–38 MiB measured, that a
	// table growing past its cap would break.
	if r.HWM > 256<<20 {
		t.Errorf("VmHWM %s for a table of 2500", MiB(r.HWM))
	}
	// Eviction prefers entries that carry no limiting state (decision 159):
	// the flood cannot launder the abuser.
	if !r.Limited() || !r.AbuserTracked {
		t.Errorf("the abuser exhausted before the flood got %d after it (entry tracked: %v): laundered by eviction", r.AbuserAfter, r.AbuserTracked)
	}
}

// TestCrashLoopShort: three rounds of kill -9 under load with live
// edits: every acknowledged edit survives, the database passes tx.Check,
// the probe's restored state holds every request the last snapshot
// committed before the kill had (rounds of 1.5 s at least, so that one
// is committed in each).
func TestCrashLoopShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := CrashLoop(ctx, CrashOptions{Bin: limiterd(t), Dir: t.TempDir(), Rounds: 3, Interval: time.Second,
		MinUp: 1500 * time.Millisecond, MaxUp: 2500 * time.Millisecond, Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("lost %v, corrupt %v, stale %v", r.Lost, r.Corrupt, r.Stale)
	}
	if r.Rounds != 3 || r.Acked == 0 || len(r.ProbeAfter) != 3 || r.Checked == 0 {
		t.Errorf("%d rounds, %d edits acknowledged, %d restarts checked, %d after a snapshot: the loop did not run",
			r.Rounds, r.Acked, len(r.ProbeAfter), r.Checked)
	}
}

// TestClusterCrashLoopShort: two instances on one redis-server, three
// rounds, Redis killed in one: the instances answer while it is down and
// share one limit again once it is back.
func TestClusterCrashLoopShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := ClusterCrashLoop(ctx, CrashOptions{Bin: limiterd(t), Dir: t.TempDir(), Rounds: 3, Interval: time.Second,
		MinUp: 300 * time.Millisecond, MaxUp: time.Second, Rate: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
	if r.Rounds != 3 || r.RedisKills != 1 || r.DownAnswers[200]+r.DownAnswers[429] == 0 {
		t.Errorf("%d rounds, %d Redis kills, answers while down %v: the loop did not run", r.Rounds, r.RedisKills, r.DownAnswers)
	}
}

// TestSoakShort: six seconds of the soak's mixed load; idle again, the
// daemon holds the goroutines and file descriptors it held before (the
// connections to the node a burst left in the pool included), and its
// memory did not run away.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profiles := t.TempDir()
	r, err := Soak(ctx, SoakOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 6 * time.Second, Rate: 500, Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	// The heap profiles of the warm-up and the end, through admin.pprof.
	for _, name := range []string{"instance0-warm.pb.gz", "instance0-end.pb.gz"} {
		if fi, err := os.Stat(filepath.Join(profiles, name)); err != nil || fi.Size() < 100 {
			t.Errorf("heap profile %s: %v", name, err)
		}
	}
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
	if r.Edits == 0 || r.Reductions == 0 || r.Warm.At == 0 {
		t.Errorf("%d edits, %d reductions, warm sample at %v: the soak did not run", r.Edits, r.Reductions, r.Warm.At)
	}
	// The judgement is net of the dashboard's records: they must be read
	// (the request log holds a chunk from the first request on).
	if r.End.Records < 1<<20 {
		t.Errorf("the dashboard's records read as %d bytes at the end: limiterd_dashboard_record_bytes missing?", r.End.Records)
	}
}

// TestClusterSoakShort: the soak's mixed load for seven seconds on two
// instances in cluster mode sharing a redis-server: besides the
// instances' own figures, Redis's keys and memory are read, no call to
// Redis failed, every live edit made on the first instance reached the
// second, and once idle Redis holds no peer's keys (they expire). (The
// dashboard's records stay empty: decisions are recorded by the local
// backend only.)
func TestClusterSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Soak(ctx, SoakOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 7 * time.Second, Rate: 500, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
	if r.Second == nil || r.Edits == 0 || r.Reductions == 0 || r.Fresh == 0 || r.Warm.At == 0 || r.Second.Warm.At == 0 {
		t.Fatalf("second instance %v, %d edits, %d reductions, %d fresh peers, warm sample at %v: the soak did not run",
			r.Second != nil, r.Edits, r.Reductions, r.Fresh, r.Warm.At)
	}
	for i, f := range []*Figures{&r.Figures, r.Second} {
		w := f.Warm.Cluster
		// The load's peers hold keys under load: they must be read.
		if w == nil || w.Keys < 100 || w.UsedMemory < 1<<19 || !w.Up {
			t.Errorf("instance %d: Redis figures under load %v: not read?", i, w)
		}
		// Their connections to Redis are read: fds net of them are judged.
		if w != nil && w.Conns == 0 {
			t.Errorf("instance %d: no connection to Redis found among its fds", i)
		}
	}
}

// TestRestartsShort: 3 restarts on sockets held as systemd's
// limiterd.socket holds them, under a steady load of 400 requests a
// second: every request answered once, none refused or reset, the probe
// peer's state restored before each new process accepts.
func TestRestartsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Restarts(ctx, RestartOptions{Bin: limiterd(t), Dir: t.TempDir(), Restarts: 3, Rate: 400, Conns: 8, Up: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Error("requests lost, doubled or a probe admitted (above)")
	}
}
