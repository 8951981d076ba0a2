package migrations_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/migrations"
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

// v3Record is a record of a version 3 blob, as read by the test.
type v3Record struct {
	group string
	peer  [17]byte
	value string
}

// readV3Blob reads a blob of version 3, failing the test on anything
// malformed.
func readV3Blob(t *testing.T, v []byte) []v3Record {
	t.Helper()
	if v[0] != 1 {
		t.Fatalf("blob format %d", v[0])
	}
	b := v[1:]
	uv := func() uint64 {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad varint in %x", b)
		}
		b = b[n:]
		return x
	}
	count := uv()
	var names []string
	for range uv() {
		l := uv()
		names = append(names, string(b[:l]))
		b = b[l:]
	}
	var out []v3Record
	for len(b) > 0 {
		l := uv()
		rec := b[:l]
		b = b[l:]
		g, n := binary.Uvarint(rec)
		rec = rec[n:]
		if g&1 != 0 {
			t.Fatalf("a deletion in the base")
		}
		var r v3Record
		r.group = names[g>>1]
		kl := int(rec[0])
		copy(r.peer[:], rec[1:1+kl])
		r.peer[16] = rec[1+kl]
		r.value = string(rec[2+kl:])
		out = append(out, r)
	}
	if uint64(len(out)) != count {
		t.Fatalf("%d records, header %d", len(out), count)
	}
	return out
}

func TestV3PacksEntries(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 2); err != nil {
		t.Fatal(err)
	}
	// Entries of three groups and three kinds of peer, values of any
	// length (a migration does not decode them), and two keys a load of
	// version 2 skipped.
	var want []v3Record
	err := b.Update(func(tx *bbolt.Tx) error {
		eb := tx.Bucket([]byte("entries"))
		for i := range 12000 {
			var r v3Record
			r.group = []string{"chunk", "general", "get_vdf"}[i%3]
			switch i % 4 {
			case 0: // IPv4
				r.peer[0] = 1
				binary.BigEndian.PutUint32(r.peer[1:], uint32(i*7919))
			case 1: // an IPv6 /64
				r.peer[0] = 3
				binary.BigEndian.PutUint64(r.peer[1:], uint64(i)*0x9e3779b97f4a7c15)
				r.peer[16] = 64
			default: // opaque
				r.peer[0] = 4
				binary.BigEndian.PutUint64(r.peer[1:], uint64(i)*0x9e3779b97f4a7c15)
				binary.BigEndian.PutUint64(r.peer[9:], uint64(i))
			}
			r.value = strings.Repeat(string(rune('a'+i%26)), 1+i%40)
			if i == 5000 {
				r.value = strings.Repeat("w", 100_000) // larger than a blob
			}
			want = append(want, r)
			if err := eb.Put(append(append([]byte(r.group), 0), r.peer[:]...), []byte(r.value)); err != nil {
				return err
			}
		}
		if err := eb.Put([]byte("no-separator"), []byte("x")); err != nil {
			return err
		}
		if err := eb.Put(append([]byte("a\x00b\x00"), make([]byte, 17)...), []byte("x")); err != nil {
			return err
		}
		_, err := eb.CreateBucket([]byte("nested"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b v3Record) int {
		return bytes.Compare(append([]byte(a.group+"\x00"), a.peer[:]...), append([]byte(b.group+"\x00"), b.peer[:]...))
	})
	if err := run(t, b, 2, 3); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("entries")) != nil {
			t.Error("bucket entries still there")
		}
		if lb := tx.Bucket([]byte("entry_log")); lb == nil || lb.Stats().KeyN != 0 {
			t.Error("bucket entry_log missing or not empty")
		}
		var got []v3Record
		var seq uint64
		tx.Bucket([]byte("entry_base")).ForEach(func(k, v []byte) error {
			if seq++; binary.BigEndian.Uint64(k) != seq {
				t.Errorf("blob key %x, want %d", k, seq)
			}
			if len(v) > 64<<10 && !bytes.Contains(v, []byte(strings.Repeat("w", 100_000))) {
				t.Errorf("blob %d of %d bytes", seq, len(v))
			}
			got = append(got, readV3Blob(t, v)...)
			return nil
		})
		if seq < 3 {
			t.Errorf("%d blobs", seq)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d records, want %d (or they differ)", len(got), len(want))
		}
		return nil
	})
}

func TestV3Empty(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 3); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		for _, n := range []string{"entry_base", "entry_log"} {
			if bk := tx.Bucket([]byte(n)); bk == nil || bk.Stats().KeyN != 0 {
				t.Errorf("bucket %s missing or not empty", n)
			}
		}
		if tx.Bucket([]byte("entries")) != nil {
			t.Error("bucket entries still there")
		}
		return nil
	})
}

// A version 2 database without its entries bucket is refused, and the
// failed step leaves nothing behind.
func TestV3RefusesMissingEntries(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 2); err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("entries")) })
	if err := run(t, b, 2, 3); err == nil {
		t.Error("v3 without bucket entries: no error")
	}
	b.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("entry_base")) != nil || tx.Bucket([]byte("entry_log")) != nil {
			t.Error("a failed migration left buckets")
		}
		return nil
	})
}

