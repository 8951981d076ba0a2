package live_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// newAlgoLive returns a Live over the Arweave groups plus "api", a token
// bucket of 10 per second, on a MemoryStore.
func newAlgoLive(t *testing.T) (*live.Live, *limiter.Limiter, *live.MemoryStore) {
	t.Helper()
	groups := limiter.ArweaveGroups()
	api := groups[limiter.GroupGeneral]
	api.Algorithm, api.Limit, api.Period = algo.TokenBucket, 10, 1000
	groups["api"] = api
	base := limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), t0, base)
	if err != nil {
		t.Fatal(err)
	}
	st := live.NewMemoryStore()
	c, err := live.New(context.Background(), lim, st, base, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return c, lim, st
}

func TestParseOverrideAlgorithmKeys(t *testing.T) {
	for _, c := range []struct{ body, field, problem string }{
		{`{"algorithm": "leaky"}`, "algorithm", "is not one of hybrid, token_bucket"},
		{`{"algorithm": 1}`, "algorithm", "must be a string"},
		{`{"algorithm": null}`, "algorithm", "must be a string"},
		{`{"limit": "10"}`, "limit", "must be an integer"},
		{`{"period": 1.5}`, "period", "must be an integer"},
		{`{"burst": true}`, "burst", "must be an integer"},
	} {
		_, err := live.ParseOverride([]byte(c.body))
		fe, ok := err.(*limiter.FieldError)
		if !ok || fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
			t.Errorf("%s: %v, want a FieldError of %q saying %q", c.body, err, c.field, c.problem)
		}
	}
	o, err := live.ParseOverride([]byte(`{"algorithm": "gcra", "limit": 100, "period": 60000, "burst": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	s := o.Over(limiter.ArweaveGroups()["general"])
	if o["algorithm"] != "gcra" || s.Algorithm != algo.GCRA || s.Limit != 100 || s.Period != 60000 || s.Burst != 0 {
		t.Errorf("%v %+v", o, s)
	}
}

// Bad values through a live edit: refused naming the key, nothing stored.
func TestPatchAlgorithmBadInput(t *testing.T) {
	c, lim, st := newAlgoLive(t)
	for _, tc := range []struct{ group, body, key, has string }{
		{"api", `{"limit": 0}`, "limit", "from 1"},
		{"api", `{"limit": -3}`, "limit", "got -3"},
		{"api", `{"period": 4611686018427387904}`, "period", "2147483647"},
		{"api", `{"algorithm": "fixed_window", "burst": 5}`, "burst", "fixed_window has no burst"},
		{"api", `{"algorithm": "sliding_log", "limit": 1000000}`, "limit", "at most 10000"},
		{"chunk", `{"algorithm": "gcra"}`, "limit", "required by algorithm gcra"},
		{"chunk", `{"burst": 3}`, "burst", "hybrid has no burst"},
	} {
		_, err := c.PatchGroup(context.Background(), "tester", tc.group, []byte(tc.body))
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != limiter.GroupField(tc.group, tc.key) || !strings.Contains(fe.Problem, tc.has) {
			t.Errorf("%s %s: %v, want http_api.limiter.%s.%s saying %q", tc.group, tc.body, err, tc.group, tc.key, tc.has)
		}
	}
	if a, _ := st.Audit(context.Background(), 10, 0); len(a) != 0 {
		t.Errorf("refused edits were audited: %+v", a)
	}
	if s, _ := lim.Settings(mustID(t, lim, "api")); s.Algorithm != algo.TokenBucket || s.Limit != 10 {
		t.Errorf("refused edits changed the limiter: %+v", s)
	}
}

func mustID(t *testing.T, lim *limiter.Limiter, name string) limiter.GroupID {
	t.Helper()
	id, ok := lim.GroupID(name)
	if !ok {
		t.Fatalf("no group %s", name)
	}
	return id
}

// A live change of algorithm drops the group's state and is audited as
// such; a change of limit keeps it; dropping the overrides back to the file
// value drops it again.
func TestPatchAlgorithmDropsState(t *testing.T) {
	c, lim, st := newAlgoLive(t)
	ctx := context.Background()
	api := mustID(t, lim, "api")
	for i := range 3 {
		p := netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", i))
		d := lim.Decide(t0, peer.Peer{Addr: p, Key: peer.KeyFromAddr(p, 64)}, api)
		d.Release()
	}
	if _, err := c.PatchGroup(ctx, "alice", "api", []byte(`{"limit": 20}`)); err != nil {
		t.Fatal(err)
	}
	if lim.Tracked() != 3 {
		t.Fatalf("a limit change dropped state: %d tracked", lim.Tracked())
	}
	v, err := c.PatchGroup(ctx, "alice", "api", []byte(`{"algorithm": "sliding_window", "period": 60000}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Effective.Algorithm != algo.SlidingWindow || v.Effective.Limit != 20 || v.Effective.Period != 60000 || lim.Tracked() != 0 {
		t.Fatalf("after the switch: %+v, %d tracked", v.Effective, lim.Tracked())
	}
	audit, _ := st.Audit(ctx, 10, 0)
	if len(audit) != 3 || audit[0].Action != "group.state_dropped" || audit[0].Target != "api" || audit[0].Actor != "alice" {
		t.Fatalf("audit %+v", audit)
	}
	old, _ := audit[0].Old.(map[string]any)
	nw, _ := audit[0].New.(map[string]any)
	if old["algorithm"] != "token_bucket" || old["entries"] != 3 || nw["algorithm"] != "sliding_window" {
		t.Fatalf("audit entry %+v", audit[0])
	}
	if audit[1].Action != "group.patch" {
		t.Fatalf("the patch itself: %+v", audit[1])
	}
	// Back to the file's token bucket: the sliding window state goes.
	d := lim.Decide(t0, peer.Peer{Addr: netip.MustParseAddr("192.0.2.9"), Key: peer.KeyFromAddr(netip.MustParseAddr("192.0.2.9"), 64)}, api)
	d.Release()
	if _, err := c.DeleteOverrides(ctx, "bob", "api"); err != nil {
		t.Fatal(err)
	}
	audit, _ = st.Audit(ctx, 1, 0)
	if audit[0].Action != "group.state_dropped" || audit[0].Actor != "bob" || lim.Tracked() != 0 {
		t.Fatalf("after the reset: %+v, %d tracked", audit[0], lim.Tracked())
	}
}
