package live_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// BenchmarkLiveAddExemptionAt14000: adding and removing one deny entry
// beside 14 000 live ones, on the memory store: what an edit costs Live
// and the limiter, apart from the database's write.
func BenchmarkLiveAddExemptionAt14000(b *testing.B) {
	t0 := time.UnixMilli(1_700_000_000_000)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st := live.NewMemoryStore()
	for i := range 14000 {
		e := live.Exemption{Kind: live.DenyPeer, Value: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
		if err := st.AddExemption(ctx, e, live.AuditEntry{}); err != nil {
			b.Fatal(err)
		}
	}
	lv, err := live.New(ctx, lim, st, cfg, func() time.Time { return t0 })
	if err != nil {
		b.Fatal(err)
	}
	e := live.Exemption{Kind: live.DenyPeer, Value: "192.0.2.1"}
	for b.Loop() {
		if _, err := lv.AddExemption(ctx, "bench", e); err != nil {
			b.Fatal(err)
		}
		if err := lv.RemoveExemption(ctx, "bench", e); err != nil {
			b.Fatal(err)
		}
	}
}
