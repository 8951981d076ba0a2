// Package ratelimit computes and formats the rate-limit header fields of a
// limited reply (docs/replies.md): the four fields Arweave 2.9.7 nodes send
// and parse to pace their own outgoing requests (ratelimit-limit,
// ratelimit-remaining, ratelimit-reset, ratelimit-reset-amount), exactly as
// the node's arweave_limiter_group and arweave_limiter_http_headers compute
// them, quirks included, and the IETF RateLimit and RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers); and which of them
// server.ratelimit_headers asks for (Set).
//
// It is part of the pure core: the standard library only, no clock, no state.
// The limiter fills its inputs from a decision (limiter.Decision.Arweave);
// the data plane writes what Write emits.
package ratelimit

import (
	"fmt"
	"strconv"
)

// Set is the value of server.ratelimit_headers: which rate-limit header
// fields a limited reply carries.
type Set uint8

// The sets of server.ratelimit_headers.
const (
	// SetBoth is the default: the IETF fields and the Arweave fields.
	SetBoth Set = iota
	// SetIETF is RateLimit-Policy and RateLimit only.
	SetIETF
	// SetArweave is the four ratelimit-* fields of Arweave 2.9.7 only.
	SetArweave
	// SetNone is no rate-limit field (Retry-After stays on every 429).
	SetNone
)

var setNames = [...]string{SetBoth: "both", SetIETF: "ietf", SetArweave: "arweave", SetNone: "none"}

// String returns the configuration name of s.
func (s Set) String() string {
	if int(s) < len(setNames) {
		return setNames[s]
	}
	return fmt.Sprintf("Set(%d)", s)
}

// ParseSet parses "ietf", "arweave", "both" or "none".
func ParseSet(s string) (Set, error) {
	for i, n := range setNames {
		if n == s {
			return Set(i), nil
		}
	}
	return 0, fmt.Errorf("must be one of ietf, arweave, both, none, got %q", s)
}

// IETF reports whether s includes RateLimit-Policy and RateLimit.
func (s Set) IETF() bool { return s == SetBoth || s == SetIETF }

// Arweave reports whether s includes the four ratelimit-* fields.
func (s Set) Arweave() bool { return s == SetBoth || s == SetArweave }

// The names of the fields, as docs/replies.md writes them. HTTP field names are
// case-insensitive: the Arweave node writes RateLimit-Limit and so on, and
// its client lower-cases every name before looking one up (see
// decision 90).
const (
	NameLimit         = "ratelimit-limit"
	NameRemaining     = "ratelimit-remaining"
	NameReset         = "ratelimit-reset"
	NameResetAmount   = "ratelimit-reset-amount"
	NameIETFPolicy    = "RateLimit-Policy"
	NameIETFRateLimit = "RateLimit"
)

// Fields are the values of the four Arweave 2.9.7 fields of one reply:
//
//	ratelimit-limit: <Expiring>, <Usage>;policy="<group> usage", <Concurrency>;policy="<group> concurrency" ␠
//	ratelimit-remaining: <Remaining>
//	ratelimit-reset: <Reset>
//	ratelimit-reset-amount: <ResetAmount>
//
// For another algorithm than the hybrid (docs/replies.md): Expiring = Usage =
// L, Remaining what is left, Reset the seconds until the next admission is
// possible, ResetAmount what the next refill restores.
type Fields struct {
	// Expiring is the first number of ratelimit-limit: the hybrid's
	// sliding_window_limit + leaky_limit, or the concurrency limit on a
	// concurrency rejection.
	Expiring int64
	// Usage is the number of the "<group> usage" policy: always
	// sliding_window_limit + leaky_limit.
	Usage int64
	// Concurrency is the number of the "<group> concurrency" policy.
	Concurrency int64
	Remaining   int64
	// Reset is ratelimit-reset, whole seconds.
	Reset int64
	// ResetAmount is ratelimit-reset-amount.
	ResetAmount int64
}

