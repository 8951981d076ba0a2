// Package live holds the operators' live settings: overrides of group
// keys, the live exemption and deny lists and the global switch. Live
// validates an edit, makes it durable through a Store, applies it to the
// limiter and audits it, in that order; the package also owns the
// vocabulary of those edits (Override, Exemption, AuditEntry); a bad edit is
// a *limiter.FieldError naming its field.
package live

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// ExemptionKind names a list of live exemptions.
type ExemptionKind string

// The kinds of live exemptions (docs/api.md).
const (
	ExemptPeer ExemptionKind = "exempt_peer" // an IP or CIDR → local_peers
	ExemptPath ExemptionKind = "exempt_path" // a path pattern that bypasses the limiter
	DenyPeer   ExemptionKind = "deny_peer"   // an IP or CIDR answered 403
)

// Exemption is one entry of a live list.
type Exemption struct {
	Kind  ExemptionKind `json:"kind"`
	Value string        `json:"value"`
	// Note is the operator's reason, free text.
	Note string `json:"note,omitempty"`
	// Expires is when the entry removes itself (Live.Expire, audited as
	// exemption.expire); zero: never.
	Expires time.Time `json:"expires,omitzero"`
}

// ParseExpiry reads an exemption's expiry as the API and the dashboard
// take it: "" (none), an RFC 3339 time, or a Go duration from now ("24h",
// "90m"), which must be positive. The error names the field "expires".
func ParseExpiry(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return time.Time{}, &limiter.FieldError{Field: "expires", Problem: fmt.Sprintf(`must be an RFC 3339 time ("2026-12-01T00:00:00Z") or a duration from now ("24h"), got %q`, v)}
	}
	if d <= 0 {
		return time.Time{}, &limiter.FieldError{Field: "expires", Problem: fmt.Sprintf("the duration must be positive, got %s", v)}
	}
	return now.Add(d), nil
}

// Normalize validates e and returns it in canonical form (a CIDR masked,
// an IPv4-mapped address unmapped). The error names the field.
func (e Exemption) Normalize() (Exemption, error) {
	e.Value = strings.TrimSpace(e.Value)
	// The store keeps exemptions as JSON, which would turn invalid UTF-8
	// into U+FFFD: the entry would change meaning at the next restart.
	if !utf8.ValidString(e.Value) {
		return e, &limiter.FieldError{Field: "value", Problem: fmt.Sprintf("%q is not UTF-8 text", e.Value)}
	}
	if !utf8.ValidString(e.Note) {
		return e, &limiter.FieldError{Field: "note", Problem: "not UTF-8 text"}
	}
	switch e.Kind {
	case ExemptPeer, DenyPeer:
		p, err := peer.ParsePrefix(e.Value)
		if err != nil {
			return e, &limiter.FieldError{Field: "value", Problem: err.Error()}
		}
		if p.Bits() == p.Addr().BitLen() {
			e.Value = p.Addr().String()
		} else {
			e.Value = p.String()
		}
	case ExemptPath:
		if _, err := limiter.ParsePattern(e.Value); err != nil {
			return e, &limiter.FieldError{Field: "value", Problem: err.Error()}
		}
	default:
		return e, &limiter.FieldError{Field: "kind", Problem: fmt.Sprintf("%q is not one of exempt_peer, exempt_path, deny_peer", e.Kind)}
	}
	if utf8.RuneCountInString(e.Note) > 500 {
		return e, &limiter.FieldError{Field: "note", Problem: "at most 500 characters"}
	}
	return e, nil
}

// Override is a live edit of one group: the keys it sets, by their names,
// with JSON values (integers as int64, a boolean, a mode or algorithm as
// a string). It is a limiter.PartialGroup of the keys a live edit may
// change, limiter.GroupKeys (not the worker shards', which a reload
// changes: docs/config.md).
type Override = limiter.PartialGroup

// editable returns the key of a group table named name, if a live edit
// may change it.
func editable(name string) (limiter.GroupKey, bool) {
	k, ok := limiter.LookupGroupKey(name)
	return k, ok && slices.Contains(limiter.GroupKeys, name)
}

