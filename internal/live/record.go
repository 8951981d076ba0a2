package live

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Record is one field of the live state (Fields) as the instances of
// cluster mode agree on it: its value or its removal, and the stamp of
// the edit that made it so (docs/cluster.md, "Live edits"; decisions 193
// and 221). Stamps compare as strings: the greater is the newer edit.
type Record struct {
	Stamp   string `json:"stamp"`
	Value   string `json:"value,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

// Newer reports whether r is a newer edit than old.
func (r Record) Newer(old Record) bool { return r.Stamp > old.Stamp }

// Recorder gives each live edit the store commits its record, which the
// store keeps in the edit's own transaction (decision 36): Stamp returns
// the record of field's new value (removed: of its removal) and the
// clock's high-water mark; once the transaction has committed, the store
// calls Stamped with it. Stamp runs inside the store's write transaction:
// it must not wait for the store.
type Recorder interface {
	Stamp(field, value string, removed bool) (rec Record, clock string)
	Stamped(field string, rec Record)
}

// OverrideField returns the field of group's override o and its value
// (nil: the field is removed), as EncodeFields writes them.
func OverrideField(group string, o Override) (name, value string, removed bool) {
	if o == nil {
		return fieldGroup + group, "", true
	}
	return fieldGroup + group, overrideJSON(o), false
}

// ExemptionField returns the field of exemption e and its value, as
// EncodeFields writes them.
func ExemptionField(e Exemption) (name, value string) {
	b, _ := json.Marshal(e)
	return fieldExemption + string(e.Kind) + ":" + e.Value, string(b)
}

// SwitchField returns the field of the global switch and its value: the
// field is present while the switch is off.
func SwitchField(disabled bool) (name, value string, removed bool) {
	if disabled {
		return fieldSwitch, "off", false
	}
	return fieldSwitch, "", true
}

// CheckField reports whether name and value (ignored for a removal) are a
// field of the live state as EncodeFields writes it — a known kind of
// field, a value DecodeFields takes, written as EncodeFields writes it,
// under the name that value has — so that a record that is not one is
// refused alone rather than failing the whole state. The error names the
// field.
func CheckField(name, value string, removed bool) error {
	switch {
	case name == fieldSwitch:
		if removed || value == "off" {
			return nil
		}
		return fmt.Errorf("live field %q: %q, want \"off\"", name, value)
	case strings.HasPrefix(name, fieldGroup):
		if removed && name == fieldGroup {
			return fmt.Errorf("live field %q: no group name", name)
		}
		if removed {
			return nil
		}
	case strings.HasPrefix(name, fieldExemption):
		if removed {
			kind, v, _ := strings.Cut(strings.TrimPrefix(name, fieldExemption), ":")
			e, err := Exemption{Kind: ExemptionKind(kind), Value: v}.Normalize()
			if err != nil {
				return fmt.Errorf("live field %q: %w", name, err)
			}
			if n, _ := ExemptionField(e); n != name {
				return fmt.Errorf("live field %q: not the name of the exemption it names (%q)", name, n)
			}
			return nil
		}
	default:
		return fmt.Errorf("live field %q: unknown", name)
	}
	st, err := DecodeFields(Fields{name: value})
	if err != nil {
		return err
	}
	for n, v := range EncodeFields(st) {
		if n != name {
			return fmt.Errorf("live field %q: its value is that of field %q", name, n)
		}
		if v != value {
			return fmt.Errorf("live field %q: %q is not as limiterd writes it (%q)", name, value, v)
		}
	}
	return nil
}
