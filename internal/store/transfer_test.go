package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// populate fills db with some of everything.
func populate(t *testing.T, db *store.DB) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.SetOverride(ctx, "chunk", live.Override{"leaky_limit": int64(900), "mode": "dry_run"}, audit("group.patch", "chunk", map[string]any{"leaky_limit": 6000}, map[string]any{"leaky_limit": 900})))
	must(db.SetOverride(ctx, "general", live.Override{"is_manual_reduction_disabled": true}, audit("group.patch", "general", nil, nil)))
	must(db.AddExemption(ctx, live.Exemption{Kind: live.DenyPeer, Value: "2001:db8::/32", Note: "abuse"}, audit("exemption.add", "deny_peer", nil, "2001:db8::/32")))
	must(db.AddExemption(ctx, live.Exemption{Kind: live.ExemptPath, Value: "re:^/info$"}, audit("exemption.add", "exempt_path", nil, "re:^/info$")))
	must(db.SetDisabled(ctx, true, audit("limiter.switch", "global", "on", "off")))
	must(db.Record(ctx, audit("peer.forget", "10.0.0.1", nil, nil)))
	_, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Enabled: false, Groups: groups(), Changed: []limiter.EntrySnapshot{
		tokenEntry(peerAt("10.0.0.1"), "general", 5),
		windowEntry(peerAt("2001:db8:1::7"), "chunk"),
		tokenEntry(peer.OpaqueKey("@unix"), "general", 450),
		tokenEntry(peerAt("2001:db8:2::1"), "general", 1),
	}})
	must(err)
	must(db.SaveThrottle(ctx, []byte(fmt.Sprintf(`{"taken_at_ms":%d,"enabled":true,"keys":[{"peer":"peer-1.example:1984","type":"chunk","timestamps":[%d,%d]}]}`,
		t0.UnixMilli(), t0.UnixMilli()-2000, t0.UnixMilli()-1000))))
}

