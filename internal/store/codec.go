package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
)

// One codec pair per stored value type. Decoders never keep the slice they
// are given: bbolt's bytes are valid only inside their transaction.

// ---- entries: group names ----

// checkGroupName refuses the group names the store cannot hold.
func checkGroupName(g string) error {
	switch {
	case g == "":
		return errors.New("empty group name")
	case strings.IndexByte(g, 0) >= 0:
		return fmt.Errorf("group name %q holds a NUL byte", g)
	case len(g) > 1024:
		return fmt.Errorf("group name of %d bytes (at most 1024)", len(g))
	}
	return nil
}

// ---- entries: value ----

// entryV2 is the current version of the entry encoding (version 1 was the
// same without the algorithm; migration 6 turned every stored value into
// version 2):
//
//	byte     version (2)
//	byte     flags (entryTokens, entryTokenFields, entryWindow, entryRejConc, entryRejRate, entryAlgo, entryState)
//	varint   LastSeen (Unix s)
//	uvarint  Requests
//	uvarint  RejectedConcurrency        if entryRejConc
//	uvarint  RejectedRateLimit          if entryRejRate
//	varint   Tokens, varint LeakyTick   if entryTokenFields
//	uvarint  n, varint CleanupTick      if entryWindow
//	varint   Window[0] − LastSeen·1000, then Window[i] − Window[i−1]: n values
//	byte     Algorithm                  if entryAlgo (not the hybrid)
//	varint   State.A, varint State.B    if entryState; the one of them
//	         that is a time (the token bucket's B, the others' A) as
//	         its difference to LastSeen·1000
//
// (varint is zig-zag.) A token-only entry, the common case, is 10 to 14
// bytes; each window timestamp adds 1 to 3; an algorithm's state 4 to 12.
const entryV2 = 2

const (
	entryTokens      = 1 << iota // InTokens
	entryTokenFields             // Tokens, LeakyTick follow
	entryWindow                  // the window follows
	entryRejConc
	entryRejRate
	entryAlgo  // the algorithm follows
	entryState // the algorithm's state follows
	entryFlags = entryTokens | entryTokenFields | entryWindow | entryRejConc | entryRejRate | entryAlgo | entryState
)

// stateTime reports which word of an algorithm's state is a time: true
// for A, false for B (the token bucket's last refill).
func stateTime(k algo.Kind) bool { return k != algo.TokenBucket }

// appendEntry appends the encoding of e but its Peer and Group (which a
// record of a blob holds).
func appendEntry(dst []byte, e *limiter.EntrySnapshot) []byte {
	var flags byte
	if e.InTokens {
		flags |= entryTokens
	}
	if e.InTokens || e.Tokens != 0 || e.LeakyTick != 0 {
		flags |= entryTokenFields
	}
	if len(e.Window) > 0 || e.CleanupTick != 0 {
		flags |= entryWindow
	}
	if e.RejectedConcurrency != 0 {
		flags |= entryRejConc
	}
	if e.RejectedRateLimit != 0 {
		flags |= entryRejRate
	}
	if e.Algorithm != algo.Hybrid {
		flags |= entryAlgo
	}
	if e.State != (algo.State{}) {
		flags |= entryState
	}
	dst = append(dst, entryV2, flags)
	dst = binary.AppendVarint(dst, e.LastSeen)
	dst = binary.AppendUvarint(dst, e.Requests)
	if flags&entryRejConc != 0 {
		dst = binary.AppendUvarint(dst, e.RejectedConcurrency)
	}
	if flags&entryRejRate != 0 {
		dst = binary.AppendUvarint(dst, e.RejectedRateLimit)
	}
	if flags&entryTokenFields != 0 {
		dst = binary.AppendVarint(dst, e.Tokens)
		dst = binary.AppendVarint(dst, e.LeakyTick)
	}
	if flags&entryWindow != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Window)))
		dst = binary.AppendVarint(dst, e.CleanupTick)
		prev := e.LastSeen * 1000 // wraps consistently with the decoder
		for _, t := range e.Window {
			dst = binary.AppendVarint(dst, t-prev)
			prev = t
		}
	}
	if flags&entryAlgo != 0 {
		dst = append(dst, byte(e.Algorithm))
	}
	if flags&entryState != 0 {
		a, b := e.State.A, e.State.B
		if stateTime(e.Algorithm) {
			a -= e.LastSeen * 1000
		} else {
			b -= e.LastSeen * 1000
		}
		dst = binary.AppendVarint(dst, a)
		dst = binary.AppendVarint(dst, b)
	}
	return dst
}

// entryReader reads the fields of an encoded entry.
type entryReader struct {
	b   []byte
	err error
}

