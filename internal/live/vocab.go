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
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// ExemptionKind names a list of live exemptions.
type ExemptionKind string

// The kinds of live exemptions (SPEC §8).
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

// Override is a live edit of one group: the keys it sets, by their SPEC §3
// names, with JSON values (integers, a boolean, a mode or algorithm
// string).
type Override map[string]any

// ParseOverride reads a JSON object of group keys, rejecting unknown keys
// and values of the wrong type, and returns it as a limiter.PartialGroup and the
// canonical Override. The error names the key; a body that is not a JSON
// object gives an error wrapping the *json.SyntaxError or
// *json.UnmarshalTypeError.
func ParseOverride(body []byte) (limiter.PartialGroup, Override, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return limiter.PartialGroup{}, nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	if len(raw) == 0 {
		return limiter.PartialGroup{}, nil, &limiter.FieldError{Problem: "the body names no key to change"}
	}
	o := Override{}
	for k, v := range raw {
		var val any
		// The literal's kind first: json.Unmarshal takes null for false or
		// "", and a string holding digits for a json.Number.
		lit := strings.TrimSpace(string(v))
		switch k {
		case limiter.KeyManualReductionOff:
			if lit != "true" && lit != "false" {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: "must be true or false, got " + lit}
			}
			val = lit == "true"
		case limiter.KeyMode, limiter.KeyAlgorithm:
			var s string
			if err := json.Unmarshal(v, &s); err != nil || lit == "null" {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: "must be a string"}
			}
			if err := checkWord(k, s); err != nil {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: err.Error()}
			}
			val = s
		default:
			if !isIntKey(k) {
				if k == "" {
					// The field of the error cannot name it.
					return limiter.PartialGroup{}, nil, &limiter.FieldError{Problem: `unknown key "" (a key with an empty name)`}
				}
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: "unknown key"}
			}
			if lit == "" || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: "must be an integer, got " + lit}
			}
			var n json.Number
			dec := json.NewDecoder(strings.NewReader(string(v)))
			dec.UseNumber()
			if err := dec.Decode(&n); err != nil {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: "must be an integer"}
			}
			i, err := n.Int64()
			if err != nil {
				return limiter.PartialGroup{}, nil, &limiter.FieldError{Field: k, Problem: fmt.Sprintf("must be an integer, got %s", n)}
			}
			val = i
		}
		o[k] = val
	}
	p, err := o.Partial()
	return p, o, err
}

func isIntKey(k string) bool {
	switch k {
	case limiter.KeySlidingWindowLimit, limiter.KeySlidingWindowDuration, limiter.KeyCleanupInterval, limiter.KeyCleanupExpiry,
		limiter.KeyLeakyLimit, limiter.KeyLeakyTickInterval, limiter.KeyLeakyTickReduction, limiter.KeyConcurrencyLimit,
		limiter.KeyLimit, limiter.KeyPeriod, limiter.KeyBurst:
		return true
	}
	return false
}

// checkWord checks the value of a key that takes a word: the mode, the
// algorithm.
func checkWord(k, s string) error {
	if k == limiter.KeyAlgorithm {
		_, err := algo.Parse(s)
		return err
	}
	_, err := limiter.ParseMode(s)
	return err
}

// Partial converts o to a limiter.PartialGroup. Numbers may be int64, int or
// float64 with an integral value (as decoded from JSON).
func (o Override) Partial() (limiter.PartialGroup, error) {
	var p limiter.PartialGroup
	for _, k := range o.Keys() {
		v := o[k]
		switch k {
		case limiter.KeyManualReductionOff:
			b, ok := v.(bool)
			if !ok {
				return p, &limiter.FieldError{Field: k, Problem: "must be true or false"}
			}
			p.ManualReductionDisabled = &b
		case limiter.KeyMode:
			s, _ := v.(string)
			m, err := limiter.ParseMode(s)
			if err != nil {
				return p, &limiter.FieldError{Field: k, Problem: err.Error()}
			}
			p.Mode = &m
		case limiter.KeyAlgorithm:
			s, _ := v.(string)
			a, err := algo.Parse(s)
			if err != nil {
				return p, &limiter.FieldError{Field: k, Problem: err.Error()}
			}
			p.Algorithm = &a
		default:
			var i int64
			switch n := v.(type) {
			case int64:
				i = n
			case int:
				i = int64(n)
			case float64:
				if n != float64(int64(n)) {
					return p, &limiter.FieldError{Field: k, Problem: "must be an integer"}
				}
				i = int64(n)
			default:
				return p, &limiter.FieldError{Field: k, Problem: "must be an integer"}
			}
			dst := map[string]**int64{
				limiter.KeySlidingWindowLimit: &p.SlidingWindowLimit, limiter.KeySlidingWindowDuration: &p.SlidingWindowDuration,
				limiter.KeyCleanupInterval: &p.CleanupInterval, limiter.KeyCleanupExpiry: &p.CleanupExpiry,
				limiter.KeyLeakyLimit: &p.LeakyLimit, limiter.KeyLeakyTickInterval: &p.LeakyTickInterval,
				limiter.KeyLeakyTickReduction: &p.LeakyTickReduction, limiter.KeyConcurrencyLimit: &p.ConcurrencyLimit,
				limiter.KeyLimit: &p.Limit, limiter.KeyPeriod: &p.Period, limiter.KeyBurst: &p.Burst,
			}[k]
			if dst == nil {
				return p, &limiter.FieldError{Field: k, Problem: "unknown key"}
			}
			*dst = &i
		}
	}
	return p, nil
}

// Keys returns o's keys in the order of limiter.GroupKeys.
func (o Override) Keys() []string {
	out := make([]string, 0, len(o))
	for k := range o {
		out = append(out, k)
	}
	order := map[string]int{}
	for i, k := range limiter.GroupKeys {
		order[k] = i
	}
	sort.Slice(out, func(a, b int) bool {
		oa, okA := order[out[a]]
		ob, okB := order[out[b]]
		if okA != okB {
			return okA
		}
		if oa != ob {
			return oa < ob
		}
		return out[a] < out[b]
	})
	return out
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
