package bench

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisInfo returns the fields of one INFO section of rdb, by name.
func redisInfo(rdb *redis.Client, section string) map[string]string {
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		panic(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// RedisCPU returns the CPU time, seconds, redis-server has used (INFO cpu:
// used_cpu_user + used_cpu_sys). Unlike the commands' time it does not
// count the time the server was preempted, and it counts the reading and
// writing of the connections.
func RedisCPU(rdb *redis.Client) float64 {
	f := redisInfo(rdb, "cpu")
	user, _ := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, _ := strconv.ParseFloat(f["used_cpu_sys"], 64)
	return user + sys
}

// CommandMicros returns the microseconds Redis spent, since CONFIG
// RESETSTAT, in the commands cmds (lower case; a script's counts the
// commands it runs), from INFO commandstats.
func CommandMicros(rdb *redis.Client, cmds ...string) float64 {
	f := redisInfo(rdb, "commandstats")
	var total float64
	for _, c := range cmds {
		for _, kv := range strings.Split(f["cmdstat_"+c], ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "usec" {
				n, _ := strconv.ParseFloat(v, 64)
				total += n
			}
		}
	}
	return total
}