// ParseOverride reads a JSON object of group keys, rejecting unknown keys
// and values of the wrong type (a value's range is the core's to check,
// limiter.PartialGroup.Resolve), and returns the canonical Override. The
// error, a *limiter.FieldError, names the first bad key in the order of
// limiter.GroupKeys; a body that is not a JSON object gives an error
// wrapping the *json.SyntaxError or *json.UnmarshalTypeError.
func ParseOverride(body []byte) (Override, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	if len(raw) == 0 {
		return nil, &limiter.FieldError{Problem: "the body names no key to change"}
	}
	o := Override{}
	keys := make(Override, len(raw))
	for k := range raw {
		keys[k] = nil
	}
	for _, k := range keys.Keys() {
		key, ok := editable(k)
		if !ok {
			if k == "" {
				// The field of the error cannot name it.
				return nil, &limiter.FieldError{Problem: `unknown key "" (a key with an empty name)`}
			}
			return nil, &limiter.FieldError{Field: k, Problem: "unknown key", Err: limiter.ErrUnknownKey}
		}
		// The literal's kind first: json.Unmarshal takes null for false or
		// "", and a string holding digits for a json.Number.
		lit := strings.TrimSpace(string(raw[k]))
		var val any
		switch key.Type {
		case limiter.BoolKey:
			if lit != "true" && lit != "false" {
				return nil, &limiter.FieldError{Field: k, Problem: "must be true or false, got " + lit}
			}
			val = lit == "true"
		case limiter.WordKey:
			var s string
			if err := json.Unmarshal(raw[k], &s); err != nil || lit == "null" {
				return nil, &limiter.FieldError{Field: k, Problem: "must be a string"}
			}
			if _, err := key.Parse(s); err != nil {
				return nil, &limiter.FieldError{Field: k, Problem: err.Error()}
			}
			val = s
		case limiter.IntKey:
			if lit == "" || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
				return nil, &limiter.FieldError{Field: k, Problem: "must be an integer, got " + lit}
			}
			var n json.Number
			dec := json.NewDecoder(strings.NewReader(lit))
			dec.UseNumber()
			if err := dec.Decode(&n); err != nil {
				return nil, &limiter.FieldError{Field: k, Problem: "must be an integer"}
			}
			i, err := n.Int64()
			if err != nil {
				return nil, &limiter.FieldError{Field: k, Problem: fmt.Sprintf("must be an integer, got %s", n)}
			}
			val = i
		}
		o[k] = val
	}
	return o, nil
}

// CheckOverride checks an Override read back (from the store, a
// replica, an import): that it sets only keys a live edit may change,
// each to a value of the key's type (the ranges are the core's to check,
// limiter.PartialGroup.Resolve). The error, a *limiter.FieldError, names
// the key.
func CheckOverride(o Override) error {
	for _, name := range o.Keys() {
		k, ok := editable(name)
		if !ok {
			return &limiter.FieldError{Field: name, Problem: "unknown key", Err: limiter.ErrUnknownKey}
		}
		if err := k.Check(o[name]); err != nil {
			return &limiter.FieldError{Field: name, Problem: err.Error()}
		}
	}
	return nil
}

// AuditEntry records one change an operator made: when, who (a token or a
// dashboard session), what, and the value before and after.
type AuditEntry struct {
	ID     uint64    `json:"id"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Old    any       `json:"old,omitempty"`
	New    any       `json:"new,omitempty"`
	// Note is the operator's note of the entry concerned (an exemption's
	// reason), kept with its addition, removal and expiry.
	Note string `json:"note,omitempty"`
	// Expires is when the entry concerned expires (an exemption added with
	// an expiry).
	Expires time.Time `json:"expires,omitzero"`
}

// LiveState is everything operators changed at run time: what the store
// keeps and the daemon applies over the file config.
type LiveState struct {
	Overrides  map[string]Override `json:"overrides"`
	Exemptions []Exemption         `json:"exemptions"`
	// Disabled is true when the global switch was turned off.
	Disabled bool `json:"disabled"`
}
