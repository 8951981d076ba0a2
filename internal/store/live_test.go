package store_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

func TestLoadLiveEmpty(t *testing.T) {
	db := MustOpenDB(t)
	st, err := db.LoadLive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := live.LiveState{Overrides: map[string]live.Override{}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("LoadLive = %#v, want %#v", st, want)
	}
}

func TestLive(t *testing.T) {
	db := MustOpenDB(t)
	steps := []struct {
		name string
		do   func() error
		want live.LiveState
	}{
		{"override chunk", func() error {
			return db.SetOverride(ctx, "chunk", live.Override{"leaky_limit": int64(900), "mode": "dry_run", "is_manual_reduction_disabled": true}, audit("group.patch", "chunk", nil, nil))
		}, live.LiveState{Overrides: map[string]live.Override{"chunk": {"leaky_limit": int64(900), "mode": "dry_run", "is_manual_reduction_disabled": true}}}},
		{"override general", func() error {
			return db.SetOverride(ctx, "general", live.Override{"concurrency_limit": int64(10)}, audit("group.patch", "general", nil, nil))
		}, live.LiveState{Overrides: map[string]live.Override{
			"chunk":   {"leaky_limit": int64(900), "mode": "dry_run", "is_manual_reduction_disabled": true},
			"general": {"concurrency_limit": int64(10)},
		}}},
		{"replace chunk's", func() error {
			return db.SetOverride(ctx, "chunk", live.Override{"leaky_limit": int64(1)}, audit("group.patch", "chunk", nil, nil))
		}, live.LiveState{Overrides: map[string]live.Override{"chunk": {"leaky_limit": int64(1)}, "general": {"concurrency_limit": int64(10)}}}},
		{"delete chunk's", func() error {
			return db.SetOverride(ctx, "chunk", nil, audit("group.reset", "chunk", nil, nil))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}}},
		{"exemptions in order", func() error {
			for _, e := range []live.Exemption{
				{Kind: live.DenyPeer, Value: "9.9.9.9"},
				{Kind: live.ExemptPeer, Value: "10.0.0.0/8", Note: "office"},
				{Kind: live.ExemptPath, Value: "/info"},
			} {
				if err := db.AddExemption(ctx, e, audit("exemption.add", string(e.Kind), nil, e.Value)); err != nil {
					return err
				}
			}
			return nil
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPeer, Value: "10.0.0.0/8", Note: "office"},
			{Kind: live.ExemptPath, Value: "/info"},
		}}},
		{"re-adding replaces the note in place", func() error {
			e := live.Exemption{Kind: live.ExemptPeer, Value: "10.0.0.0/8", Note: "whole office"}
			return db.AddExemption(ctx, e, audit("exemption.add", string(e.Kind), nil, e.Value))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPeer, Value: "10.0.0.0/8", Note: "whole office"},
			{Kind: live.ExemptPath, Value: "/info"},
		}}},
		{"remove one (kind and value match, the note does not matter)", func() error {
			e := live.Exemption{Kind: live.ExemptPeer, Value: "10.0.0.0/8"}
			return db.RemoveExemption(ctx, e, audit("exemption.remove", string(e.Kind), e.Value, nil))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPath, Value: "/info"},
		}}},
		{"remove an absent one: no-op", func() error {
			e := live.Exemption{Kind: live.DenyPeer, Value: "10.0.0.0/8"}
			return db.RemoveExemption(ctx, e, audit("exemption.remove", string(e.Kind), e.Value, nil))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPath, Value: "/info"},
		}}},
		{"added after a removal: last", func() error {
			e := live.Exemption{Kind: live.ExemptPeer, Value: "10.0.0.0/8"}
			return db.AddExemption(ctx, e, audit("exemption.add", string(e.Kind), nil, e.Value))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPath, Value: "/info"},
			{Kind: live.ExemptPeer, Value: "10.0.0.0/8"},
		}}},
		{"switch off", func() error {
			return db.SetDisabled(ctx, true, audit("limiter.switch", "global", "on", "off"))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Disabled: true, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPath, Value: "/info"},
			{Kind: live.ExemptPeer, Value: "10.0.0.0/8"},
		}}},
		{"switch on", func() error {
			return db.SetDisabled(ctx, false, audit("limiter.switch", "global", "off", "on"))
		}, live.LiveState{Overrides: map[string]live.Override{"general": {"concurrency_limit": int64(10)}}, Exemptions: []live.Exemption{
			{Kind: live.DenyPeer, Value: "9.9.9.9"},
			{Kind: live.ExemptPath, Value: "/info"},
			{Kind: live.ExemptPeer, Value: "10.0.0.0/8"},
		}}},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := db.LoadLive(ctx)
		if err != nil {
			t.Fatalf("%s: LoadLive: %v", s.name, err)
		}
		// Exact Go types: integers come back as int64, as ParseOverride
		// makes them.
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: LoadLive =\n%#v\nwant\n%#v", s.name, got, s.want)
		}
		// Every change wrote its audit entry in the same transaction.
		a, err := db.Audit(ctx, 1, 0)
		if err != nil || len(a) != 1 {
			t.Fatalf("%s: Audit = %v, %v", s.name, a, err)
		}
		if i == 0 && a[0].ID != 1 {
			t.Errorf("first audit id %d, want 1", a[0].ID)
		}
	}
	all, _ := db.Audit(ctx, 100, 0)
	if len(all) != 13 {
		t.Errorf("%d audit entries, want 13 (one per change)", len(all))
	}
	// An override that is stored keeps its audit entry: both or neither.
	if err := db.SetOverride(ctx, "x", live.Override{"leaky_limit": func() {}}, audit("group.patch", "x", nil, nil)); err == nil {
		t.Error("SetOverride of an unencodable value: no error")
	}
	if err := db.SetOverride(ctx, "x", live.Override{"leaky_limit": int64(1)}, audit("group.patch", "x", func() {}, nil)); err == nil {
		t.Error("SetOverride with an unencodable audit entry: no error")
	}
	if st, _ := db.LoadLive(ctx); st.Overrides["x"] != nil {
		t.Error("the override was stored without its audit entry")
	}
	if n, _ := db.Audit(ctx, 100, 0); len(n) != 13 {
		t.Errorf("%d audit entries after failed changes, want 13", len(n))
	}
	if err := db.SetOverride(ctx, "", live.Override{}, audit("a", "b", nil, nil)); err == nil {
		t.Error("SetOverride of group \"\": no error")
	}
}

