package peer

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"
)

// Key is the compact, comparable identity limits are tracked under: an
// IPv4 address, an IPv6 prefix, or an opaque key for a source whose address
// could not be parsed. The zero Key is invalid.
type Key [17]byte

// Kinds of Key, in its first byte.
const (
	keyInvalid byte = iota
	keyIPv4
	keyIPv6    // a whole IPv6 address
	keyIPv6Net // a masked IPv6 prefix of 1..120 bits, the length in the last byte
	keyOpaque
)

// KeyFromAddr returns the key of addr: IPv4 (and IPv4-mapped IPv6) by the
// whole address, IPv6 by its first ipv6Prefix bits (1..128). The zone is
// ignored. An invalid addr gives the zero key.
func KeyFromAddr(addr netip.Addr, ipv6Prefix int) Key {
	var k Key
	addr = addr.Unmap()
	switch {
	case addr.Is4():
		k[0] = keyIPv4
		a4 := addr.As4()
		copy(k[1:], a4[:])
	case addr.Is6():
		k[0] = keyIPv6
		bits := ipv6Prefix
		if bits <= 0 || bits > 120 {
			// Prefixes of 121..127 bits are refused by PeerConfig.Validate;
			// anything else out of range keys by the whole address.
			bits = 128
		}
		if bits < 128 {
			k[0] = keyIPv6Net
			addr = netip.PrefixFrom(addr.WithZone(""), bits).Masked().Addr()
		}
		a16 := addr.As16()
		copy(k[1:], a16[:])
		if bits < 128 {
			// The masked address ends in a zero byte: the prefix length
			// takes its place, so keys made under two ipv6_prefix settings
			// never collide.
			k[16] = byte(bits)
		}
	}
	return k
}

// ShardByte returns the byte of k that picks its worker shard
// (docs/arweave297.md; the shard is this byte mod number_of_workers): the
// last octet of an IPv4 address, as Arweave 2.9.7 does. Arweave has no IPv6
// path (its middleware accepts IPv4 peers only), so the rest is limiterd's
// own extension: for an IPv6 prefix key (a /64 by default) the last byte of
// the prefix, for a whole IPv6 address or an opaque key its last byte.
func (k *Key) ShardByte() byte {
	switch k[0] {
	case keyIPv4:
		return k[4]
	case keyIPv6Net:
		// Address bytes are k[1:17]; a prefix of b bits ends in address
		// byte (b+7)/8 − 1, which is k[(b+7)/8].
		return k[(int(k[16])+7)/8]
	}
	return k[16]
}

// OpaqueKey returns the fallback key of a source that is not an IP address:
// an FNV-128a hash of raw, stable across restarts, distinct for distinct raw
// strings (up to hash collisions), never shared by everybody.
func OpaqueKey(raw string) Key {
	h := fnv.New128a()
	h.Write([]byte(raw))
	var sum [16]byte
	h.Sum(sum[:0])
	var k Key
	k[0] = keyOpaque
	copy(k[1:], sum[:])
	return k
}

// IsValid reports whether k is a key made by KeyFromAddr or OpaqueKey.
func (k Key) IsValid() bool {
	switch k[0] {
	case keyIPv4, keyIPv6, keyOpaque:
		return true
	case keyIPv6Net:
		return k[16] >= 1 && k[16] <= 120
	}
	return false
}

// IsOpaque reports whether k is the fallback key of an unparsable source.
func (k Key) IsOpaque() bool { return k[0] == keyOpaque }

// Prefix returns the addresses k stands for: a /32 for IPv4, the masked
// prefix for IPv6. ok is false for opaque and invalid keys.
func (k Key) Prefix() (p netip.Prefix, ok bool) {
	switch k[0] {
	case keyIPv4:
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(k[1:5])), 32), true
	case keyIPv6:
		return netip.PrefixFrom(netip.AddrFrom16([16]byte(k[1:])), 128), true
	case keyIPv6Net:
		var a [16]byte
		copy(a[:15], k[1:16])
		return netip.PrefixFrom(netip.AddrFrom16(a), int(k[16])), true
	}
	return netip.Prefix{}, false
}

// String returns "1.2.3.4", "2001:db8::/64", "2001:db8::1" (a whole IPv6
// address), "opaque:<hex>" or "invalid".
func (k Key) String() string {
	switch k[0] {
	case keyIPv4, keyIPv6, keyIPv6Net:
		p, _ := k.Prefix()
		if p.Bits() == p.Addr().BitLen() {
			return p.Addr().String()
		}
		return p.String()
	case keyOpaque:
		return "opaque:" + hex.EncodeToString(k[1:])
	}
	return "invalid"
}

// MarshalText implements encoding.TextMarshaler with String's form.
func (k Key) MarshalText() ([]byte, error) {
	if !k.IsValid() {
		return nil, errors.New("invalid peer key")
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; see ParseKey.
func (k *Key) UnmarshalText(b []byte) error {
	v, err := ParseKey(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseKey parses the forms String returns. A bare IPv6 address is a
// /128 key; an IPv6 prefix must be written masked.
func ParseKey(s string) (Key, error) {
	if h, ok := strings.CutPrefix(s, "opaque:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 16 {
			return Key{}, fmt.Errorf("peer key %q: opaque keys are 32 hex digits", s)
		}
		var k Key
		k[0] = keyOpaque
		copy(k[1:], b)
		return k, nil
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Key{}, fmt.Errorf("peer key %q: %w", s, err)
		}
		if !p.Addr().Unmap().Is6() || p.Addr().Is4In6() {
			if p.Bits() != 32 && p.Bits() != 128 {
				return Key{}, fmt.Errorf("peer key %q: IPv4 peers are whole addresses", s)
			}
			return KeyFromAddr(p.Addr(), 128), nil
		}
		if p.Masked() != p {
			return Key{}, fmt.Errorf("peer key %q: the prefix has bits set past /%d", s, p.Bits())
		}
		if p.Bits() == 0 || (p.Bits() > 120 && p.Bits() < 128) {
			return Key{}, fmt.Errorf("peer key %q: IPv6 prefixes are /1 to /120 or /128", s)
		}
		return KeyFromAddr(p.Addr(), p.Bits()), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Key{}, fmt.Errorf("peer key %q: %w", s, err)
	}
	return KeyFromAddr(a, 128), nil
}
