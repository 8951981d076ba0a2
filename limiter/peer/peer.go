// Package peer says who sent a request: its TCP source or, behind a
// trusted proxy, the client its Forwarded or X-Forwarded-For chain names
// (Identifier); the Key limits track that peer under (an IPv4 address, an
// IPv6 prefix, or an opaque key); and sets of addresses and CIDRs (Set)
// for the exempt peers, the deny list and the trusted proxies.
//
// The package imports the standard library only. Its values are immutable
// once built and safe for concurrent reads.
package peer

import (
	"fmt"
	"net/netip"
	"strings"
)

// Peer is a request's source. Addr is the client's address, unmapped
// (IPv4-mapped IPv6 is IPv4) and without a zone; it is invalid when the
// source could not be parsed. Key is what limits track the peer under: the
// address keyed by KeyFromAddr, or an OpaqueKey of the unparsable
// text.
type Peer struct {
	Addr netip.Addr
	Key  Key
}

// Identifier finds the peer of a request (docs/limiting.md, "Peers"): the TCP
// source, or, when that source is a trusted proxy, the client named by the
// proxy chain in its Forwarded or X-Forwarded-For header. It is immutable and
// safe for concurrent use.
type Identifier struct {
	trusted    *Set
	ipv6Prefix int
	header     ForwardedHeader
}

// ForwardedHeader says which forwarding header a trusted proxy's chain is
// read from (peers.forwarded_header). Only the header the proxy writes can
// be believed: a header the proxy passes through untouched is whatever the
// client sent.
type ForwardedHeader uint8

// The forwarding headers.
const (
	// ForwardedUnset names no header: valid only without trusted proxies,
	// whose headers are then never read anyway.
	ForwardedUnset ForwardedHeader = iota
	// ForwardedXFF reads X-Forwarded-For only.
	ForwardedXFF
	// ForwardedRFC7239 reads Forwarded (RFC 7239) only.
	ForwardedRFC7239
)

var forwardedHeaderNames = [...]string{"", "x-forwarded-for", "forwarded"}

// String returns the configuration name of h ("" when unset).
func (h ForwardedHeader) String() string {
	if int(h) < len(forwardedHeaderNames) {
		return forwardedHeaderNames[h]
	}
	return fmt.Sprintf("ForwardedHeader(%d)", uint8(h))
}

// ParseForwardedHeader parses the value of peers.forwarded_header:
// "x-forwarded-for" or "forwarded", in any case, or "" (unset). "auto",
// which earlier versions accepted, is refused: it believed whichever of the
// two headers a request carried, so behind a proxy that writes one a
// client could name itself in the other (decision 14).
func ParseForwardedHeader(s string) (ForwardedHeader, error) {
	for i, n := range forwardedHeaderNames {
		if strings.EqualFold(s, n) {
			return ForwardedHeader(i), nil
		}
	}
	if strings.EqualFold(s, "auto") {
		return 0, fmt.Errorf(`peers.forwarded_header: "auto" is no longer accepted (a client could name itself in the header the proxy does not write): set the one your trusted proxies write, x-forwarded-for or forwarded`)
	}
	return 0, fmt.Errorf("peers.forwarded_header: must be x-forwarded-for or forwarded, got %q", s)
}

// MalformedForwarded is the key of every request whose trusted proxy's
// chain has an element that names no address where the peer would be
// ("unknown", an obfuscated "_hidden" identifier, garbage): such requests
// share this one bucket. They are never exempt, never the proxy, and
// never get a bucket of their own per variation of the text.
var MalformedForwarded = OpaqueKey("limiterd: malformed forwarding header")

// NewIdentifier returns an Identifier that believes the forwarding header
// chosen by header of sources in trusted (nil: nobody) and keys IPv6 peers
// by their first ipv6Prefix bits. ipv6Prefix must be 1..120 or 128 (the
// whole address); anything else is an error naming peers.ipv6_prefix.
func NewIdentifier(trusted *Set, ipv6Prefix int, header ForwardedHeader) (*Identifier, error) {
	// Prefixes of 121..127 bits are refused: the key of a masked prefix
	// keeps its length in the place of the last byte (see KeyFromAddr).
	if (ipv6Prefix < 1 || ipv6Prefix > 120) && ipv6Prefix != 128 {
		return nil, fmt.Errorf("peers.ipv6_prefix: must be 1 to 120, or 128 for whole addresses, got %d", ipv6Prefix)
	}
	if int(header) >= len(forwardedHeaderNames) {
		return nil, fmt.Errorf("peers.forwarded_header: unknown value %d", header)
	}
	if header == ForwardedUnset && trusted.Len() > 0 {
		return nil, fmt.Errorf("peers.forwarded_header: must be set when peers.trusted_proxies is not empty: name the header your proxies write, x-forwarded-for or forwarded (the other is never believed)")
	}
	return &Identifier{trusted: trusted, ipv6Prefix: ipv6Prefix, header: header}, nil
}

