// Package migrations is the history of limiterd's bbolt schema: an ordered
// list of steps, each a function over one write transaction. The length of
// All is the schema version a database has once every step ran; the store
// runs the missing steps in order, one transaction per step together with
// the version bump, and refuses a database whose version is newer.
//
// A step, once released, never changes: it describes how databases written
// by an older limiterd are brought forward. Each step therefore names its
// buckets and keys itself (as they were at that version) and decodes old
// values with its own frozen types, never with the store's current codecs.
package migrations

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// Migration is one step of the schema. Up runs inside the write
// transaction that also records the new version; an error rolls both back.
type Migration struct {
	// Name says what the step does, for logs.
	Name string
	Up   func(tx *bbolt.Tx) error
}

// All is every step, oldest first: its length is the current schema
// version. Append only.
var All = []Migration{
	{Name: "create buckets", Up: v1CreateBuckets},
	{Name: "split the live state into one key per override and exemption", Up: v2SplitLive},
	{Name: "pack the snapshot entries into a base of blobs and a log", Up: v3PackEntries},
	{Name: "create the dashboard sessions bucket", Up: v4CreateSessions},
	{Name: "create the offenders bucket", Up: v5CreateOffenders},
	{Name: "entry values to encoding 2, which carries an algorithm and its state", Up: v6EntryEncoding},
	{Name: "create the live_records bucket", Up: v7CreateLiveRecords},
}

// v7CreateLiveRecords creates "live_records": cluster mode's record of each
// field of the live state (its value or removal and the stamp of the edit
// that made it), keyed by the field's name, so that a restart keeps which
// edit is the newer (the store's own JSON values, store/records.go). The
// clock's high-water mark is kept beside the switch, at live/record_clock,
// written with the first record. A database without records is one whose
// fields have none: they get the lowest stamp, as before this version. The
// version it adds also makes an older limiterd, which would edit the live
// state without updating the records, refuse the file.
func v7CreateLiveRecords(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucket([]byte("live_records")); err != nil {
		return fmt.Errorf("bucket live_records: %w", err)
	}
	return nil
}

