package throttle

import (
	"strconv"
	"strings"
)

// Limits of the adaptive throttle, those of Arweave 2.9.7's client
// (arweave_throttling) and limiterd's own bounds on what a peer can make
// it hold.
const (
	// MaxGroupIDBytes is the longest group id a reply may name; a longer
	// one makes the peer incompatible, as a missing field does.
	MaxGroupIDBytes = 128
	// MaxGroupsPerPeer is how many distinct group ids one peer may name;
	// a reply naming one more is refused (too_many_groups).
	MaxGroupsPerPeer = 1000
	// MaxWaitingPerPeer is how many calls may wait on one peer; one more
	// goes at once (queue_full: the node sends anyway).
	MaxWaitingPerPeer = 5000
	// MaxResetSeconds is the largest ratelimit-reset accepted: a day.
	MaxResetSeconds = 86400
	// MaxRoutesPerPeer bounds the (path key → group) routes learned per
	// peer (limiterd's: the node keeps every path key it sees).
	MaxRoutesPerPeer = 1000
	// MaxAdaptivePeers bounds the peers the adaptive throttle tracks
	// (limiterd's); a reply from one more peer is not learned, and its
	// calls are not throttled.
	MaxAdaptivePeers = 100_000
	// MaxPathKeyBytes bounds a path learned as a route.
	MaxPathKeyBytes = 1024
)

// Quota is a peer's quota for one group, as the four ratelimit-* fields
// of a reply give it (docs/replies.md, "The Arweave fields";
// docs/throttle.md).
type Quota struct {
	// GroupID is the group named in the first policy of ratelimit-limit.
	GroupID string
	// Total is the first number of ratelimit-limit, ≥ 1.
	Total int64
	// Remaining is ratelimit-remaining, 0 … Total−1.
	Remaining int64
	// ResetAmount is ratelimit-reset-amount, ≥ 1: what the next refill
	// restores.
	ResetAmount int64
	// ResetSeconds is ratelimit-reset, 0 … MaxResetSeconds.
	ResetSeconds int64
}

// ParseErrorKind says why ParseQuota refused a reply's fields, with the
// 2.9.7 client's name for it (arweave_throttling_http_headers).
type ParseErrorKind uint8

// The reasons of a ParseError.
const (
	// MissingHeader: one of the four fields is absent; the peer is then
	// taken as incompatible (never throttled).
	MissingHeader ParseErrorKind = iota
	// InvalidValue: a field is an integer out of its range.
	InvalidValue
	// MalformedHeaders: a field is not an integer, or ratelimit-limit has
	// no policy.
	MalformedHeaders
	// MissingGroupID: the policy names no group (a 2.9.6-alpha2 node).
	MissingGroupID
	// MalformedPolicy: the policy is neither "<id> usage" nor
	// "<id> concurrency".
	MalformedPolicy
	// GroupIDTooLong: the group id is over MaxGroupIDBytes; like a
	// missing field, the peer is taken as incompatible.
	GroupIDTooLong
)

var parseErrorNames = [...]string{MissingHeader: "missing_header", InvalidValue: "invalid_header_value",
	MalformedHeaders: "malformed_headers", MissingGroupID: "missing_group_id", MalformedPolicy: "malformed_policy",
	GroupIDTooLong: "header_id_too_long"}

// String returns the 2.9.7 client's name of k.
func (k ParseErrorKind) String() string { return parseErrorNames[k] }

// ParseError is why a reply's rate-limit fields were refused.
type ParseError struct {
	Kind ParseErrorKind
	// Header is the field at fault, when one is.
	Header string
}

// Error returns "<kind>" or "<kind>: <header>".
func (e *ParseError) Error() string {
	if e.Header == "" {
		return e.Kind.String()
	}
	return e.Kind.String() + ": " + e.Header
}

