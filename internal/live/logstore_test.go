package live

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

func TestLoggedStore(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), now, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	lv, err := New(context.Background(), lim, LoggedStore(NewMemoryStore(), log), cfg, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lv.PatchGroup(ctx, "token:ops", "general", []byte(`{"leaky_limit": 900}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := lv.PatchGroup(ctx, "token:ops", "general", []byte(`{"leaky_limit": -5}`)); err == nil {
		t.Fatal("a bad edit was accepted")
	}
	if _, err := lv.AddExemption(ctx, "api-token", Exemption{Kind: DenyPeer, Value: "203.0.113.66", Note: "scraper", Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := lv.Expire(ctx, now.Add(time.Hour)); n != 1 || err != nil {
		t.Fatalf("Expire: %d %v", n, err)
	}
	want := `level=INFO msg="live edit" actor=token:ops action=group.patch target=general old="{\"leaky_limit\":450}" new="{\"leaky_limit\":900}"
level=INFO msg="live edit" actor=api-token action=exemption.add target=deny_peer new=203.0.113.66 note=scraper expires=2026-11-23T11:00:00.000Z
level=INFO msg="live edit" actor=limiterd action=exemption.expire target=deny_peer old=203.0.113.66 note=scraper expires=2026-11-23T11:00:00.000Z
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(buf.String(), "-5") {
		t.Error("a refused edit was logged")
	}
}
