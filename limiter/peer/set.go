package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// ParsePrefix parses one item of an address list (peers.trusted_proxies,
// peers.exempt, the deny list): a single address ("1.2.3.4",
// "2001:db8::1", a /32 or /128) or a CIDR ("10.0.0.0/8", "2001:db8::/32").
// IPv4-mapped IPv6 is IPv4: "::ffff:1.2.3.4" is 1.2.3.4/32 and
// "::ffff:10.0.0.0/104" is 10.0.0.0/8. It refuses an empty string, an IPv6
// zone, surrounding spaces and a CIDR with host bits set ("10.0.0.1/8": the
// error suggests "10.0.0.0/8"), so that a typo never silently widens or
// narrows a list. Errors start with the quoted input.
func ParsePrefix(s string) (netip.Prefix, error) {
	switch {
	case s == "":
		return netip.Prefix{}, errors.New(`"": empty address`)
	case strings.TrimSpace(s) != s:
		return netip.Prefix{}, fmt.Errorf("%q: leading or trailing space", s)
	case strings.IndexByte(s, '%') >= 0:
		return netip.Prefix{}, fmt.Errorf("%q: an IPv6 zone (%%...) cannot be used in an address list", s)
	}
	var p netip.Prefix
	if strings.IndexByte(s, '/') >= 0 {
		var err error
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR: %w", s, err)
		}
		if m := p.Masked(); m != p {
			return netip.Prefix{}, fmt.Errorf("%q: host bits are set after /%d; did you mean %q?", s, p.Bits(), canonicalPrefix(m).String())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR: %w", s, err)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return canonicalPrefix(p), nil
}

// canonicalPrefix masks p and turns an IPv4-mapped IPv6 prefix of 96 bits
// or more into the IPv4 prefix it stands for. A shorter prefix of the mapped
// range stays IPv6 and, since addresses are unmapped before matching, never
// matches an IPv4 address.
func canonicalPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Set is a set of IP addresses and CIDRs: the exempt peers, the deny
// list, the trusted proxies. It is immutable once built and safe for
// concurrent use. The nil *Set is the empty set.
//
// Contains is a binary search over the merged address ranges of the set, so
// it costs the same few nanoseconds with one entry or with tens of
// thousands, and never allocates.
type Set struct {
	prefixes []netip.Prefix // canonical, sorted, deduplicated
	v4       []span4        // disjoint, sorted, non-adjacent
	v6       []span6        // disjoint, sorted, non-adjacent
}

// span4 is the closed range of IPv4 addresses lo..hi as integers.
type span4 struct{ lo, hi uint32 }

// u128 is an IPv6 address as a 128-bit integer.
type u128 struct{ hi, lo uint64 }

// span6 is the closed range of IPv6 addresses lo..hi.
type span6 struct{ lo, hi u128 }

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

func (a u128) isMax() bool { return a.hi == math.MaxUint64 && a.lo == math.MaxUint64 }

func (a u128) next() u128 {
	if a.lo == math.MaxUint64 {
		return u128{a.hi + 1, 0}
	}
	return u128{a.hi, a.lo + 1}
}

func u128From(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// hostMask returns the mask of the 128-bits host part of an IPv6 /bits.
func hostMask(bits int) u128 {
	switch {
	case bits <= 0:
		return u128{math.MaxUint64, math.MaxUint64}
	case bits < 64:
		return u128{math.MaxUint64 >> bits, math.MaxUint64}
	case bits < 128:
		return u128{0, math.MaxUint64 >> (bits - 64)}
	}
	return u128{}
}

// NewSet returns the set of the given prefixes. Each is masked and
// IPv4-mapped prefixes become IPv4 (as by ParsePrefix); invalid prefixes
// are skipped. ps is not retained.
func NewSet(ps []netip.Prefix) *Set {
	s := &Set{prefixes: make([]netip.Prefix, 0, len(ps))}
	for _, p := range ps {
		if p.IsValid() {
			s.prefixes = append(s.prefixes, canonicalPrefix(p))
		}
	}
	slices.SortFunc(s.prefixes, comparePrefix)
	s.prefixes = slices.Compact(s.prefixes)
	s.prefixes = slices.Clip(s.prefixes)

	// The prefixes are sorted by address, so their ranges come sorted by
	// start: one pass merges overlapping and adjacent ranges.
	for _, p := range s.prefixes {
		if p.Addr().Is4() {
			b := p.Addr().As4()
			lo := binary.BigEndian.Uint32(b[:])
			hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
			if n := len(s.v4); n > 0 && (lo <= s.v4[n-1].hi || (s.v4[n-1].hi != math.MaxUint32 && lo == s.v4[n-1].hi+1)) {
				s.v4[n-1].hi = max(s.v4[n-1].hi, hi)
				continue
			}
			s.v4 = append(s.v4, span4{lo, hi})
			continue
		}
		lo := u128From(p.Addr())
		m := hostMask(p.Bits())
		hi := u128{lo.hi | m.hi, lo.lo | m.lo}
		if n := len(s.v6); n > 0 {
			last := &s.v6[n-1]
			if !last.hi.less(lo) || (!last.hi.isMax() && last.hi.next() == lo) {
				if last.hi.less(hi) {
					last.hi = hi
				}
				continue
			}
		}
		s.v6 = append(s.v6, span6{lo, hi})
	}
	return s
}

// comparePrefix orders prefixes by address (IPv4 first), then length.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// ParseSet parses each item with ParsePrefix and returns their set.
// The error names the first bad item by index: `[2] "10.0.0.1/8": ...`.
func ParseSet(items []string) (*Set, error) {
	ps := make([]netip.Prefix, len(items))
	for i, it := range items {
		p, err := ParsePrefix(it)
		if err != nil {
			return nil, fmt.Errorf("[%d] %w", i, err)
		}
		ps[i] = p
	}
	return NewSet(ps), nil
}

// Contains reports whether a is in the set. a is unmapped first (an
// IPv4-mapped address matches IPv4 entries, never IPv6 ones) and its zone
// is ignored. An invalid a and a nil set contain nothing. It does not
// allocate.
func (s *Set) Contains(a netip.Addr) bool {
	if s == nil {
		return false
	}
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		x := binary.BigEndian.Uint32(b[:])
		v := s.v4
		// The first range ending at or after x is the only candidate.
		i, j := 0, len(v)
		for i < j {
			h := int(uint(i+j) >> 1)
			if v[h].hi < x {
				i = h + 1
			} else {
				j = h
			}
		}
		return i < len(v) && v[i].lo <= x
	}
	if !a.Is6() {
		return false
	}
	x := u128From(a)
	v := s.v6
	i, j := 0, len(v)
	for i < j {
		h := int(uint(i+j) >> 1)
		if v[h].hi.less(x) {
			i = h + 1
		} else {
			j = h
		}
	}
	return i < len(v) && !x.less(v[i].lo)
}

// Prefixes returns a copy of the set's prefixes in canonical form (masked,
// IPv4-mapped as IPv4), sorted by address then length, without duplicates.
// A prefix inside another one is kept: this is the list as configured.
func (s *Set) Prefixes() []netip.Prefix {
	if s == nil {
		return nil
	}
	return slices.Clone(s.prefixes)
}

// Len returns the number of distinct prefixes in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.prefixes)
}

// FormatPrefix returns p as an operator writes it: the bare address for a
// single host (a /32 or a /128), the CIDR otherwise.
func FormatPrefix(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}
