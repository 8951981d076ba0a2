package bench_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// BenchmarkLargeRouteTable is a table of n glob and n regular-expression
// patterns (each rule its own literal first segment): the heap it holds
// and what a request costs whose path no pattern matches, which is tried
// against every regular expression. The shipped table has 29 globs and no
// regular expression.
func BenchmarkLargeRouteTable(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("globs=%d/regexps=%d", n, n), func(b *testing.B) {
			var rules []limiter.RouteRule
			for i := range n {
				rules = append(rules,
					limiter.RouteRule{Group: "general", Paths: []string{fmt.Sprintf("/g%d/*/x", i)}},
					limiter.RouteRule{Group: "general", Paths: []string{fmt.Sprintf("re:^/r%d/[0-9]+$", i)}})
			}
			before := heap()
			t, err := limiter.NewRouteTable(rules)
			if err != nil {
				b.Fatal(err)
			}
			mib := float64(heap()-before) / (1 << 20)
			defer b.ReportMetric(mib, "table-MiB") // after the loop: ResetTimer drops metrics
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if t.Match("GET", "/unmatched/path") != -1 {
					b.Fatal("matched")
				}
			}
			runtime.KeepAlive(t)
		})
	}
}
