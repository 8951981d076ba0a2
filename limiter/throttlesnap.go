package limiter

import "encoding/json"

// ThrottleSnapshot is the outbound throttle's state (package throttle) as
// plain values, for persistence: the core keeps the vocabulary of every
// snapshot, so that the store needs no other package to save it.
type ThrottleSnapshot struct {
	// TakenAt is when the snapshot was taken, Unix ms.
	TakenAt int64               `json:"taken_at_ms"`
	Enabled bool                `json:"enabled"`
	Keys    []ThrottleKeyRecord `json:"keys"`
	// Adaptive is the adaptive throttle's state (throttle mode adaptive,
	// SPEC §10), as package throttle encodes it (its AdaptiveSnapshot);
	// absent when it learned nothing, and in snapshots older than it.
	Adaptive json.RawMessage `json:"adaptive,omitempty"`
}

// ThrottleKeyRecord is one (peer, type) of a ThrottleSnapshot.
type ThrottleKeyRecord struct {
	Peer string `json:"peer"`
	Type string `json:"type"`
	// Timestamps are the admissions in the window, Unix ms, oldest first.
	Timestamps []int64 `json:"timestamps"`
}