// Incompatible reports whether the error makes the peer incompatible
// (a missing field, a group id too long) rather than leaving its quota as
// it was.
func (e *ParseError) Incompatible() bool { return e.Kind == MissingHeader || e.Kind == GroupIDTooLong }

// The header names, lower-case, in the order the client looks them up.
var quotaHeaders = [4]string{"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-reset-amount"}

// ParseQuota reads a reply's four ratelimit-* fields as Arweave 2.9.7's
// client does (arweave_throttling_http_headers:parse/1), header names
// compared case-insensitively:
//
//   - the first of ratelimit-limit, -remaining, -reset, -reset-amount that
//     is absent is MissingHeader;
//   - ratelimit-limit's text before its first "," is the total, ≥ 1; the
//     group id is the text after its first `policy="` up to the next `"`,
//     trimmed, less a final "usage" or "concurrency" (else MalformedPolicy),
//     trimmed again, not empty (else MissingGroupID); no `policy="` at all
//     is MalformedHeaders;
//   - the integers, trimmed: remaining 0 … total−1, reset 0 … 86400,
//     amount ≥ 1; out of range is InvalidValue naming the field, not an
//     integer (or beyond 64 bits) MalformedHeaders;
//   - a group id over 128 bytes is GroupIDTooLong.
//
// Of several bad fields, the first in the order limit, remaining, amount,
// reset is reported.
func ParseQuota(headers map[string]string) (Quota, error) {
	var vals [4]string
	var found [4]bool
	for k, v := range headers {
		for i, name := range quotaHeaders {
			if !found[i] && len(k) == len(name) && strings.EqualFold(k, name) {
				vals[i], found[i] = v, true
			}
		}
	}
	for i, ok := range found {
		if !ok {
			return Quota{}, &ParseError{Kind: MissingHeader, Header: quotaHeaders[i]}
		}
	}
	limit := vals[0]
	first, _, _ := strings.Cut(limit, ",")
	total, err := headerInt(quotaHeaders[0], first, 1, -1)
	if err != nil {
		return Quota{}, err
	}
	_, after, ok := strings.Cut(limit, `policy="`)
	if !ok {
		return Quota{}, &ParseError{Kind: MalformedHeaders}
	}
	comment, _, _ := strings.Cut(after, `"`)
	comment = trim(comment)
	var id string
	switch {
	case strings.HasSuffix(comment, "usage"):
		id = trim(strings.TrimSuffix(comment, "usage"))
	case strings.HasSuffix(comment, "concurrency"):
		id = trim(strings.TrimSuffix(comment, "concurrency"))
	default:
		return Quota{}, &ParseError{Kind: MalformedPolicy}
	}
	if id == "" {
		return Quota{}, &ParseError{Kind: MissingGroupID}
	}
	q := Quota{Total: total}
	if q.Remaining, err = headerInt(quotaHeaders[1], vals[1], 0, total-1); err != nil {
		return Quota{}, err
	}
	if q.ResetAmount, err = headerInt(quotaHeaders[3], vals[3], 1, -1); err != nil {
		return Quota{}, err
	}
	if q.ResetSeconds, err = headerInt(quotaHeaders[2], vals[2], 0, MaxResetSeconds); err != nil {
		return Quota{}, err
	}
	if len(id) > MaxGroupIDBytes {
		return Quota{}, &ParseError{Kind: GroupIDTooLong}
	}
	q.GroupID = id
	return q, nil
}

// headerInt parses a trimmed decimal integer in min … max (max < 0: no
// bound).
func headerInt(name, s string, min, max int64) (int64, error) {
	n, err := strconv.ParseInt(trim(s), 10, 64)
	if err != nil {
		return 0, &ParseError{Kind: MalformedHeaders}
	}
	if n < min || (max >= 0 && n > max) {
		return 0, &ParseError{Kind: InvalidValue, Header: name}
	}
	return n, nil
}

// trim removes the white space Erlang's string:trim removes.
func trim(s string) string { return strings.TrimSpace(s) }
