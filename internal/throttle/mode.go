package throttle

import "fmt"

// Mode is throttle.mode: how the throttle paces a peer (docs/throttle.md).
type Mode uint8

// The modes of the throttle.
const (
	// ModeFixed is ar_rate_limiter's (Arweave 2.9.6 and HyperBEAM): a
	// fixed rate per (peer, type) from the rule table.
	ModeFixed Mode = iota
	// ModeAdaptive is Arweave 2.9.7's client throttle: each peer's quota
	// per group, learned from the ratelimit-* fields of its replies
	// (Observe).
	ModeAdaptive
)

var modeNames = [...]string{ModeFixed: "fixed", ModeAdaptive: "adaptive"}

// String returns "fixed" or "adaptive".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// ParseMode parses "fixed" or "adaptive".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf(`must be "fixed" or "adaptive", got %q`, s)
}
