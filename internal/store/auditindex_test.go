package store_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
)

// TestAuditIndex: a query by action (or its family) and actor reads the
// indexes and answers what a scan of the whole log would, page by page;
// the bound's pruning removes index entries with the log's; and an index
// lost or left stale by a limiterd that did not keep it is made anew at
// open.
func TestAuditIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	actions := []string{"exemption.add", "exemption.remove", "group.patch", "peer.forget", "exemption", "exemptions.add"}
	actors := []string{"api-token", "token:nginx", "session:1a2b"}
	for i := range 90 {
		a := audit(actions[i%len(actions)], fmt.Sprint("t", i), nil, nil)
		a.Actor = actors[(i/4)%len(actors)]
		if err := db.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	all, err := db.Audit(ctx, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := func(action, actor string, before uint64) []uint64 {
		var ids []uint64
		for _, a := range all {
			if (before == 0 || a.ID < before) && (actor == "" || a.Actor == actor) &&
				(action == "" || a.Action == action || strings.HasPrefix(a.Action, action+".")) {
				ids = append(ids, a.ID)
			}
		}
		return ids
	}
	ids := func(es []live.AuditEntry) []uint64 {
		var out []uint64
		for _, a := range es {
			out = append(out, a.ID)
		}
		return out
	}
	check := func(db *store.DB) {
		t.Helper()
		for _, q := range []struct{ action, actor string }{
			{"exemption", ""}, {"exemption.add", ""}, {"exemptions", ""}, {"group.patch", "token:nginx"},
			{"", "session:1a2b"}, {"exemption", "api-token"}, {"nothing", ""}, {"", "nobody"}, {"exemp", ""},
		} {
			// Whole, then in pages of 4.
			got, next, err := db.AuditMatching(ctx, q.action, q.actor, 1000, 1000, 0)
			if err != nil || next != 0 || !slices.Equal(ids(got), want(q.action, q.actor, 0)) {
				t.Errorf("%+v: %v (next %d, %v), want %v", q, ids(got), next, err, want(q.action, q.actor, 0))
			}
			var paged []uint64
			before := uint64(0)
			for range 100 {
				page, _, err := db.AuditMatching(ctx, q.action, q.actor, 4, 1000, before)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, ids(page)...)
				if len(page) < 4 {
					break
				}
				before = page[3].ID
			}
			if !slices.Equal(paged, want(q.action, q.actor, 0)) {
				t.Errorf("%+v in pages: %v", q, paged)
			}
		}
		// A scan bound: it stops, and says where to go on.
		got, next, _ := db.AuditMatching(ctx, "exemption", "token:nginx", 1000, 5, 0)
		if next == 0 || len(got) > 5 {
			t.Errorf("scan bound 5: %d entries, next %d", len(got), next)
		}
		rest, _, _ := db.AuditMatching(ctx, "exemption", "token:nginx", 1000, 1000, next)
		if !slices.Equal(append(ids(got), ids(rest)...), want("exemption", "token:nginx", 0)) {
			t.Errorf("scan bound, then on from %d: %v %v", next, ids(got), ids(rest))
		}
	}
	check(db)

	// The bound: 50 newest kept; the index keeps none of the others.
	db.SetAuditMax(50)
	if _, err := db.PruneAudit(ctx); err != nil {
		t.Fatal(err)
	}
	all, _ = db.Audit(ctx, 1000, 0)
	if len(all) != 50 {
		t.Fatalf("%d entries after pruning to 50", len(all))
	}
	check(db)
	indexed := func(db *store.DB) (n int) {
		db.Bolt().View(func(tx *bbolt.Tx) error {
			n = tx.Bucket([]byte("audit_by_action")).Stats().KeyN + tx.Bucket([]byte("audit_by_actor")).Stats().KeyN
			return nil
		})
		return n
	}
	if n := indexed(db); n != 2*50 {
		t.Errorf("%d index entries for 50 entries", n)
	}

	// A limiterd that does not keep the index writes to the log: the
	// next open makes it anew.
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket([]byte("audit_by_actor")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("audit_by_actor")); err != nil {
			return err
		}
		_, err := tx.Bucket([]byte("audit")).NextSequence()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = MustOpenDBAt(t, path, store.Options{})
	check(db)
	if n := indexed(db); n != 2*50 {
		t.Errorf("%d index entries after the index was made anew, want 100", n)
	}
}
