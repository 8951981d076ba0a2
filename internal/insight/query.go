package insight

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// PeerQuery selects and orders tracked entries.
type PeerQuery struct {
	Group  string
	Prefix netip.Prefix // zero: every peer
	Sort   string       // rejections | requests | tokens | last_seen | inflight
	Limit  int
	Offset int
}

// sortTable is every order a peer query can take, by name, with the key
// it ranks entries by (highest first), in the order the dashboard offers
// them: the one table of them.
var sortTable = []struct {
	name string
	key  func(v *limiter.EntryView) int64
}{
	{"rejections", func(v *limiter.EntryView) int64 { return int64(v.RejectedConcurrency + v.RejectedRateLimit) }},
	{"requests", func(v *limiter.EntryView) int64 { return int64(v.Requests) }},
	{"tokens", func(v *limiter.EntryView) int64 { return v.Tokens }},
	{"last_seen", func(v *limiter.EntryView) int64 { return v.LastSeen.Unix() }},
	{"inflight", func(v *limiter.EntryView) int64 { return v.Inflight }},
}

// SortOrders returns the names of the orders a PeerQuery may take, the
// default first.
func SortOrders() []string {
	out := make([]string, len(sortTable))
	for i, s := range sortTable {
		out[i] = s.name
	}
	return out
}

// SortKey returns the key order ranks entries by, highest first.
func SortKey(order string) (func(v *limiter.EntryView) int64, bool) {
	for _, s := range sortTable {
		if s.name == order {
			return s.key, true
		}
	}
	return nil, false
}

// ParsePeerQuery reads ?group=&q=&sort=&limit=&cursor=; a bad parameter
// is a *limiter.FieldError naming it.
func ParsePeerQuery(v map[string][]string) (PeerQuery, error) {
	get := func(k string) string {
		if x := v[k]; len(x) > 0 {
			return x[0]
		}
		return ""
	}
	q := PeerQuery{Group: get("group"), Sort: get("sort"), Limit: 50}
	if q.Sort == "" {
		q.Sort = "rejections"
	}
	if _, ok := SortKey(q.Sort); !ok {
		return q, &limiter.FieldError{Field: "sort", Problem: "one of " + strings.Join(SortOrders(), ", ")}
	}
	if s := strings.TrimSpace(get("q")); s != "" {
		p, err := parseSearch(s)
		if err != nil {
			return q, &limiter.FieldError{Field: "q", Problem: fmt.Sprintf("%q is not an IP address or a CIDR: search for one such as 203.0.113.7, 203.0.113.0/24 or 2001:db8::/48", s)}
		}
		q.Prefix = p
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, &limiter.FieldError{Field: "limit", Problem: "an integer from 1 to 1000"}
		}
		q.Limit = n
	}
	if s := get("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		n, err2 := strconv.Atoi(string(b))
		if err != nil || err2 != nil || n < 0 || n > 1_000_000 {
			return q, &limiter.FieldError{Field: "cursor", Problem: "not a cursor this API returned"}
		}
		q.Offset = n
	}
	return q, nil
}

// parseSearch accepts an IP (a /32 or /128) or a CIDR.
func parseSearch(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// matchPrefix reports whether the addresses of key k overlap p.
func matchPrefix(k peer.Key, p netip.Prefix) bool {
	kp, ok := k.Prefix()
	return ok && kp.Overlaps(p)
}

// QueryPeers returns the page of entries q asks for, ordered by q.Sort
// descending, and the total number matching. It keeps at most
// offset+limit entries while it scans (a bounded heap), never the whole
// table.
func QueryPeers(lim *limiter.Limiter, now time.Time, q PeerQuery) ([]limiter.EntryView, int) {
	top := newEntryTop(q.Sort, q.Offset+q.Limit)
	total := 0
	lim.Each(now, func(v limiter.EntryView) bool {
		if q.Group != "" && v.Group != q.Group {
			return true
		}
		if q.Prefix.IsValid() && !matchPrefix(v.Peer, q.Prefix) {
			return true
		}
		total++
		top.Offer(&v)
		return true
	})
	out := top.Drain()
	if q.Offset >= len(out) {
		return nil, total
	}
	return out[q.Offset:], total
}
