package store_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/limiterd/limiterd/internal/store"
)

func TestSessionsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limiterd.db")
	db := MustOpenDBAt(t, path, store.Options{})
	if got, err := db.Sessions(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a new database: %v, %v", got, err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := db.PutSession(ctx, []byte(k), []byte("value "+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutSession(ctx, []byte("b"), []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSession(ctx, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSession(ctx, []byte("never there")); err != nil {
		t.Fatalf("deleting a missing session: %v", err)
	}
	db.Close()
	db = MustOpenDBAt(t, path, store.Options{})
	got, err := db.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"a": []byte("value a"), "b": []byte("replaced")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sessions after reopen: %q, want %q", got, want)
	}
}
