// Command liveread measures what cluster mode's reads of the shared live
// edits cost Redis (docs/benchmarks.md, "Reading the live edits"): with
// -records deny entries in ld:{cfg}:live, the time Redis spends (SLOWLOG,
// µs, during which it serves nothing else) on the full read as it is made
// now (GET and HGETALL in one MULTI), on the script that read them before
// (copying every record into a Lua table), and on the peek a poll at rest
// makes (GET and HLEN in one script), rounds alternated (each op on a
// fresh Lua interpreter, SCRIPT FLUSH, three times in a row, the first not
// counted). Give it a
// redis-server of its own: it writes the two keys and changes the slow
// log's settings.
//
//	redis-server --port 6597 --save '' --appendonly no &
//	go -C bench run ./cmd/liveread -addr 127.0.0.1:6597
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

const (
	keyVer  = "ld:{cfg}:ver"
	keyLive = "ld:{cfg}:live"
)

// formerRead is the script that read the live edits before the MULTI.
const formerRead = `local out = {tonumber(redis.call('GET', KEYS[1]) or '0')}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all do out[#out + 1] = all[i] end
return out`

func main() {
	addr := flag.String("addr", "127.0.0.1:6597", "redis-server address (one of its own)")
	records := flag.Int("records", 14_000, "deny entries in the shared live state")
	rounds := flag.Int("rounds", 5, "rounds")
	peekPath := flag.String("peek", "../internal/cluster/lua/cfg_peek.lua", "the peek script")
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1})
	defer rdb.Close()
	peekSrc, err := os.ReadFile(*peekPath)
	if err != nil {
		fail(err)
	}
	rdb.Del(ctx, keyVer, keyLive)
	p := rdb.Pipeline()
	for i := range *records {
		p.HSet(ctx, keyLive, fmt.Sprintf("exemption:deny:10.%d.%d.0/24", i>>8&255, i&255),
			fmt.Sprintf("%013d.%06d.instance-1 s2027-01-01T00:00:00Z an operator's note", 1_700_000_000_000+i, 0))
	}
	p.Set(ctx, keyVer, *records, 0)
	if _, err := p.Exec(ctx); err != nil {
		fail(err)
	}
	rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0")
	rdb.ConfigSet(ctx, "slowlog-max-len", "1024")
	defer rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000")

	ops := []struct {
		name string
		run  func() error
		// the slow log's entries that make up the op's time
		counts func(cmd string) bool
	}{
		{"full read now (MULTI: GET, HGETALL)", func() error {
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Get(ctx, keyVer)
				p.HGetAll(ctx, keyLive)
				return nil
			})
			return err
		}, func(cmd string) bool { return cmd == "get" || cmd == "hgetall" || cmd == "exec" }},
		{"full read before (a script copying the records)", func() error {
			return rdb.Eval(ctx, formerRead, []string{keyVer, keyLive}).Err()
		}, func(cmd string) bool { return cmd == "eval" }},
		{"peek at rest (a script: GET, HLEN)", func() error {
			return rdb.Eval(ctx, string(peekSrc), []string{keyVer, keyLive}).Err()
		}, func(cmd string) bool { return cmd == "eval" }},
	}
	got := make([][]int64, len(ops))
	fmt.Printf("%d records; Redis's time per read, µs (SLOWLOG), %d rounds alternated, 2 reads counted each\n", *records, *rounds)
	for r := range *rounds {
		for j := range ops {
			k := (j + r) % len(ops)
			// a fresh Lua interpreter (the garbage of the op before would
			// be collected during this one's scripts), then three in a
			// row, the first not counted (a script's first call compiles
			// it)
			rdb.ScriptFlush(ctx)
			for n := range 3 {
				rdb.SlowLogReset(ctx)
				if err := ops[k].run(); err != nil {
					fail(err)
				}
				log, err := rdb.SlowLogGet(ctx, 100).Result()
				if err != nil {
					fail(err)
				}
				var us int64
				for _, e := range log {
					if len(e.Args) > 0 && ops[k].counts(strings.ToLower(e.Args[0])) {
						us += e.Duration.Microseconds()
					}
				}
				if n > 0 {
					got[k] = append(got[k], us)
				}
			}
		}
	}
	for j, op := range ops {
		xs := slices.Clone(got[j])
		slices.Sort(xs)
		fmt.Printf("%-50s min %7d  median %7d  max %7d   %v\n", op.name, xs[0], xs[len(xs)/2], xs[len(xs)-1], got[j])
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
