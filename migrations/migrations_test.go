package migrations_test

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/migrations"
)

func openBolt(t *testing.T) *bbolt.DB {
	t.Helper()
	b, err := bbolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.View(func(tx *bbolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("check: %v", err)
			}
			return nil
		})
		b.Close()
	})
	return b
}

// run applies migrations[from:to], one Update each.
func run(t *testing.T, b *bbolt.DB, from, to int) error {
	t.Helper()
	for _, m := range migrations.All[from:to] {
		if err := b.Update(m.Up); err != nil {
			return err
		}
	}
	return nil
}

func TestAll(t *testing.T) {
	if len(migrations.All) < 2 {
		t.Fatalf("%d migrations", len(migrations.All))
	}
	for i, m := range migrations.All {
		if m.Name == "" || m.Up == nil {
			t.Errorf("migration %d: name %q, Up %v", i+1, m.Name, m.Up != nil)
		}
	}
}

func TestV1CreatesBuckets(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 1); err != nil {
		t.Fatal(err)
	}
	// Running it on a database that has the buckets changes nothing.
	if err := run(t, b, 0, 1); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		for _, n := range []string{"meta", "live", "audit", "entries", "groups", "snapshot"} {
			if tx.Bucket([]byte(n)) == nil {
				t.Errorf("bucket %s missing", n)
			}
		}
		return nil
	})
}

func TestV2SplitsLiveState(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 1); err != nil {
		t.Fatal(err)
	}
	state := `{"overrides":{"chunk":{"leaky_limit":9000},"gone":null,"general":{"mode":"off"}},` +
		`"exemptions":[{"kind":"exempt_peer","value":"10.0.0.0/8","note":"office"},{"kind":"deny_peer","value":"1.2.3.4"}],"disabled":true}`
	b.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("live")).Put([]byte("state"), []byte(state)) })
	if err := run(t, b, 1, 2); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		live := tx.Bucket([]byte("live"))
		if v := live.Get([]byte("state")); v != nil {
			t.Errorf("live/state still there: %s", v)
		}
		if v := string(live.Get([]byte("disabled"))); v != "true" {
			t.Errorf("live/disabled = %q, want true", v)
		}
		o := tx.Bucket([]byte("overrides"))
		got := map[string]string{}
		o.ForEach(func(k, v []byte) error { got[string(k)] = string(v); return nil })
		if len(got) != 2 || got["chunk"] != `{"leaky_limit":9000}` || got["general"] != `{"mode":"off"}` {
			t.Errorf("overrides = %v", got)
		}
		e := tx.Bucket([]byte("exemptions"))
		var keys []uint64
		var vals []string
		e.ForEach(func(k, v []byte) error {
			keys = append(keys, binary.BigEndian.Uint64(k))
			vals = append(vals, string(v))
			return nil
		})
		if len(keys) != 2 || keys[0] != 1 || keys[1] != 2 || !strings.Contains(vals[0], "office") || !strings.Contains(vals[1], "1.2.3.4") {
			t.Errorf("exemptions = %v %v", keys, vals)
		}
		if e.Sequence() != 2 {
			t.Errorf("exemptions sequence %d, want 2", e.Sequence())
		}
		return nil
	})
}

func TestV2WithoutLiveState(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 2); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		if v := string(tx.Bucket([]byte("live")).Get([]byte("disabled"))); v != "false" {
			t.Errorf("live/disabled = %q, want false", v)
		}
		for _, n := range []string{"overrides", "exemptions"} {
			if bk := tx.Bucket([]byte(n)); bk == nil || bk.Stats().KeyN != 0 {
				t.Errorf("bucket %s missing or not empty", n)
			}
		}
		return nil
	})
}

func TestV2RefusesBadState(t *testing.T) {
	for _, state := range []string{`{not json`, `{"overrides":{"":{"leaky_limit":1}}}`} {
		b := openBolt(t)
		if err := run(t, b, 0, 1); err != nil {
			t.Fatal(err)
		}
		b.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("live")).Put([]byte("state"), []byte(state)) })
		if err := run(t, b, 1, 2); err == nil {
			t.Errorf("v2 over live/state %s: no error", state)
		}
		// The failed step rolled back: the old state is still there.
		b.View(func(tx *bbolt.Tx) error {
			if tx.Bucket([]byte("live")).Get([]byte("state")) == nil || tx.Bucket([]byte("overrides")) != nil {
				t.Error("a failed migration left changes")
			}
			return nil
		})
	}
}