// AppendLimit appends the value of ratelimit-limit for group to dst,
// byte for byte as the node's io_lib:format writes it, trailing space
// included.
func (f *Fields) AppendLimit(dst []byte, group string) []byte {
	dst = strconv.AppendInt(dst, f.Expiring, 10)
	dst = append(dst, ", "...)
	dst = strconv.AppendInt(dst, f.Usage, 10)
	dst = append(dst, `;policy="`...)
	dst = append(dst, group...)
	dst = append(dst, ` usage", `...)
	dst = strconv.AppendInt(dst, f.Concurrency, 10)
	dst = append(dst, `;policy="`...)
	dst = append(dst, group...)
	return append(dst, ` concurrency" `...)
}

// Outcome is how the hybrid decided a request, as the header fields need
// it.
type Outcome uint8

// The outcomes of a hybrid decision.
const (
	// AdmittedWindow: admitted within the sliding window.
	AdmittedWindow Outcome = iota
	// AdmittedBucket: admitted with a leaky-bucket token.
	AdmittedBucket
	// RejectedConcurrency: too many requests in flight.
	RejectedConcurrency
	// RejectedRate: the window full and the bucket exhausted.
	RejectedRate
)

// Hybrid is the state of a (peer, group) of the hybrid right after a
// decision, with the group's settings: what the Arweave fields are
// computed from. Times are milliseconds.
type Hybrid struct {
	Outcome Outcome
	// Now is the decision's time.
	Now int64
	// WindowLimit is sliding_window_limit.
	WindowLimit int64
	// Window is the number of unexpired window timestamps after the
	// decision: counting the request's own on AdmittedWindow.
	Window int64
	// Oldest is the oldest of them (meaningless when Window is 0).
	Oldest int64
	// LeakyLimit is leaky_limit (leaky_rate_limit).
	LeakyLimit int64
	// Tokens is the tokens consumed after the decision: counting the
	// request's own on AdmittedBucket.
	Tokens int64
	// NextTick is the time of the group's next leaky tick.
	NextTick int64
	// TickReduction is leaky_tick_reduction (tick_reduction).
	TickReduction int64
	// ConcurrencyLimit is concurrency_limit.
	ConcurrencyLimit int64
}

// ArweaveFields computes the four fields exactly as Arweave 2.9.7's
// arweave_limiter_group (build_headers_info) does:
//
//	expiring  = window limit + leaky limit (concurrency limit on a concurrency rejection)
//	remaining = window limit − window (window admission only, else 0) + leaky limit − tokens
//	            (0 on a rejection)
//	leaky reset  = max(1, (next tick − now) div 1000)
//	window reset = 0 with no timestamp or the oldest not in the past, else
//	               max(1, (now − oldest) div 1000): the AGE of the oldest
//	               timestamp, not the time until it expires (the node's quirk)
//	reset  = the window's when the window limit is not 0 and (the leaky
//	         limit is 0 or window reset < leaky reset), else the leaky one
//	amount = the window's timestamp count on a window admission, the tick
//	         reduction on a bucket admission, and on a rate rejection the
//	         one of whichever reset was chosen
//
// A concurrency rejection is {concurrency, 0, 1, concurrency}.
func ArweaveFields(h *Hybrid) Fields {
	usage := h.WindowLimit + h.LeakyLimit
	if h.Outcome == RejectedConcurrency {
		c := h.ConcurrencyLimit
		return Fields{Expiring: c, Usage: usage, Concurrency: c, Remaining: 0, Reset: 1, ResetAmount: c}
	}
	f := Fields{Expiring: usage, Usage: usage, Concurrency: h.ConcurrencyLimit}
	switch h.Outcome {
	case AdmittedWindow:
		f.Remaining = h.WindowLimit - h.Window + h.LeakyLimit - h.Tokens
	case AdmittedBucket:
		f.Remaining = h.LeakyLimit - h.Tokens
	}
	leakyReset := max(1, (h.NextTick-h.Now)/1000)
	var windowReset int64
	if h.Window > 0 && h.Oldest < h.Now {
		windowReset = max(1, (h.Now-h.Oldest)/1000)
	}
	byWindow := h.WindowLimit != 0 && (h.LeakyLimit == 0 || windowReset < leakyReset)
	if byWindow {
		f.Reset = windowReset
	} else {
		f.Reset = leakyReset
	}
	switch {
	case h.Outcome == AdmittedWindow, h.Outcome == RejectedRate && byWindow:
		f.ResetAmount = h.Window
	default:
		f.ResetAmount = h.TickReduction
	}
	return f
}
