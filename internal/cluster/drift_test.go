package cluster_test

import (
	"context"
	"testing"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestDrift: two instances whose file settings for a shared group differ
// each see it: the group, the other instance and its fingerprint (a group
// only one of them has is not a drift).
func TestDrift(t *testing.T) {
	srv := redistest.Start(t)
	a, _, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed})
	b, _, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed})
	g := group(0, 1000, 450, 30000, 450, 150, 120000, 120000)
	other := g
	other.LeakyLimit = 10
	sa := map[string]limiter.GroupSettings{"general": g, "mine": g}
	sb := map[string]limiter.GroupSettings{"general": other}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.RunDrift(ctx, func() map[string]limiter.GroupSettings { return sa })
	go b.RunDrift(ctx, func() map[string]limiter.GroupSettings { return sb })
	waitFor(t, "drift seen by both", func() bool {
		da, db := a.Drifts(), b.Drifts()
		return len(da) == 1 && len(db) == 1 && da[0].Group == "general" && da[0].Others[b.Instance()] == cluster.Fingerprint(other) &&
			db[0].Others[a.Instance()] == cluster.Fingerprint(g)
	})
	if s := a.Drifts()[0].String(); s != "general (instances "+b.Instance()+")" {
		t.Fatalf("%q", s)
	}
}