// v6EntryEncoding brings every entry value in the blobs of entry_base and
// entry_log from encoding 1 to encoding 2. Encoding 2 (the other
// algorithms; decision 86) appends an algorithm byte and its state after the
// fields of encoding 1, under two new flags (0x20, 0x40): a value of encoding 1
// is one of encoding 2 with its first byte 2 instead of 1. Records are framed
// as version 3 wrote them (see v3PackEntries); a blob whose framing does not
// add up (which a load skips whole anyway) and a value of any other encoding
// are left as they are. The schema version it adds is also what makes an older
// limiterd, which cannot read encoding 2, refuse the file.
func v6EntryEncoding(tx *bbolt.Tx) error {
	for _, name := range []string{"entry_base", "entry_log"} {
		b := tx.Bucket([]byte(name))
		if b == nil {
			return fmt.Errorf("bucket %s is missing", name)
		}
		type put struct{ k, v []byte }
		var puts []put
		err := b.ForEach(func(k, v []byte) error {
			if nv, ok := v6Blob(v); ok {
				puts = append(puts, put{bytes.Clone(k), nv})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range puts {
			if err := b.Put(p.k, p.v); err != nil {
				return fmt.Errorf("%s/%x: %w", name, p.k, err)
			}
		}
	}
	return nil
}

// v6Blob returns a copy of the blob v with its records' values of encoding
// 1 made encoding 2, and whether there were any (false for a blob whose
// framing is broken).
func v6Blob(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != 1 {
		return nil, false
	}
	uv := func(b []byte) (uint64, []byte, bool) {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, nil, false
		}
		return x, b[n:], true
	}
	rest := v[1:]
	count, rest, ok := uv(rest)
	if !ok {
		return nil, false
	}
	names, rest, ok := uv(rest)
	for i := uint64(0); ok && i < names; i++ {
		var l uint64
		if l, rest, ok = uv(rest); ok && l > uint64(len(rest)) {
			ok = false
		}
		if ok {
			rest = rest[l:]
		}
	}
	if !ok {
		return nil, false
	}
	var at []int // offsets in v of the version bytes to change
	n := uint64(0)
	for ; len(rest) > 0; n++ {
		l, r, ok := uv(rest)
		if !ok || l > uint64(len(r)) {
			return nil, false
		}
		rec := r[:l]
		rest = r[l:]
		g, rec, ok := uv(rec)
		if !ok || len(rec) < 2 || rec[0] > 16 || len(rec) < 2+int(rec[0]) {
			return nil, false
		}
		val := rec[2+int(rec[0]):]
		if g&1 == 0 && len(val) > 0 && val[0] == 1 {
			at = append(at, len(v)-len(rest)-len(val))
		}
	}
	if n != count || len(at) == 0 {
		return nil, false
	}
	out := bytes.Clone(v)
	for _, i := range at {
		out[i] = 2
	}
	return out, true
}

// v5CreateOffenders creates "offenders": the forensic record of the peers
// the limiter rejected in the last 24 hours, keyed by the 17-byte peer key
// then the group name, so that an attack can be reviewed after the
// limiter's entries are gone. Values are the store's own (store/offenses.go).
func v5CreateOffenders(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucket([]byte("offenders")); err != nil {
		return fmt.Errorf("bucket offenders: %w", err)
	}
	return nil
}

// v4CreateSessions creates "sessions": the dashboard's logins, keyed by the
// SHA-256 of the session id, so that a restart logs nobody out. Values are
// the dashboard's own (opaque to the store).
func v4CreateSessions(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucket([]byte("sessions")); err != nil {
		return fmt.Errorf("bucket sessions: %w", err)
	}
	return nil
}

// The buckets of version 1.
var v1Buckets = []string{"meta", "live", "audit", "entries", "groups", "snapshot"}

// v1CreateBuckets creates the buckets of version 1. In version 1 the
// operators' live state was one JSON document, LiveState, under the key
// "state" of the "live" bucket, rewritten whole on every edit.
func v1CreateBuckets(tx *bbolt.Tx) error {
	for _, name := range v1Buckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// v1LiveState is the JSON document of version 1 (live.LiveState as it
// was then), kept raw where version 2 stores it unchanged.
type v1LiveState struct {
	Overrides  map[string]json.RawMessage `json:"overrides"`
	Exemptions []json.RawMessage          `json:"exemptions"`
	Disabled   bool                       `json:"disabled"`
}

// v2SplitLive moves the live state of version 1 to one key per item, so an
// edit writes only what it changes:
//
//	overrides/<group>          JSON object of the group's overridden keys
//	exemptions/<uint64 BE>     JSON Exemption; keys from NextSequence, so
//	                           iteration order is the order of addition
//	live/"disabled"            JSON boolean
//
// and deletes live/"state".
func v2SplitLive(tx *bbolt.Tx) error {
	overrides, err := tx.CreateBucketIfNotExists([]byte("overrides"))
	if err != nil {
		return fmt.Errorf("bucket overrides: %w", err)
	}
	exemptions, err := tx.CreateBucketIfNotExists([]byte("exemptions"))
	if err != nil {
		return fmt.Errorf("bucket exemptions: %w", err)
	}
	live := tx.Bucket([]byte("live"))
	if live == nil {
		return fmt.Errorf("bucket live is missing")
	}
	disabled := false
	if raw := live.Get([]byte("state")); raw != nil {
		var st v1LiveState
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("live/state does not decode: %w", err)
		}
		for group, o := range st.Overrides {
			if group == "" {
				return fmt.Errorf("live/state: an override has an empty group name")
			}
			if string(o) == "null" {
				continue
			}
			if err := overrides.Put([]byte(group), o); err != nil {
				return fmt.Errorf("overrides/%s: %w", group, err)
			}
		}
		for _, e := range st.Exemptions {
			seq, err := exemptions.NextSequence()
			if err != nil {
				return err
			}
			if err := exemptions.Put(binary.BigEndian.AppendUint64(nil, seq), e); err != nil {
				return fmt.Errorf("exemptions: %w", err)
			}
		}
		disabled = st.Disabled
		if err := live.Delete([]byte("state")); err != nil {
			return err
		}
	}
	v, _ := json.Marshal(disabled)
	return live.Put([]byte("disabled"), v)
}

// v2PeerLen is the length of a peer key in the entry keys of version 2.
const v2PeerLen = 17

// v3BlobTarget is the size version 3's blobs are filled to.
const v3BlobTarget = 64<<10 - 128

// v3PackEntries replaces version 2's bucket "entries", one key per (peer,
// group) entry:
//
//	entries/<group 0x00 peer>  entry value (17-byte peer key)
//
// by a base of blobs holding them all, in the same (key) order, and an
// empty log:
//
//	entry_base/<uint64 BE from 1>  blob
//	entry_log                      (empty)
//
// A blob (format 1) is
//
//	byte     1
//	uvarint  number of records
//	uvarint  number of group names, then each: uvarint length, the name
//	records, each:
//	  uvarint  length of the rest of the record
//	  uvarint  index of its group in the names above << 1 (0: not a deletion)
//	  byte     n (0..16); the peer key is k[:n], zeros up to 16, then:
//	  n bytes  k[:n]
//	  byte     k[16]
//	  value    the entry value, byte for byte as version 2 stored it
//
// filled to about 64 KiB. The values are not decoded (their encoding did
// not change): one that does not decode is still skipped by a load. A key
// that is not a group, a NUL and 17 bytes (which version 2 skipped when
// loading) is dropped.
func v3PackEntries(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucket([]byte("entry_log")); err != nil {
		return fmt.Errorf("bucket entry_log: %w", err)
	}
	base, err := tx.CreateBucket([]byte("entry_base"))
	if err != nil {
		return fmt.Errorf("bucket entry_base: %w", err)
	}
	base.FillPercent = 1
	entries := tx.Bucket([]byte("entries"))
	if entries == nil {
		return fmt.Errorf("bucket entries is missing")
	}
	var (
		names [][]byte // the group names of the blob being filled
		body  []byte   // its records
		count uint64
		seq   uint64
	)
	flush := func() error {
		if count == 0 {
			return nil
		}
		b := []byte{1}
		b = binary.AppendUvarint(b, count)
		b = binary.AppendUvarint(b, uint64(len(names)))
		for _, n := range names {
			b = binary.AppendUvarint(b, uint64(len(n)))
			b = append(b, n...)
		}
		b = append(b, body...)
		seq++
		if err := base.Put(binary.BigEndian.AppendUint64(nil, seq), b); err != nil {
			return fmt.Errorf("entry_base/%d: %w", seq, err)
		}
		names, body, count = nil, body[:0], 0
		return nil
	}
	c := entries.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil || len(k) < v2PeerLen+2 || k[len(k)-v2PeerLen-1] != 0 {
			continue
		}
		group, peer := k[:len(k)-v2PeerLen-1], k[len(k)-v2PeerLen:]
		if bytes.IndexByte(group, 0) >= 0 {
			continue
		}
		if count > 0 && len(body)+len(v)+32 > v3BlobTarget {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(names) == 0 || !bytes.Equal(names[len(names)-1], group) {
			names = append(names, bytes.Clone(group))
		}
		n := 16
		for n > 0 && peer[n-1] == 0 {
			n--
		}
		g := binary.AppendUvarint(nil, uint64(len(names)-1)<<1)
		body = binary.AppendUvarint(body, uint64(len(g)+1+n+1+len(v)))
		body = append(body, g...)
		body = append(body, byte(n))
		body = append(body, peer[:n]...)
		body = append(body, peer[16])
		body = append(body, v...)
		count++
	}
	if err := flush(); err != nil {
		return err
	}
	return tx.DeleteBucket([]byte("entries"))
}
