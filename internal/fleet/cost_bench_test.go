package fleet_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/redistest"
)

// redisCost reads INFO commandstats and cpu: the microseconds Redis spent
// in the fleet's commands, by command, and its CPU seconds.
func redisCost(b *testing.B, rdb *redis.Client) (usec map[string]float64, calls map[string]float64, cpu float64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	usec, calls = map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if name, rest, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, "cmdstat_") {
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "usec":
					usec[strings.TrimPrefix(name, "cmdstat_")] = f
				case "calls":
					calls[strings.TrimPrefix(name, "cmdstat_")] = f
				}
			}
		}
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f
			}
		}
	}
	return usec, calls, cpu
}

// BenchmarkFleetRedisCost measures what the fleet costs Redis at 8
// instances: one iteration is one publishing period (fleet.Every) of 8
// instances, each writing its summary (3.5 KiB: the Arweave groups and 20
// offenders) and each reading the fleet (every instance with a dashboard
// open: the most reads there can be). It reports Redis's time in the
// fleet's commands per period (INFO commandstats) and its CPU time per
// period (INFO cpu), and from them the share of one core at the real
// pace of one period every 2 s.
//
//	go test -run XXX -bench FleetRedisCost -benchtime 2000x ./internal/fleet/
func BenchmarkFleetRedisCost(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	board := fleet.NewRedisBoard(rdb)
	ctx := context.Background()
	groups := []string{"block_index", "chunk", "data_sync_record", "general", "get_previous_vdf_session", "get_vdf",
		"get_vdf_session", "local_peers", "metrics", "recent_hash_list_diff", "wallet_list"}
	var sums [8][]byte
	for i := range sums {
		s := summary(fmt.Sprintf("gw-%d", i), time.Now(), 3000)
		s.Groups = nil
		for _, g := range groups {
			s.Groups = append(s.Groups, fleet.Group{Name: g, Requests: 1234.5, Rejected: 321.25, Denied: 1.5, Inflight: 42})
		}
		s.Top = nil
		for j := range fleet.MaxTop {
			s.Top = append(s.Top, fleet.Offender{Peer: fmt.Sprintf("2001:db8:%x:%x::/64", j*7919, j), Group: "general", Requests: 3093.25, Rejected: 3000.5})
		}
		sums[i] = mustEncode(b, s)
	}
	u0, c0, cpu0 := redisCost(b, rdb)
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		for i := range sums {
			if _, err := board.Put(ctx, fmt.Sprintf("gw-%d", i), sums[i]); err != nil {
				b.Fatal(err)
			}
		}
		for range sums {
			if _, got, _, err := board.List(ctx); err != nil || len(got) != 8 {
				b.Fatalf("%d summaries, %v", len(got), err)
			}
		}
	}
	b.StopTimer()
	wall := time.Since(start)
	u1, c1, cpu1 := redisCost(b, rdb)
	var usec float64
	var lines []string
	for name, v := range u1 {
		n := c1[name] - c0[name]
		if name == "info" || n < float64(b.N) {
			continue
		}
		d := v - u0[name]
		usec += d
		lines = append(lines, fmt.Sprintf("%s %.0f calls %.2f µs/call", name, n/float64(b.N), d/n))
	}
	per := float64(b.N)
	b.ReportMetric(usec/per, "redis-µs/period")
	b.ReportMetric((cpu1-cpu0)*1e6/per, "redis-cpu-µs/period")
	b.ReportMetric(100*(cpu1-cpu0)/per/fleet.Every.Seconds(), "%core-at-2s")
	b.ReportMetric(float64(len(sums[0])), "summary-bytes")
	b.Logf("%d periods in %s; per period: %s", b.N, wall.Round(time.Millisecond), strings.Join(lines, "; "))
}