func TestV4CreatesSessions(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 4); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		if bk := tx.Bucket([]byte("sessions")); bk == nil || bk.Stats().KeyN != 0 {
			t.Error("bucket sessions missing or not empty")
		}
		return nil
	})
	// Run twice, it refuses: a step runs once, with its version bump.
	if err := b.Update(migrations.All[3].Up); err == nil {
		t.Error("creating the sessions bucket again succeeded")
	}
}

func TestV5CreatesOffenders(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 5); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		if bk := tx.Bucket([]byte("offenders")); bk == nil || bk.Stats().KeyN != 0 {
			t.Error("bucket offenders missing or not empty")
		}
		return nil
	})
	// Run twice, it refuses: a step runs once, with its version bump.
	if err := b.Update(migrations.All[4].Up); err == nil {
		t.Error("creating the offenders bucket again succeeded")
	}
}

func TestV7CreatesLiveRecords(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 7); err != nil {
		t.Fatal(err)
	}
	b.View(func(tx *bbolt.Tx) error {
		if bk := tx.Bucket([]byte("live_records")); bk == nil || bk.Stats().KeyN != 0 {
			t.Error("bucket live_records missing or not empty")
		}
		return nil
	})
	if err := b.Update(migrations.All[6].Up); err == nil {
		t.Error("creating the live_records bucket again succeeded")
	}
}

// blobRecord builds a record of a version 3 blob: group index, deletion bit,
// a short peer key, the value.
func blobRecord(g uint64, del bool, value []byte) []byte {
	gi := g << 1
	if del {
		gi |= 1
	}
	rec := binary.AppendUvarint(nil, gi)
	rec = append(rec, 4, 1, 10, 0, 1, 0) // n = 4: 1.10.0.1, then the last byte
	rec = append(rec, value...)
	return append(binary.AppendUvarint(nil, uint64(len(rec))), rec...)
}

// blob3 builds a version 3 blob of the groups names and the records.
func blob3(names []string, records ...[]byte) []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(records)))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	for _, r := range records {
		b = append(b, r...)
	}
	return b
}

func TestV6EntryEncoding(t *testing.T) {
	b := openBolt(t)
	if err := run(t, b, 0, 5); err != nil {
		t.Fatal(err)
	}
	v1 := []byte{1, 3, 0x80, 0xd0, 0x9a, 0x8d, 0x06, 5, 7, 0} // encoding 1: tokens, a tick
	blob := blob3([]string{"chunk", "general"},
		blobRecord(0, false, v1),
		blobRecord(1, true, nil),              // a deletion: no value
		blobRecord(1, false, []byte{7, 0, 0}), // not encoding 1: left alone
		blobRecord(1, false, v1),
	)
	broken := append(blob3([]string{"general"}, blobRecord(0, false, v1)), 0xff) // framing off
	other := blob3([]string{"general"}, blobRecord(0, false, []byte{2, 0, 0, 0}))
	err := b.Update(func(tx *bbolt.Tx) error {
		base, log := tx.Bucket([]byte("entry_base")), tx.Bucket([]byte("entry_log"))
		if err := base.Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, blob); err != nil {
			return err
		}
		if err := base.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, broken); err != nil {
			return err
		}
		if err := log.Put([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, blob); err != nil {
			return err
		}
		return log.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}, other)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, b, 5, 6); err != nil {
		t.Fatal(err)
	}
	v2 := append([]byte{2}, v1[1:]...)
	want := blob3([]string{"chunk", "general"},
		blobRecord(0, false, v2), blobRecord(1, true, nil), blobRecord(1, false, []byte{7, 0, 0}), blobRecord(1, false, v2))
	b.View(func(tx *bbolt.Tx) error {
		base, log := tx.Bucket([]byte("entry_base")), tx.Bucket([]byte("entry_log"))
		if got := base.Get([]byte{0, 0, 0, 0, 0, 0, 0, 1}); !bytes.Equal(got, want) {
			t.Errorf("base blob:\n got %x\nwant %x", got, want)
		}
		if got := base.Get([]byte{0, 0, 0, 0, 0, 0, 0, 2}); !bytes.Equal(got, broken) {
			t.Errorf("a broken blob changed: %x", got)
		}
		if got := log.Get([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}); !bytes.Equal(got, want) {
			t.Errorf("log blob:\n got %x\nwant %x", got, want)
		}
		if got := log.Get([]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}); !bytes.Equal(got, other) {
			t.Errorf("a blob of encoding 2 changed: %x", got)
		}
		return nil
	})
	// Without its buckets the step refuses, and leaves nothing.
	b2 := openBolt(t)
	if err := run(t, b2, 0, 5); err != nil {
		t.Fatal(err)
	}
	b2.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("entry_log")) })
	if err := run(t, b2, 5, 6); err == nil {
		t.Error("v6 without entry_log: no error")
	}
}
