package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/store"
)

// fillAudit writes n audit entries into the database at path in one
// transaction, as a daemon that ran for a long time would have (the
// daemon indexes them when it opens the file).
func fillAudit(t *testing.T, path string, n int) {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bbolt.Tx) error {
		ab := tx.Bucket([]byte("audit"))
		t0 := time.Now().Add(-time.Hour)
		for i := range n {
			id, _ := ab.NextSequence()
			v, _ := json.Marshal(map[string]any{"id": id, "time": t0.Add(time.Duration(i) * time.Millisecond),
				"actor": "token:ops", "action": "group.patch", "target": "general",
				"old": map[string]any{"leaky_limit": i}, "new": map[string]any{"leaky_limit": i + 1}})
			if err := ab.Put(be64(id), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdminStormSparesDataPlane: a storm of the most expensive admin
// calls (audit queries over a log of 20 000 entries, filtered to match
// nothing or not filtered at all, peer searches, the dashboard's audit
// page), 16 clients at once, while the public path is timed one request
// at a time, in phases alternating with idle ones. The admin calls run at
// most admin.expensive_calls at once (the rest wait, or get 503); every
// public request is answered. The p99 figures are logged; the assertion
// is only that the storm does not come near the seconds it once caused
// (docs/reliability.md, "Admin storms", has the figures;
// LIMITERD_STORM_LONG=1 runs longer phases and the same storm with the
// bound opened wide, for comparison).
func TestAdminStormSparesDataPlane(t *testing.T) {
	long := os.Getenv("LIMITERD_STORM_LONG") == "1"
	phase, rounds := 200, 2
	if long {
		phase, rounds = 1000, 3
	}
	up, _ := countingUpstream(t, nil)
	run := func(t *testing.T, calls int) (idle, storm, floor time.Duration) {
		d := startDaemonWith(t, func(dataDir string) string {
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			fillAudit(t, filepath.Join(dataDir, "limiterd.db"), 20000)
			// The public requests are decided, within limits they never reach.
			cfg := strings.Replace(testConfig(up.URL, dataDir, ""), "leaky_limit = 20\nleaky_tick_reduction = 20",
				"leaky_limit = 1000000\nleaky_tick_reduction = 1000000", 1)
			return strings.Replace(cfg, `token = "test-token"`,
				fmt.Sprintf("token = \"test-token\"\nexpensive_calls = %d", calls), 1)
		})
		public := func(n int) []time.Duration {
			var took []time.Duration
			for range n {
				start := time.Now()
				resp := d.get("/info")
				took = append(took, time.Since(start))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("public request: %d", resp.StatusCode)
				}
			}
			return took
		}
		var stop atomic.Bool
		var codes sync.Map // status → count
		var maxRunning atomic.Int64
		expensive := []string{"/api/v1/audit?limit=1000", "/api/v1/audit?action=nothing&limit=1000",
			"/api/v1/audit?actor=nobody", "/api/v1/peers?limit=1000&sort=requests", "/audit"}
		// The floor: the same 16 clients on a call that costs the daemon
		// next to nothing, so what is left is the machine's (the clients,
		// the HTTP of the admin listener, two shared cores).
		cheap := []string{"/api/v1/limiter"}
		startStorm := func(paths []string) *sync.WaitGroup {
			stop.Store(false)
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					for j := 0; !stop.Load(); j++ {
						req, _ := http.NewRequest("GET", d.AdminURL()+paths[(i+j)%len(paths)], nil)
						req.Header.Set("Authorization", "Bearer test-token")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						n, _ := codes.LoadOrStore(resp.StatusCode, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
					}
				})
			}
			wg.Go(func() {
				for !stop.Load() {
					v, _ := strconv.ParseInt(d.metric("limiterd_admin_expensive_calls_running"), 10, 64)
					if v > maxRunning.Load() {
						maxRunning.Store(v)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
			return &wg
		}
		public(50) // warm
		var idleAll, stormAll, cheapAll []time.Duration
		for range rounds {
			idleAll = append(idleAll, public(phase)...)
			for _, storm := range []struct {
				paths []string
				took  *[]time.Duration
			}{{expensive, &stormAll}, {cheap, &cheapAll}} {
				wg := startStorm(storm.paths)
				time.Sleep(200 * time.Millisecond)
				*storm.took = append(*storm.took, public(phase)...)
				stop.Store(true)
				wg.Wait()
			}
		}
		codes.Range(func(k, v any) bool {
			if k != http.StatusOK && k != http.StatusServiceUnavailable {
				t.Errorf("admin calls answered %v: %d times", k, v.(*atomic.Int64).Load())
			}
			t.Logf("admin calls answered %v: %d", k, v.(*atomic.Int64).Load())
			return true
		})
		if calls > 0 && maxRunning.Load() > int64(calls) {
			t.Errorf("%d expensive calls ran at once, bound %d", maxRunning.Load(), calls)
		}
		return p99(idleAll), p99(stormAll), p99(cheapAll)
	}
	idle, storm, floor := run(t, 1)
	t.Logf("admin.expensive_calls = 1: public p99 %v idle, %v in the storm (×%.2f), %v in a storm of cheap calls (×%.2f, the floor)",
		idle, storm, float64(storm)/float64(idle), floor, float64(floor)/float64(idle))
	if storm > time.Second {
		t.Errorf("public p99 %v during the storm (idle %v)", storm, idle)
	}
	if long {
		idle, storm, floor := run(t, 1024)
		t.Logf("admin.expensive_calls = 1024: public p99 %v idle, %v in the storm (×%.2f), %v in a storm of cheap calls (×%.2f)",
			idle, storm, float64(storm)/float64(idle), floor, float64(floor)/float64(idle))
	}
}

// p99 is the 99th percentile of took.
func p99(took []time.Duration) time.Duration {
	s := slices.Clone(took)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// be64 is id as the store keys audit entries: 8 bytes, big-endian.
func be64(id uint64) []byte {
	return []byte{byte(id >> 56), byte(id >> 48), byte(id >> 40), byte(id >> 32), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
}