func TestAuditOrderAndPaging(t *testing.T) {
	db := MustOpenDB(t)
	if a, err := db.Audit(ctx, 10, 0); err != nil || len(a) != 0 {
		t.Errorf("Audit of an empty log = %v, %v", a, err)
	}
	const n = 25
	for i := 1; i <= n; i++ {
		a := audit("peer.forget", fmt.Sprintf("10.0.0.%d", i), map[string]any{"tokens": i}, nil)
		a.ID = 999 // ignored: the store numbers entries
		if err := db.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(as []live.AuditEntry) []uint64 {
		var out []uint64
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	seq := func(from, to uint64) []uint64 {
		var out []uint64
		for i := from; i >= to && i > 0; i-- {
			out = append(out, i)
		}
		return out
	}
	for _, c := range []struct {
		limit  int
		before uint64
		want   []uint64
	}{
		{10, 0, seq(25, 16)},
		{10, 16, seq(15, 6)},
		{10, 6, seq(5, 1)},
		{10, 1, nil},
		{100, 0, seq(25, 1)},
		{3, 1000, seq(25, 23)},
		{3, 26, seq(25, 23)},
		{3, 25, seq(24, 22)},
		{0, 0, nil},
		{-1, 0, nil},
	} {
		got, err := db.Audit(ctx, c.limit, c.before)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(got), c.want) {
			t.Errorf("Audit(%d, %d) ids = %v, want %v", c.limit, c.before, ids(got), c.want)
		}
	}
	// Fields survive, numbers exactly.
	got, _ := db.Audit(ctx, 1, 0)
	want := audit("peer.forget", "10.0.0.25", map[string]any{"tokens": json.Number("25")}, nil)
	want.ID = 25
	if !got[0].Time.Equal(want.Time) {
		t.Errorf("time %v, want %v", got[0].Time, want.Time)
	}
	got[0].Time = want.Time
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("audit entry %#v, want %#v", got[0], want)
	}
}

