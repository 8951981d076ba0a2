// Command decideprof profiles the Redis time of cluster mode's decision
// batch script (internal/cluster/lua/decide.lua) apart from any client:
// batches of n entries of one algorithm over distinct peers, sent one
// after the other on one connection, the Redis time per entry read from
// INFO commandstats; against redis_rate's script (one call per decision)
// and a floor (a script given the same arguments that touches no key and
// answers the same shape), rounds alternated. Variants of the script (a
// file each) are compared the same way. bench/cluster.sh measures the whole
// path; docs/benchmarks.md has the figures.
package main

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/bench"
	"github.com/limiterd/limiterd/limiter/peer"
)

var (
	addr    = flag.String("addr", "127.0.0.1:6390", "redis-server address")
	scripts = flag.String("script", "internal/cluster/lua/decide.lua", "comma-separated decide.lua variants")
	kind    = flag.String("algo", "gcra", "gcra, token_bucket or hybrid")
	n       = flag.Int("n", 11, "entries per batch call")
	calls   = flag.Int("calls", 1000, "batch calls per measurement")
	npeers  = flag.Int("peers", 1000, "distinct peers")
	rounds  = flag.Int("rounds", 3, "rounds")
)

type variant struct {
	name, src, sha string
}

func main() {
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1})
	defer rdb.Close()
	var vs []variant
	for _, p := range append(strings.Split(*scripts, ","), "floor") {
		src := bench.BatchFloorScript
		if p != "floor" {
			b, err := os.ReadFile(p)
			if err != nil {
				panic(err)
			}
			src = string(b)
		}
		sum := sha1.Sum([]byte(src))
		v := variant{name: p, src: src, sha: hex.EncodeToString(sum[:])}
		if err := rdb.ScriptLoad(ctx, src).Err(); err != nil {
			panic(err)
		}
		vs = append(vs, v)
	}
	keys := make([]string, *npeers)
	for i := range keys {
		a := netip.AddrFrom4([4]byte{11, 0, byte(i >> 8), byte(i)})
		keys[i] = peer.KeyFromAddr(a, 64).String()
	}
	fmt.Printf("%s, %d entries a call, %d calls, %d peers\n", *kind, *n, *calls, *npeers)
	best := map[string]float64{}
	keep := func(name string, us float64) {
		if b, ok := best[name]; !ok || us < b {
			best[name] = us
		}
	}
	for r := range *rounds {
		for _, v := range vs {
			rdb.FlushAll(ctx)
			run(ctx, rdb, v, keys, 50) // warm
			rdb.ConfigResetStat(ctx)
			cpu0 := bench.RedisCPU(rdb)
			t0 := time.Now()
			run(ctx, rdb, v, keys, *calls)
			el := time.Since(t0)
			cpu := (bench.RedisCPU(rdb) - cpu0) * 1e6
			us := bench.CommandMicros(rdb, "evalsha")
			keep(v.name, us/float64(*calls**n))
			fmt.Printf("round %d %-40s %7.2f µs/entry  %7.1f µs/call  (wall %.1f µs/call, redis cpu %.2f µs/entry)\n", r+1, v.name, us/float64(*calls**n), us/float64(*calls), float64(el.Microseconds())/float64(*calls), cpu/float64(*calls**n))
		}
		rdb.FlushAll(ctx)
		rl := redis_rate.NewLimiter(rdb)
		lim := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Second}
		for i := range 50 {
			_, _ = rl.Allow(ctx, keys[i%len(keys)], lim)
		}
		rdb.ConfigResetStat(ctx)
		for i := range *calls * *n {
			if _, err := rl.Allow(ctx, keys[i%len(keys)], lim); err != nil {
				panic(err)
			}
		}
		us := bench.CommandMicros(rdb, "evalsha")
		keep("redis_rate", us/float64(*calls**n))
		fmt.Printf("round %d %-40s %7.2f µs/decision\n", r+1, "redis_rate", us/float64(*calls**n))
	}
	fmt.Println("best of the rounds (µs per entry; redis_rate per decision):")
	for _, v := range vs {
		fmt.Printf("  %-40s %7.2f  (%.2f× redis_rate's)\n", v.name, best[v.name], best[v.name]/best["redis_rate"])
	}
	fmt.Printf("  %-40s %7.2f\n", "redis_rate", best["redis_rate"])
}

var pos int

func run(ctx context.Context, rdb *redis.Client, v variant, peers []string, ncalls int) {
	for range ncalls {
		ks := make([]string, 0, 2**n)
		args := []any{"", "bench-inst", 10000, *n}
		for e := range *n {
			p := peers[pos%len(peers)]
			pos++
			tag := "ld:{" + p + "|general}"
			ref := 1
			if e == 0 {
				ref = 0
			}
			// One argument an entry (decide.lua's header): the op, the
			// number of its params block (0: they follow), the numbers
			// as little-endian doubles, then the member.
			var a []byte
			switch *kind {
			case "gcra", "token_bucket":
				k := int64(2)
				if *kind == "token_bucket" {
					k = 1
				}
				ks = append(ks, tag+":s")
				a = append(a, 'a', byte(ref))
				if ref == 0 {
					a = nums(a, k, 1_000_000, 1000, 1_000_000, 1<<30, 0)
				}
				a = nums(a, 0, 0)
			case "hybrid":
				ks = append(ks, tag+":t", tag+":0:hw")
				a = append(a, 'h', byte(ref))
				if ref == 0 {
					a = nums(a, 0, 0, 30000, 0, 0, 0, 0, 0, 120000, 0, 0, 0,
						120000, 1<<30, 0, 1000, 1<<30, 1<<30, 2000, 0)
				}
				a = nums(a, 0)
				a = append(a, "bench-inst:"+strconv.Itoa(pos)...)
			default:
				panic("unknown -algo " + *kind)
			}
			args = append(args, a)
		}
		res, err := rdb.EvalSha(ctx, v.sha, ks, args...).Result()
		if err != nil {
			panic(fmt.Sprint(v.name, ": ", err))
		}
		if a, ok := res.([]any); ok {
			if r, ok := a[0].([]any); ok && r[0] == int64(-1) {
				panic(fmt.Sprint(v.name, ": ", r))
			}
		}
	}
}

// nums appends vs to a as decide.lua reads an entry's numbers.
func nums(a []byte, vs ...int64) []byte {
	for _, v := range vs {
		a = binary.LittleEndian.AppendUint64(a, math.Float64bits(float64(v)))
	}
	return a
}