// PeerFromAddr returns the peer of an already parsed address, keyed as
// PeerOf would key it. The zone is dropped and IPv4-mapped IPv6 is IPv4.
// An invalid a gives the zero Peer, whose Key is not valid.
func (id *Identifier) PeerFromAddr(a netip.Addr) Peer {
	if !a.IsValid() {
		return Peer{}
	}
	a = a.Unmap().WithZone("")
	return Peer{Addr: a, Key: KeyFromAddr(a, id.ipv6Prefix)}
}

// ParsePeer parses a peer named by an API caller: "1.2.3.4",
// "1.2.3.4:80", "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:443".
// A port, if any, must be a number from 0 to 65535 and is ignored; a zone is
// dropped. Anything else is an error quoting s.
func (id *Identifier) ParsePeer(s string) (Peer, error) {
	a, ok := parseHostPort(s, false)
	if !ok {
		return Peer{}, fmt.Errorf("peer %q: not an IP address or IP:port", s)
	}
	return id.PeerFromAddr(a), nil
}

// Header is the read side of a request's header fields: http.Header
// satisfies it. (The core does not import net/http.)
type Header interface {
	// Values returns every value of the canonical header key.
	Values(key string) []string
}

// PeerOf returns the peer of a request whose http.Request.RemoteAddr is
// remoteAddr and whose headers are h. It never panics and always returns a
// valid Key.
//
// The peer is the TCP source: remoteAddr is "ip:port", "[ipv6%zone]:port" or
// an address without a port; the port is ignored and the zone dropped. When
// remoteAddr is not an address at all ("", "@", a unix socket path) the
// peer has an invalid Addr and the Key OpaqueKey(remoteAddr): distinct
// texts get distinct keys, but every request with the same text shares one,
// so limiterd's listeners must be TCP.
//
// Only when the TCP source is in the trusted set are the forwarding headers
// read (otherwise they are never even parsed), and only the one the
// trusted proxies write (the Identifier's ForwardedHeader): X-Forwarded-For,
// or Forwarded (RFC 7239, the "for" parameter of each element). The other
// is never read: a header the proxy passes through untouched is whatever
// the client sent. Header lines are taken in order and their
// comma-separated elements form one chain, empty elements skipped. The
// chain is walked from the right, passing over addresses in the trusted
// set: the first address that is not trusted is the peer. When every
// address is trusted the peer is the left-most one, the furthest we know;
// when the header is absent, the proxy itself. An element that gives no
// address where the walk needs one (garbage, "unknown", an obfuscated
// "_hidden" identifier, a Forwarded element without "for", a quoted value
// with escapes) makes the peer MalformedForwarded, one bucket for all such
// requests: not the trusted hop to its right (which may be exempt, as
// 127.0.0.1 is by default), and not a key of the text (which would give a
// client a fresh bucket for every variation it sends).
//
// PeerOf does not allocate for a well-formed source, with or without a
// trusted proxy's chain; only malformed text that looks like an address
// costs the allocation of netip's parse error.
func (id *Identifier) PeerOf(remoteAddr string, h Header) Peer {
	a, ok := parseHostPort(remoteAddr, false)
	if !ok {
		return Peer{Key: OpaqueKey(remoteAddr)}
	}
	a = a.Unmap().WithZone("")
	if id.trusted.Len() > 0 && id.trusted.Contains(a) && h != nil {
		var ok bool
		if a, ok = id.forwardedPeer(a, h); !ok {
			return Peer{Key: MalformedForwarded}
		}
	}
	return Peer{Addr: a, Key: KeyFromAddr(a, id.ipv6Prefix)}
}

// forwardedPeer walks the forwarding chain of a request received from the
// trusted proxy at proxy; ok is false when a malformed element stopped it.
func (id *Identifier) forwardedPeer(proxy netip.Addr, h Header) (peer netip.Addr, ok bool) {
	w := chainWalk{trusted: id.trusted, last: proxy}
	switch id.header {
	case ForwardedXFF:
		w.xff(h)
	case ForwardedRFC7239:
		w.forwarded(h)
	}
	return w.last, !w.malformed
}

// forwarded walks the Forwarded lines of h from the right.
func (w *chainWalk) forwarded(h Header) {
	lines := h.Values("Forwarded")
	for i := len(lines) - 1; i >= 0 && !w.done; i-- {
		rest := lines[i]
		for !w.done {
			before, elem, more := cutLastForwarded(rest)
			if elem = trimOWS(elem); elem != "" {
				a, ok := forwardedFor(elem)
				w.step(a, ok)
			}
			if !more {
				break
			}
			rest = before
		}
	}
}