func TestConcurrentUse(t *testing.T) {
	db := MustOpenDB(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				switch i % 4 {
				case 0:
					if err := db.Record(ctx, audit("x", fmt.Sprint(w), nil, nil)); err != nil {
						t.Error(err)
					}
				case 1:
					if _, err := db.Audit(ctx, 5, 0); err != nil {
						t.Error(err)
					}
				case 2:
					d := limiter.Delta{TakenAt: int64(i), Changed: []limiter.EntrySnapshot{tokenEntry(peerAt(fmt.Sprintf("10.%d.0.%d", w, i)), "general", 1)}}
					if _, err := db.SaveDelta(ctx, d); err != nil {
						t.Error(err)
					}
				case 3:
					if _, _, err := db.LoadSnapshot(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	a, _ := db.Audit(ctx, 1000, 0)
	snap, _, _ := db.LoadSnapshot(ctx)
	if len(a) != 8*5 || len(snap.Entries) != 8*5 {
		t.Errorf("%d audit entries, %d snapshot entries; want 40 each", len(a), len(snap.Entries))
	}
}

// admin.audit_max_entries: each new entry removes the oldest beyond the
// bound (a few at a time), PruneAudit all of them at once after the bound
// is lowered, and 0 keeps every entry; the newest are never touched and
// the ids go on from where they were.
func TestAuditBound(t *testing.T) {
	db := MustOpenDB(t)
	record := func(n int) {
		t.Helper()
		for range n {
			if err := db.Record(ctx, audit("peer.forget", "10.0.0.1", nil, nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, newest, count uint64) {
		t.Helper()
		as, err := db.Audit(ctx, 1_000_000, 0)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(as)) != count || as[0].ID != newest || as[len(as)-1].ID != newest-count+1 {
			t.Fatalf("%s: %d entries, ids %d…%d; want %d, %d…%d", what, len(as), as[len(as)-1].ID, as[0].ID, count, newest-count+1, newest)
		}
	}
	record(300) // unbounded (0, the zero value)
	check("unbounded", 300, 300)
	if db.AuditPruned() != 0 {
		t.Fatalf("%d pruned while unbounded", db.AuditPruned())
	}

	db.SetAuditMax(250)
	record(1) // 301 ids: 51 beyond the bound, all within one append's step
	check("bound 250, one append", 301, 250)

	db.SetAuditMax(100)
	record(1) // 302: 152 beyond; one append removes 64 of them
	check("bound 100, one append", 302, 302-51-64)
	n, err := db.PruneAudit(ctx)
	if err != nil || n != 302-51-64-100 {
		t.Fatalf("PruneAudit = %d, %v; want %d", n, err, 302-51-64-100)
	}
	check("bound 100, pruned", 302, 100)
	if got := db.AuditPruned(); got != 202 {
		t.Fatalf("AuditPruned = %d, want 202", got)
	}
	if n, err := db.PruneAudit(ctx); err != nil || n != 0 {
		t.Fatalf("PruneAudit again = %d, %v", n, err)
	}
	record(1000)
	check("bound 100, 1000 more", 1302, 100)

	db.SetAuditMax(0)
	record(50)
	check("unbounded again", 1352, 150)
}

// PruneAudit removes a backlog larger than one transaction's batch.
func TestAuditPruneBatches(t *testing.T) {
	db := MustOpenDB(t)
	const n = 25_000
	err := db.RecordMany(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	db.SetAuditMax(100)
	if got, err := db.PruneAudit(ctx); err != nil || got != n-100 {
		t.Fatalf("PruneAudit = %d, %v; want %d", got, err, n-100)
	}
	as, err := db.Audit(ctx, 1000, 0)
	if err != nil || len(as) != 100 || as[0].ID != n {
		t.Fatalf("%d entries, %v", len(as), err)
	}
}
