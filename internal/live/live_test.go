package live_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// failingStore is a MemoryStore whose writes fail while fail is set.
type failingStore struct {
	*live.MemoryStore
	fail bool
}

var errDisk = errors.New("disk full")

func (f *failingStore) SetOverride(ctx context.Context, g string, o live.Override, a live.AuditEntry) error {
	if f.fail {
		return errDisk
	}
	return f.MemoryStore.SetOverride(ctx, g, o, a)
}

func (f *failingStore) SetDisabled(ctx context.Context, d bool, a live.AuditEntry) error {
	if f.fail {
		return errDisk
	}
	return f.MemoryStore.SetDisabled(ctx, d, a)
}

// switchSpy records what the global switch told it.
type switchSpy struct{ calls []bool }

func (s *switchSpy) SetEnabled(on bool) { s.calls = append(s.calls, on) }

func newLive(t *testing.T, st live.Store) (*live.Live, *limiter.Limiter) {
	t.Helper()
	t0 := time.UnixMilli(1_700_000_000_000)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := live.New(context.Background(), lim, st, cfg, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return lv, lim
}

// TestLiveStoresBeforeApplying: an edit the store refuses changes nothing,
// neither the limiter nor what Live reports.
func TestLiveStoresBeforeApplying(t *testing.T) {
	st := &failingStore{MemoryStore: live.NewMemoryStore(), fail: true}
	lv, lim := newLive(t, st)
	ctx := context.Background()
	if _, err := lv.PatchGroup(ctx, "test", "general", []byte(`{"leaky_limit": 9}`)); !errors.Is(err, errDisk) {
		t.Fatalf("PatchGroup with the store failing: %v, want the store's error", err)
	}
	g, _ := lim.GroupID("general")
	if s, _ := lim.Settings(g); s.LeakyLimit != 450 {
		t.Errorf("leaky_limit %d applied though the store refused it", s.LeakyLimit)
	}
	if v, _ := lv.Group("general"); v.Override != nil {
		t.Errorf("override %v reported though the store refused it", v.Override)
	}
	st.fail = false
	if _, err := lv.PatchGroup(ctx, "test", "general", []byte(`{"leaky_limit": 9}`)); err != nil {
		t.Fatal(err)
	}
	if s, _ := lim.Settings(g); s.LeakyLimit != 9 {
		t.Errorf("leaky_limit %d after a stored edit, want 9", s.LeakyLimit)
	}
}

// TestLiveFollow: what follows the global switch is set when it starts to
// follow and on every change that was stored, never on one that was not.
func TestLiveFollow(t *testing.T) {
	st := &failingStore{MemoryStore: live.NewMemoryStore()}
	lv, lim := newLive(t, st)
	ctx := context.Background()
	spy := &switchSpy{}
	lv.Follow(spy)
	if err := lv.SetEnabled(ctx, "test", false); err != nil {
		t.Fatal(err)
	}
	st.fail = true
	if err := lv.SetEnabled(ctx, "test", true); !errors.Is(err, errDisk) {
		t.Fatalf("SetEnabled with the store failing: %v", err)
	}
	if want := []bool{true, false}; len(spy.calls) != 2 || spy.calls[0] != want[0] || spy.calls[1] != want[1] {
		t.Errorf("the follower was told %v, want %v", spy.calls, want)
	}
	if lim.Enabled() || lv.Enabled() {
		t.Error("the switch turned on though the store refused it")
	}
}
