package limiter

import "net/netip"

// FormatPrefix returns p as an operator writes it: the bare address for a
// single host (a /32 or a /128), the CIDR otherwise.
func FormatPrefix(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}
