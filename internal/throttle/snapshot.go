package throttle

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Snapshot is the throttle's state as plain values, for persistence
// (MarshalSnapshot): the store keeps it as the JSON the throttle writes,
// without needing to know its shape.
type Snapshot struct {
	// TakenAt is when the snapshot was taken, Unix ms.
	TakenAt int64       `json:"taken_at_ms"`
	Enabled bool        `json:"enabled"`
	Keys    []KeyRecord `json:"keys"`
	// Adaptive is the adaptive throttle's state (throttle mode adaptive,
	// docs/throttle.md), its AdaptiveSnapshot as JSON; absent when it learned
	// nothing, and in snapshots older than it.
	Adaptive json.RawMessage `json:"adaptive,omitempty"`
}

// KeyRecord is one (peer, type) of a Snapshot.
type KeyRecord struct {
	Peer string `json:"peer"`
	Type string `json:"type"`
	// Timestamps are the admissions in the window, Unix ms, oldest first.
	Timestamps []int64 `json:"timestamps"`
}

// MarshalSnapshot returns the throttle's state as of now as JSON: what the
// store saves and restores with RestoreSnapshot.
func (t *Throttle) MarshalSnapshot(now time.Time) ([]byte, error) {
	return json.Marshal(t.Snapshot(now))
}

// RestoreSnapshot restores a state MarshalSnapshot wrote (see Restore);
// JSON that does not decode, or fails CheckSnapshot, changes nothing and
// is an error naming what is wrong.
func (t *Throttle) RestoreSnapshot(now time.Time, b []byte) error {
	s, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	t.Restore(now, s)
	return nil
}

// CheckSnapshot reports what is wrong with a saved state before it is
// imported: JSON that does not decode, a key without a peer or a type, or
// timestamps out of order, the error naming the field
// ("throttle.keys[3].peer: missing").
func CheckSnapshot(b []byte) error {
	_, err := decodeSnapshot(b)
	return err
}

func decodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return s, fmt.Errorf("throttle.%s: must be a JSON %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return s, fmt.Errorf("throttle: %w", err)
	}
	for i, k := range s.Keys {
		path := fmt.Sprintf("throttle.keys[%d]", i)
		switch {
		case k.Peer == "":
			return s, fmt.Errorf("%s.peer: missing", path)
		case k.Type == "":
			return s, fmt.Errorf("%s.type: missing", path)
		case !slices.IsSorted(k.Timestamps):
			return s, fmt.Errorf("%s.timestamps: not in ascending order", path)
		}
	}
	return s, nil
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "struct", "map":
		return "object"
	}
	return "number"
}