func mustExport(t *testing.T, db *store.DB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := db.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportImportRoundTrip(t *testing.T) {
	a := MustOpenDB(t)
	populate(t, a)
	out := mustExport(t, a)

	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("export is not JSON: %v", err)
	}
	for _, k := range []string{"schema_version", "live", "audit", "snapshot", "throttle"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("export has no %q", k)
		}
	}
	if !strings.Contains(string(out), `"peer": "2001:db8:1::/64"`) {
		t.Errorf("peers are not exported in text form:\n%s", out)
	}

	b := MustOpenDB(t)
	if err := b.Record(ctx, audit("to be replaced", "", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Import(ctx, bytes.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if again := mustExport(t, b); !bytes.Equal(again, out) {
		t.Errorf("export after import differs:\n%s\nwant\n%s", again, out)
	}
	liveA, _ := a.LoadLive(ctx)
	liveB, _ := b.LoadLive(ctx)
	if !reflect.DeepEqual(liveA, liveB) {
		t.Errorf("live state: %#v, want %#v", liveB, liveA)
	}
	snapA, _, _ := a.LoadSnapshot(ctx)
	snapB, _, _ := b.LoadSnapshot(ctx)
	if !reflect.DeepEqual(snapA, snapB) {
		t.Errorf("snapshot: %+v, want %+v", snapB, snapA)
	}
	auditA, _ := a.Audit(ctx, 100, 0)
	auditB, _ := b.Audit(ctx, 100, 0)
	mustEqualJSON(t, "audit", auditB, auditA)
	thA, _, _ := a.LoadThrottle(ctx)
	thB, okB, _ := b.LoadThrottle(ctx)
	if !okB {
		t.Error("throttle: not imported")
	}
	mustEqualJSON(t, "throttle", json.RawMessage(thB), json.RawMessage(thA))
	// New audit entries continue the imported ids; new exemptions go last.
	if err := b.AddExemption(ctx, live.Exemption{Kind: live.ExemptPeer, Value: "10.0.0.0/8"}, audit("exemption.add", "exempt_peer", nil, "10.0.0.0/8")); err != nil {
		t.Fatal(err)
	}
	if last, _ := b.Audit(ctx, 1, 0); last[0].ID != auditA[0].ID+1 {
		t.Errorf("audit id after import %d, want %d", last[0].ID, auditA[0].ID+1)
	}
	if st, _ := b.LoadLive(ctx); st.Exemptions[len(st.Exemptions)-1].Value != "10.0.0.0/8" {
		t.Errorf("exemption added after import is not last: %+v", st.Exemptions)
	}
}

func TestExportEmpty(t *testing.T) {
	db := MustOpenDB(t)
	out := mustExport(t, db)
	b := MustOpenDB(t)
	if err := b.Import(ctx, bytes.NewReader(out)); err != nil {
		t.Fatalf("import of an empty export: %v\n%s", err, out)
	}
	if again := mustExport(t, b); !bytes.Equal(again, out) {
		t.Errorf("export after import differs:\n%s\nwant\n%s", again, out)
	}
}

func TestImportBad(t *testing.T) {
	src := MustOpenDB(t)
	populate(t, src)
	good := mustExport(t, src)
	// edit returns good with the JSON at path (dotted, numeric for arrays)
	// set to v (delete when v is nil).
	edit := func(path string, v any) string {
		var doc any
		if err := json.Unmarshal(good, &doc); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(path, ".")
		cur := doc
		for i, p := range parts {
			last := i == len(parts)-1
			switch c := cur.(type) {
			case map[string]any:
				if last {
					if v == nil {
						delete(c, p)
					} else {
						c[p] = v
					}
				}
				cur = c[p]
			case []any:
				var n int
				for _, r := range p {
					n = n*10 + int(r-'0')
				}
				if last {
					c[n] = v
				}
				cur = c[n]
			}
		}
		b, _ := json.Marshal(doc)
		return string(b)
	}
	dup := func(list string) string {
		var doc map[string]any
		json.Unmarshal(good, &doc)
		cur := any(doc)
		for _, p := range strings.Split(list, ".") {
			cur = cur.(map[string]any)[p]
		}
		l := cur.([]any)
		parent := any(doc)
		parts := strings.Split(list, ".")
		for _, p := range parts[:len(parts)-1] {
			parent = parent.(map[string]any)[p]
		}
		parent.(map[string]any)[parts[len(parts)-1]] = append(l, l[0])
		b, _ := json.Marshal(doc)
		return string(b)
	}
	cases := []struct {
		name, doc, want string
	}{
		{"empty", "", "empty document"},
		{"not JSON", "{\n  \"schema_version\": 2,\n  oops", "not JSON: line 3"},
		{"trailing data", string(good) + "{}", "data after the JSON document"},
		{"unknown field", edit("extra", 1), `unknown field "extra"`},
		{"unknown nested field", edit("snapshot.entries.0.colour", "red"), `unknown field "colour"`},
		{"no schema version", edit("schema_version", nil), "schema_version: missing"},
		{"newer schema", edit("schema_version", 99), "schema_version: 99 is newer than this limiterd"},
		{"wrong type", edit("live.disabled", "yes"), "live.disabled"},
		{"override key", edit("live.overrides.chunk.leaky_limt", 5), "live.overrides.chunk.leaky_limt: unknown key"},
		{"override value", edit("live.overrides.chunk.leaky_limit", 1.5), "live.overrides.chunk.leaky_limit: must be an integer"},
		{"override mode", edit("live.overrides.chunk.mode", "loud"), "live.overrides.chunk.mode"},
		{"exemption kind", edit("live.exemptions.1.kind", "allow"), "live.exemptions[1].kind"},
		{"exemption value", edit("live.exemptions.0.value", "not-an-ip"), "live.exemptions[0].value"},
		{"duplicate exemption", dup("live.exemptions"), "live.exemptions[2]: deny_peer \"2001:db8::/32\" is also live.exemptions[0]"},
		{"audit id 0", edit("audit.2.id", 0), "audit[2].id: missing or 0"},
		{"duplicate audit id", dup("audit"), "audit[6].id: 1 is also audit[0]'s"},
		{"group interval", edit("snapshot.groups.1.leaky.interval_ms", 0), "snapshot.groups[1].leaky: not a usable schedule"},
		{"huge group interval", edit("snapshot.groups.1.leaky.interval_ms", 4000000000), "snapshot.groups[1].leaky: not a usable schedule: intervals must be from 1 to 2147483647 ms"},
		{"override range", edit("live.overrides.chunk.leaky_limit", -5), "live.overrides.chunk.leaky_limit: must be an integer ≥ 0, got -5"},
		{"override zero", edit("live.overrides.chunk.concurrency_limit", 0), "live.overrides.chunk.concurrency_limit: must be an integer > 0, got 0"},
		{"group name", edit("snapshot.groups.0.name", ""), "snapshot.groups[0].name: empty group name"},
		{"no snapshot time", edit("snapshot.taken_at_ms", nil), "snapshot.taken_at_ms: missing or not > 0"},
		{"snapshot time 0", edit("snapshot.taken_at_ms", 0), "snapshot.taken_at_ms: missing or not > 0"},
		{"duplicate group", dup("snapshot.groups"), "snapshot.groups[2].name: \"chunk\" is also snapshot.groups[0]'s"},
		{"entry peer", edit("snapshot.entries.0.peer", "10.0.0.300"), "10.0.0.300"},
		{"entry without peer", edit("snapshot.entries.0.peer", nil), "snapshot.entries[0].peer: missing or invalid"},
		{"entry group", edit("snapshot.entries.1.group", "a\x00b"), "snapshot.entries[1].group"},
		{"entry tokens", edit("snapshot.entries.3.tokens", -1), "snapshot.entries[3].tokens: -1 is negative"},
		{"throttle peer", edit("throttle.keys.0.peer", ""), "throttle.keys[0].peer: missing"},
		{"throttle timestamps", edit("throttle.keys.0.timestamps", []any{5, 3}), "throttle.keys[0].timestamps: not in ascending order"},
		{"throttle type", edit("throttle.keys.0.type", 7), "throttle.keys.type"},
		{"duplicate entry", dup("snapshot.entries"), "snapshot.entries[4]: (2001:db8:1::/64, chunk) is also snapshot.entries[0]"},
	}
	db := MustOpenDB(t)
	populate(t, db)
	if err := db.Record(ctx, audit("marker", "", nil, nil)); err != nil {
		t.Fatal(err)
	}
	before := mustExport(t, db)
	for _, c := range cases {
		err := db.Import(ctx, strings.NewReader(c.doc))
		if err == nil {
			t.Errorf("%s: Import succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %T does not name what is wrong (a *limiter.FieldError)", c.name, err)
		}
		if after := mustExport(t, db); !bytes.Equal(after, before) {
			t.Fatalf("%s: a failed Import changed the database", c.name)
		}
	}
}