func (r *entryReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *entryReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// decodeEntry decodes v into e, all fields but Peer and Group.
func decodeEntry(v []byte, e *limiter.EntrySnapshot) error {
	if len(v) < 2 {
		return fmt.Errorf("entry of %d bytes", len(v))
	}
	if v[0] != entryV2 {
		return fmt.Errorf("unknown entry encoding version %d", v[0])
	}
	flags := v[1]
	if flags&^entryFlags != 0 {
		return fmt.Errorf("unknown entry flags %#x", flags&^entryFlags)
	}
	r := entryReader{b: v[2:]}
	*e = limiter.EntrySnapshot{Peer: e.Peer, Group: e.Group}
	e.InTokens = flags&entryTokens != 0
	e.LastSeen = r.varint()
	e.Requests = r.uvarint()
	if flags&entryRejConc != 0 {
		e.RejectedConcurrency = r.uvarint()
	}
	if flags&entryRejRate != 0 {
		e.RejectedRateLimit = r.uvarint()
	}
	if flags&entryTokenFields != 0 {
		e.Tokens = r.varint()
		e.LeakyTick = r.varint()
	}
	if flags&entryWindow != 0 {
		n := r.uvarint()
		e.CleanupTick = r.varint()
		if r.err == nil && n > uint64(len(r.b)) {
			return fmt.Errorf("window of %d timestamps in %d bytes", n, len(r.b))
		}
		if n > 0 && r.err == nil {
			e.Window = make([]int64, n)
			prev := e.LastSeen * 1000
			for i := range e.Window {
				prev += r.varint()
				e.Window[i] = prev
			}
		}
	}
	if flags&entryAlgo != 0 && r.err == nil {
		if len(r.b) == 0 {
			return errors.New("truncated: no algorithm")
		}
		e.Algorithm = algo.Kind(r.b[0])
		r.b = r.b[1:]
		if e.Algorithm == algo.Hybrid || !e.Algorithm.Valid() {
			return fmt.Errorf("unknown algorithm %d", e.Algorithm)
		}
	}
	if flags&entryState != 0 {
		e.State.A, e.State.B = r.varint(), r.varint()
		if stateTime(e.Algorithm) {
			e.State.A += e.LastSeen * 1000
		} else {
			e.State.B += e.LastSeen * 1000
		}
		if r.err == nil && e.State == (algo.State{}) {
			return errors.New("an empty algorithm state written as one")
		}
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d bytes past the end of the entry", len(r.b))
	}
	return nil
}

// ---- groups, snapshot header ----

func encodeGroup(g *limiter.GroupSnapshot) ([]byte, error) { return json.Marshal(g) }

func decodeGroup(v []byte) (limiter.GroupSnapshot, error) {
	var g limiter.GroupSnapshot
	err := json.Unmarshal(v, &g)
	return g, err
}

// header is the snapshot's own fields.
type header struct {
	TakenAt int64 `json:"taken_at_ms"`
	WallAt  int64 `json:"wall_at_ms,omitempty"` // limiter.Snapshot.WallAt
	Enabled bool  `json:"enabled"`
}

func encodeHeader(h header) ([]byte, error) { return json.Marshal(h) }

func decodeHeader(v []byte) (header, error) {
	var h header
	err := json.Unmarshal(v, &h)
	return h, err
}

// ---- live state and audit ----

// decodeJSON decodes v with numbers kept exact (json.Number).
func decodeJSON(v []byte, dst any) error {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(dst); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data past the end of the JSON value")
	}
	return nil
}

func encodeOverride(o live.Override) ([]byte, error) { return json.Marshal(o) }

// decodeOverride returns integers as int64 (as live.ParseOverride
// does), booleans and strings as such.
func decodeOverride(v []byte) (live.Override, error) {
	var o live.Override
	if err := decodeJSON(v, &o); err != nil {
		return nil, err
	}
	return normalizeOverride(o), nil
}

// normalizeOverride turns the json.Number values of o into int64 (or
// float64 when not an integer, which live.CheckOverride then refuses).
func normalizeOverride(o live.Override) live.Override {
	for k, x := range o {
		if n, ok := x.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				o[k] = i
			} else if f, err := n.Float64(); err == nil {
				o[k] = f
			}
		}
	}
	return o
}

func encodeExemption(e live.Exemption) ([]byte, error) { return json.Marshal(e) }

func decodeExemption(v []byte) (live.Exemption, error) {
	var e live.Exemption
	err := decodeJSON(v, &e)
	return e, err
}

func encodeDisabled(b bool) []byte {
	if b {
		return []byte("true")
	}
	return []byte("false")
}

func decodeDisabled(v []byte) (bool, error) {
	var b bool
	err := json.Unmarshal(v, &b)
	return b, err
}

func encodeAudit(a live.AuditEntry) ([]byte, error) { return json.Marshal(a) }

// decodeAudit keeps the numbers of Old and New exact (json.Number).
func decodeAudit(v []byte) (live.AuditEntry, error) {
	var a live.AuditEntry
	err := decodeJSON(v, &a)
	return a, err
}

// ---- integer keys ----

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }
