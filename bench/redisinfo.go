package bench

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisCPU returns the CPU time, seconds, redis-server has used (INFO cpu:
// used_cpu_user + used_cpu_sys). Unlike the commands' time it does not
// count the time the server was preempted, and it counts the reading and
// writing of the connections.
func RedisCPU(rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		panic(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}