// xff walks the X-Forwarded-For lines of h from the right.
func (w *chainWalk) xff(h Header) {
	lines := h.Values("X-Forwarded-For")
	for i := len(lines) - 1; i >= 0 && !w.done; i-- {
		rest := lines[i]
		for !w.done {
			before, elem, more := rest, rest, false
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				before, elem, more = rest[:j], rest[j+1:], true
			}
			if elem = trimOWS(elem); elem != "" {
				a, ok := parseHostPort(elem, true)
				w.step(a, ok)
			}
			if !more {
				break
			}
			rest = before
		}
	}
}

// chainWalk is the state of a right-to-left walk over a forwarding chain.
type chainWalk struct {
	trusted   *Set
	last      netip.Addr // the peer so far: the last hop identified
	done      bool       // the walk is over
	malformed bool       // an element named no address where the peer would be
}

// step takes the next element to the left: its address, or ok false when
// it names none.
func (w *chainWalk) step(a netip.Addr, ok bool) {
	if !ok {
		w.done, w.malformed = true, true
		return
	}
	w.last = a.Unmap().WithZone("")
	if !w.trusted.Contains(w.last) {
		w.done = true
	}
}

// cutLastForwarded splits a Forwarded line at its last comma outside a
// quoted string. more is false when elem is the whole line. An unbalanced
// quote makes the rest of the line one (malformed) element.
func cutLastForwarded(s string) (before, elem string, more bool) {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ',':
			return s[:i], s[i+1:], true
		case '"':
			j := openingQuote(s, i)
			if j < 0 {
				return "", s, false
			}
			i = j
		}
	}
	return "", s, false
}

// openingQuote returns the index of the quote opening the quoted string
// that the quote at end closes, or -1. A quote is escaped when an odd run of
// backslashes precedes it.
func openingQuote(s string, end int) int {
	for j := end - 1; j >= 0; j-- {
		if s[j] != '"' {
			continue
		}
		k := j
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		j = k
	}
	return -1
}

// forwardedFor returns the address in the for parameter of one Forwarded
// element ("for=192.0.2.60;proto=http", `For="[2001:db8::17]:4711"`). ok is
// false when the element has no for parameter, more than one, or one that is
// not an address ("unknown", "_hidden", garbage, a quoted value with
// escapes), or when a quote in it never closes.
func forwardedFor(elem string) (a netip.Addr, ok bool) {
	var val string
	found := false
	for elem != "" {
		// Cut the next pair at a semicolon outside quotes.
		pair := elem
		elem = ""
		quoted := false
		for i := 0; i < len(pair); i++ {
			c := pair[i]
			if quoted && c == '\\' {
				i++
				continue
			}
			if c == '"' {
				quoted = !quoted
			} else if c == ';' && !quoted {
				pair, elem = pair[:i], pair[i+1:]
				break
			}
		}
		if quoted {
			// A quote that never closes: the element is malformed, as
			// cutLastForwarded says, whatever precedes it.
			return netip.Addr{}, false
		}
		name, v, hasEq := strings.Cut(pair, "=")
		if !hasEq || !strings.EqualFold(trimOWS(name), "for") {
			continue
		}
		if found {
			return netip.Addr{}, false
		}
		found, val = true, trimOWS(v)
	}
	if !found {
		return netip.Addr{}, false
	}
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		val = val[1 : len(val)-1]
		if strings.ContainsAny(val, "\"\\") {
			return netip.Addr{}, false
		}
	}
	return parseHostPort(val, true)
}

// parseHostPort parses "ip", "ip:port", "[ipv6]" or "[ipv6]:port" (an IPv6
// address may carry a zone). The port must be a decimal number up to 65535
// or, when obfPort is set, an RFC 7239 obfuscated port ("_abc").
func parseHostPort(s string, obfPort bool) (netip.Addr, bool) {
	host := s
	if len(s) > 0 && s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:], obfPort)) {
			return netip.Addr{}, false
		}
		if strings.IndexByte(host, ':') < 0 {
			return netip.Addr{}, false // brackets are for IPv6 only
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.IndexByte(s[:i], ':') < 0 {
		// One colon: IPv4 with a port. More: a bare IPv6 address.
		if !validPort(s[i+1:], obfPort) {
			return netip.Addr{}, false
		}
		host = s[:i]
	}
	if !maybeAddr(host) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a, true
}

// maybeAddr reports whether s could be an IP address, so that common
// garbage ("unknown", "_hidden", a path) is refused without the cost of
// netip's error.
func maybeAddr(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F', c == ':', c == '.':
		case c == '%':
			return i > 0 && i < len(s)-1 // a zone, any text
		default:
			return false
		}
	}
	return true
}

// validPort reports whether s is a decimal port (0..65535) or, with obf, an
// obfuscated port: "_" then letters, digits, ".", "_" or "-".
func validPort(s string, obf bool) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		if !obf || len(s) < 2 {
			return false
		}
		for i := 1; i < len(s); i++ {
			c := s[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return true
	}
	if len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// trimOWS trims HTTP optional whitespace (spaces and tabs).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
