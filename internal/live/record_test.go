package live_test

import (
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
)

// TestCheckField: every field EncodeFields writes passes, removals of
// them too; a field that is not one limiterd writes is refused alone,
// named.
func TestCheckField(t *testing.T) {
	st := live.LiveState{
		Overrides: map[string]live.Override{"general": {"leaky_limit": int64(9), "mode": "dry_run"}},
		Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "203.0.113.0/24", Note: "abuse"},
			{Kind: live.ExemptPeer, Value: "2001:db8::1", Expires: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
			{Kind: live.ExemptPath, Value: "/info"},
		},
		Disabled: true,
	}
	fields := live.EncodeFields(st)
	if len(fields) != 5 {
		t.Fatalf("%d fields: %v", len(fields), fields)
	}
	for name, value := range fields {
		if err := live.CheckField(name, value, false); err != nil {
			t.Errorf("%s = %s: %v", name, value, err)
		}
		if err := live.CheckField(name, "", true); err != nil {
			t.Errorf("removal of %s: %v", name, err)
		}
	}
	deny, _ := live.ExemptionField(st.Exemptions[0])
	for _, c := range []struct {
		name, value string
		removed     bool
		says        string
	}{
		{"bogus", "x", false, `"bogus"`},
		{"bogus", "", true, `"bogus"`},
		{"switch", "on", false, `"switch"`},
		{"group:", "", true, "no group name"},
		{"group:general", `{"no_such_key":1}`, false, "no_such_key"},
		{"group:general", `{"leaky_limit": 9}`, false, "not as limiterd writes it"},
		{"exemption:deny_peer:1.2", "", true, `"exemption:deny_peer:1.2"`},
		{"exemption:deny_peer:203.0.113.0/24 ", "", true, "not the name"},
		{"exemption:deny_peer:192.0.2.1", fields[deny], false, "value is that of field"},
		{deny, "{", false, deny},
	} {
		err := live.CheckField(c.name, c.value, c.removed)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckField(%q, %q, %v) = %v, want an error saying %s", c.name, c.value, c.removed, err, c.says)
		}
	}
}
