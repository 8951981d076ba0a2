package live_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
)

type pubSpy struct{ got []live.LiveState }

func (p *pubSpy) Publish(_, new live.LiveState) { p.got = append(p.got, new) }

// TestFieldsRoundTrip: the live state survives its flat form, and a field
// that does not validate is refused with its name.
func TestFieldsRoundTrip(t *testing.T) {
	st := live.LiveState{
		Overrides: map[string]live.Override{"general": {"leaky_limit": int64(9), "mode": "dry_run"}},
		Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "203.0.113.0/24", Note: "abuse"},
			{Kind: live.ExemptPath, Value: "/info"},
		},
		Disabled: true,
	}
	back, err := live.DecodeFields(live.EncodeFields(st))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.EncodeFields(back), live.EncodeFields(st)) || !back.Disabled || len(back.Exemptions) != 2 {
		t.Fatalf("round trip: %+v", back)
	}
	for field, value := range map[string]string{
		"group:general":            `{"leaky_limit": "x"}`,
		"exemption:deny_peer:nope": `{"kind":"deny_peer","value":"nope"}`,
		"switch":                   "on",
		"colour":                   "red",
	} {
		if _, err := live.DecodeFields(live.Fields{field: value}); err == nil {
			t.Errorf("%s = %s accepted", field, value)
		}
	}
}

// TestApplyRemote: another instance's state is stored and applied, audited
// as the cluster's, and not published again; local edits are published.
func TestApplyRemote(t *testing.T) {
	st := live.NewMemoryStore()
	lv, lim := newLive(t, st)
	pub := &pubSpy{}
	lv.SetPublisher(pub)
	ctx := context.Background()
	if _, err := lv.PatchGroup(ctx, "alice", "chunk", []byte(`{"leaky_limit": 7}`)); err != nil {
		t.Fatal(err)
	}
	if len(pub.got) != 1 || pub.got[0].Overrides["chunk"]["leaky_limit"] != int64(7) {
		t.Fatalf("published %+v", pub.got)
	}
	remote := live.LiveState{
		Overrides:  map[string]live.Override{"general": {"leaky_limit": int64(9)}},
		Exemptions: []live.Exemption{{Kind: live.DenyPeer, Value: "203.0.113.9"}},
		Disabled:   true,
	}
	if err := lv.ApplyRemote(ctx, "b", func(live.LiveState) (live.LiveState, error) { return remote, nil }); err != nil {
		t.Fatal(err)
	}
	if len(pub.got) != 1 {
		t.Fatalf("a remote edit was published again: %+v", pub.got)
	}
	g, _ := lim.GroupID("general")
	c, _ := lim.GroupID("chunk")
	if s, _ := lim.Settings(g); s.LeakyLimit != 9 {
		t.Errorf("general leaky_limit %d, want 9", s.LeakyLimit)
	}
	if s, _ := lim.Settings(c); s.LeakyLimit == 7 {
		t.Error("chunk keeps an override the remote state dropped")
	}
	if lim.Enabled() {
		t.Error("the switch stayed on")
	}
	stored, _ := st.LoadLive(ctx)
	if !reflect.DeepEqual(live.EncodeFields(stored), live.EncodeFields(remote)) {
		t.Errorf("stored %+v, want %+v", stored, remote)
	}
	audit, _ := lv.Audit(ctx, 10, 0)
	remoteEntries := 0
	for _, a := range audit {
		if a.Actor == "cluster:b" {
			remoteEntries++
		}
	}
	if remoteEntries != 4 { // general patched, chunk reset, a deny added, the switch
		t.Errorf("%d audit entries by cluster:b, want 4: %+v", remoteEntries, audit)
	}
	// The same state again changes nothing and audits nothing.
	if err := lv.ApplyRemote(ctx, "b", func(live.LiveState) (live.LiveState, error) { return remote, nil }); err != nil {
		t.Fatal(err)
	}
	if again, _ := lv.Audit(ctx, 10, 0); len(again) != len(audit) {
		t.Errorf("an unchanged state was audited: %d entries, then %d", len(audit), len(again))
	}
	// A state that does not validate here changes nothing.
	bad := live.LiveState{Overrides: map[string]live.Override{"general": {"leaky_tick_interval": int64(0)}}}
	if err := lv.ApplyRemote(ctx, "b", func(live.LiveState) (live.LiveState, error) { return bad, nil }); err == nil {
		t.Fatal("an invalid remote state was applied")
	}
	if s, _ := lim.Settings(g); s.LeakyLimit != 9 {
		t.Errorf("general leaky_limit %d after a refused state", s.LeakyLimit)
	}
}
