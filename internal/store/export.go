package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/migrations"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Document is the JSON form of everything the database holds, as Export
// writes it and Import reads it.
type Document struct {
	// SchemaVersion is the schema of the database exported (informative:
	// the document's shape does not depend on it).
	SchemaVersion int               `json:"schema_version"`
	Live          live.LiveState    `json:"live"`
	Audit         []live.AuditEntry `json:"audit"` // oldest first
	Snapshot      limiter.Snapshot  `json:"snapshot"`
	// Throttle is the outbound throttle's state, when one was saved.
	// It is the throttle's own JSON (package throttle's Snapshot).
	Throttle json.RawMessage `json:"throttle,omitempty"`
}

// Export writes the whole database as one JSON Document, read in one
// transaction. Entry records that do not decode are left out (and logged).
func (db *DB) Export(ctx context.Context, w io.Writer) error {
	doc := Document{SchemaVersion: len(migrations.All)}
	err := db.view(ctx, "export", func(tx *bbolt.Tx) error {
		v, err := readVersion(tx)
		if err != nil {
			return err
		}
		doc.SchemaVersion = int(v)
		doc.Live = live.LiveState{Overrides: map[string]live.Override{}}
		if err := readLive(tx, &doc.Live); err != nil {
			return err
		}
		ab, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		doc.Audit = []live.AuditEntry{}
		err = ab.ForEach(func(k, v []byte) error {
			a, err := decodeAudit(v)
			if err != nil || len(k) != 8 {
				db.log.Warn("audit entry does not decode: not exported", "path", db.path, "key", hex.EncodeToString(k), "err", err)
				return nil
			}
			a.ID = binary.BigEndian.Uint64(k)
			doc.Audit = append(doc.Audit, a)
			return nil
		})
		if err != nil {
			return err
		}
		if v := tx.Bucket(bucketSnapshot).Get(keyThrottle); v != nil {
			if !json.Valid(v) {
				db.log.Warn("the outbound throttle's state is not JSON: not exported", "path", db.path)
			} else {
				doc.Throttle = bytes.Clone(v)
			}
		}
		var rep LoadReport
		doc.Snapshot, rep, err = db.readSnapshot(ctx, tx)
		if err == nil && rep.Skipped > 0 {
			db.log.Warn("entry records that do not decode were not exported", "path", db.path, "skipped", rep.Skipped)
		}
		return err
	})
	if err != nil {
		return err
	}
	if doc.Live.Exemptions == nil {
		doc.Live.Exemptions = []live.Exemption{}
	}
	if doc.Snapshot.Entries == nil {
		doc.Snapshot.Entries = []limiter.EntrySnapshot{}
	}
	if doc.Snapshot.Groups == nil {
		doc.Snapshot.Groups = []limiter.GroupSnapshot{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// importErr is a problem of an imported document, "import: <path>:
// <problem>": a *limiter.FieldError naming where, as a JSON path such as
// "snapshot.entries[3].peer" ("" for the document as a whole).
func importErr(path, format string, args ...any) error {
	return fmt.Errorf("import: %w", &limiter.FieldError{Field: path, Problem: fmt.Sprintf(format, args...)})
}

// Import replaces the live state, the audit log and the snapshot with those
// of the JSON Document read from r, in one transaction. The document is
// read and validated whole first: on any error (one wrapping a
// *limiter.FieldError naming what is wrong, for a bad document) the
// database is unchanged.
func (db *DB) Import(ctx context.Context, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	doc, err := parseDocument(data)
	if err != nil {
		return err
	}
	if err := doc.validate(db.checkThrottle); err != nil {
		return err
	}

	// Encode everything before the transaction.
	type item struct{ k, v []byte }
	var overrides, exemptions, audit, groups []item
	for _, g := range slices.Sorted(maps.Keys(doc.Live.Overrides)) {
		v, err := encodeOverride(doc.Live.Overrides[g])
		if err != nil {
			return importErr("live.overrides."+g, "%v", err)
		}
		overrides = append(overrides, item{[]byte(g), v})
	}
	for i, e := range doc.Live.Exemptions {
		v, err := encodeExemption(e)
		if err != nil {
			return importErr(fmt.Sprintf("live.exemptions[%d]", i), "%v", err)
		}
		exemptions = append(exemptions, item{u64key(uint64(i) + 1), v})
	}
	var maxID uint64
	for i, a := range doc.Audit {
		v, err := encodeAudit(a)
		if err != nil {
			return importErr(fmt.Sprintf("audit[%d]", i), "%v", err)
		}
		audit = append(audit, item{u64key(a.ID), v})
		maxID = max(maxID, a.ID)
	}
	for i := range doc.Snapshot.Groups {
		g := &doc.Snapshot.Groups[i]
		v, err := encodeGroup(g)
		if err != nil {
			return importErr(fmt.Sprintf("snapshot.groups[%d]", i), "%v", err)
		}
		groups = append(groups, item{[]byte(g.Name), v})
	}
	enc, err := encodeDelta(ctx, doc.Snapshot.Entries, nil)
	if err != nil {
		return importErr("snapshot.entries", "%v", err)
	}
	hdr, err := encodeHeader(header{TakenAt: doc.Snapshot.TakenAt, WallAt: doc.Snapshot.WallAt, Enabled: doc.Snapshot.Enabled})
	if err != nil {
		return importErr("snapshot", "%v", err)
	}
	throttle := []byte(doc.Throttle)

	return db.update(ctx, "import", func(tx *bbolt.Tx) error {
		fresh := func(name []byte) (*bbolt.Bucket, error) {
			if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return nil, err
			}
			return tx.CreateBucket(name)
		}
		fill := func(name []byte, items []item) (*bbolt.Bucket, error) {
			b, err := fresh(name)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				if err := b.Put(it.k, it.v); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
		if _, err := fill(bucketOverrides, overrides); err != nil {
			return err
		}
		eb, err := fill(bucketExemptions, exemptions)
		if err != nil {
			return err
		}
		if err := eb.SetSequence(uint64(len(exemptions))); err != nil {
			return err
		}
		// The imported fields are of unknown age: no record of this
		// instance's says otherwise (cluster mode, decision 221).
		if err := clearRecords(tx); err != nil {
			return err
		}
		lb, err := bucket(tx, bucketLive)
		if err != nil {
			return err
		}
		if err := lb.Put(keyDisabled, encodeDisabled(doc.Live.Disabled)); err != nil {
			return err
		}
		ab, err := fill(bucketAudit, audit)
		if err != nil {
			return err
		}
		if err := ab.SetSequence(maxID); err != nil {
			return err
		}
		if _, err := fill(bucketGroups, groups); err != nil {
			return err
		}
		sb, err := fresh(bucketSnapshot)
		if err != nil {
			return err
		}
		if doc.Snapshot.TakenAt != 0 || enc.written > 0 || len(groups) > 0 {
			if err := sb.Put(keyHeader, hdr); err != nil {
				return err
			}
		}
		if throttle != nil {
			if err := sb.Put(keyThrottle, throttle); err != nil {
				return err
			}
		}
		return replaceBase(ctx, tx, enc.blobs)
	})
}

// parseDocument decodes a Document strictly: unknown fields, trailing
// data and wrong types are errors.
func parseDocument(data []byte) (*Document, error) {
	var doc Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := position(data, se.Offset)
			return nil, importErr("", "not JSON: line %d, column %d: %v", line, col, err)
		case errors.As(err, &te):
			return nil, importErr(te.Field, "%v", err)
		case errors.Is(err, io.EOF):
			return nil, importErr("", "empty document")
		}
		line, col := position(data, dec.InputOffset())
		return nil, importErr("", "line %d, column %d: %v", line, col, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, importErr("", "data after the JSON document")
	}
	return &doc, nil
}

func position(data []byte, off int64) (line, col int) {
	off = min(off, int64(len(data)))
	prefix := data[:off]
	line = bytes.Count(prefix, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(prefix, '\n')
	return line, col
}

// validate checks everything Import will store, naming the first problem.
func (doc *Document) validate(checkThrottle func([]byte) error) error {
	n := len(migrations.All)
	switch {
	case doc.SchemaVersion <= 0:
		return importErr("schema_version", "missing (not a limiterd export?)")
	case doc.SchemaVersion > n:
		return importErr("schema_version", "%d is newer than this limiterd (%d); upgrade limiterd", doc.SchemaVersion, n)
	}
	if doc.Live.Overrides == nil {
		doc.Live.Overrides = map[string]live.Override{}
	}
	for _, g := range slices.Sorted(maps.Keys(doc.Live.Overrides)) {
		o := doc.Live.Overrides[g]
		path := "live.overrides." + g
		if g == "" {
			return importErr("live.overrides", "an empty group name")
		}
		if o == nil {
			delete(doc.Live.Overrides, g)
			continue
		}
		o = normalizeOverride(o)
		err := live.CheckOverride(o)
		if err == nil {
			// The values' ranges too, as a live edit checks them: over
			// general's shipped settings, every key this override leaves
			// alone is valid.
			err = o.Over(limiter.ArweaveGroups()[limiter.GroupGeneral]).Validate(g)
		}
		if err != nil {
			// A key of the override, or the core's name of it.
			var fe *limiter.FieldError
			if errors.As(err, &fe) && fe.Field != "" && fe.Field != limiter.GroupField(g, "") {
				key := strings.TrimPrefix(fe.Field, limiter.GroupField(g, "")+".")
				return importErr(path+"."+key, "%s", fe.Problem)
			}
			return importErr(path, "%v", err)
		}
		doc.Live.Overrides[g] = o
	}
	seen := map[live.Exemption]int{}
	for i, e := range doc.Live.Exemptions {
		path := fmt.Sprintf("live.exemptions[%d]", i)
		ne, err := e.Normalize()
		if err != nil {
			var fe *limiter.FieldError
			if errors.As(err, &fe) {
				return importErr(path+"."+fe.Field, "%s", fe.Problem)
			}
			return importErr(path, "%v", err)
		}
		key := live.Exemption{Kind: ne.Kind, Value: ne.Value}
		if j, dup := seen[key]; dup {
			return importErr(path, "%s %q is also live.exemptions[%d]", ne.Kind, ne.Value, j)
		}
		seen[key] = i
		doc.Live.Exemptions[i] = ne
	}
	if string(doc.Throttle) == "null" {
		doc.Throttle = nil
	}
	if th := doc.Throttle; th != nil && checkThrottle != nil {
		if err := checkThrottle(th); err != nil {
			return importErr("", "%v", err)
		}
	}
	ids := map[uint64]int{}
	for i, a := range doc.Audit {
		path := fmt.Sprintf("audit[%d].id", i)
		if a.ID == 0 {
			return importErr(path, "missing or 0")
		}
		if j, dup := ids[a.ID]; dup {
			return importErr(path, "%d is also audit[%d]'s", a.ID, j)
		}
		ids[a.ID] = i
	}
	if doc.Snapshot.TakenAt <= 0 && (len(doc.Snapshot.Entries) > 0 || len(doc.Snapshot.Groups) > 0) {
		// Entries and schedules are as of that time; without it the daemon
		// takes the store for empty and its first save wipes them.
		return importErr("snapshot.taken_at_ms", "missing or not > 0 while the snapshot has entries or groups")
	}
	groups := map[string]int{}
	for i, g := range doc.Snapshot.Groups {
		path := fmt.Sprintf("snapshot.groups[%d]", i)
		if err := checkGroupName(g.Name); err != nil {
			return importErr(path+".name", "%v", err)
		}
		if j, dup := groups[g.Name]; dup {
			return importErr(path+".name", "%q is also snapshot.groups[%d]'s", g.Name, j)
		}
		groups[g.Name] = i
		for _, s := range []struct {
			name string
			s    limiter.Schedule
		}{{"leaky", g.Leaky}, {"cleanup", g.Cleanup}} {
			if !s.s.Valid() {
				return importErr(path+"."+s.name, "not a usable schedule: intervals must be from 1 to 2147483647 ms")
			}
		}
	}
	type ref struct {
		g string
		p peer.Key
	}
	entries := make(map[ref]int, len(doc.Snapshot.Entries))
	for i, e := range doc.Snapshot.Entries {
		path := fmt.Sprintf("snapshot.entries[%d]", i)
		if !e.Peer.IsValid() {
			return importErr(path+".peer", "missing or invalid")
		}
		if err := checkGroupName(e.Group); err != nil {
			return importErr(path+".group", "%v", err)
		}
		if e.Tokens < 0 {
			return importErr(path+".tokens", "%d is negative", e.Tokens)
		}
		// A window is kept oldest first; an export edited by hand (or
		// written by another tool) may list it in any order: sorted here,
		// so the store holds what a restore reads in O(n log n).
		if !slices.IsSorted(e.Window) {
			slices.Sort(doc.Snapshot.Entries[i].Window)
		}
		if j, dup := entries[ref{e.Group, e.Peer}]; dup {
			return importErr(path, "(%s, %s) is also snapshot.entries[%d]", e.Peer, e.Group, j)
		}
		entries[ref{e.Group, e.Peer}] = i
	}
	return nil
}
