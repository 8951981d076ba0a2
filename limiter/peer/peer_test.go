package peer_test

import (
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/limiter/peer"
)

func mustIdentifier(tb testing.TB, trusted []string, ipv6Prefix int) *peer.Identifier {
	tb.Helper()
	header := peer.ForwardedUnset
	if len(trusted) > 0 {
		header = peer.ForwardedXFF
	}
	return mustIdentifierFor(tb, trusted, ipv6Prefix, header)
}

func mustIdentifierFor(tb testing.TB, trusted []string, ipv6Prefix int, header peer.ForwardedHeader) *peer.Identifier {
	tb.Helper()
	set, err := peer.ParseSet(trusted)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.NewIdentifier(set, ipv6Prefix, header)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// header is the request header the tests give PeerOf: http.Header's shape,
// keys written canonical, without importing net/http (whose instrumented
// build would cost internal/chaos/fuzz.sh's short CI run some 25 s).
type header map[string][]string

// Values returns the values of the canonical key.
func (h header) Values(key string) []string { return h[key] }

// headers builds a header from name, value pairs; a name may repeat.
func headers(kv ...string) header {
	h := header{}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = append(h[kv[i]], kv[i+1])
	}
	return h
}

func TestNewIPv6Prefix(t *testing.T) {
	for _, n := range []int{1, 48, 64, 120, 128} {
		if _, err := peer.NewIdentifier(nil, n, peer.ForwardedUnset); err != nil {
			t.Errorf("NewIdentifier(nil, %d): %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, 121, 127, 129, 1000} {
		_, err := peer.NewIdentifier(nil, n, peer.ForwardedUnset)
		if err == nil || !strings.HasPrefix(err.Error(), "peers.ipv6_prefix: ") {
			t.Errorf("NewIdentifier(nil, %d) error = %v, want one naming peers.ipv6_prefix", n, err)
		}
	}
}

// TestPeerOfDirect covers requests without a trusted proxy in the way.
func TestPeerOfDirect(t *testing.T) {
	id64 := mustIdentifier(t, nil, 64)
	id128 := mustIdentifier(t, nil, 128)
	id48 := mustIdentifier(t, nil, 48)
	for _, tt := range []struct {
		name       string
		id         *peer.Identifier
		remoteAddr string
		addr       string // "" for invalid
		key        string // PeerKey.String
	}{
		{"IPv4", id64, "1.2.3.4:5678", "1.2.3.4", "1.2.3.4"},
		{"IPv4 no port", id64, "1.2.3.4", "1.2.3.4", "1.2.3.4"},
		{"IPv4 port 0", id64, "1.2.3.4:0", "1.2.3.4", "1.2.3.4"},
		{"IPv6 /64", id64, "[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"IPv6 /64 no port", id64, "2001:db8:1:2::7", "2001:db8:1:2::7", "2001:db8:1:2::/64"},
		{"IPv6 /64 brackets no port", id64, "[2001:db8:1:2::7]", "2001:db8:1:2::7", "2001:db8:1:2::/64"},
		{"IPv6 /48", id48, "[2001:db8:1:2::7]:1", "2001:db8:1:2::7", "2001:db8:1::/48"},
		{"IPv6 /128", id128, "[2001:db8:1:2::7]:443", "2001:db8:1:2::7", "2001:db8:1:2::7"},
		{"IPv6 loopback", id64, "[::1]:80", "::1", "::/64"},
		{"IPv4-mapped", id64, "[::ffff:1.2.3.4]:80", "1.2.3.4", "1.2.3.4"},
		{"IPv4-mapped no port", id128, "::ffff:1.2.3.4", "1.2.3.4", "1.2.3.4"},
		{"zone dropped", id64, "[fe80::1%eth0]:80", "fe80::1", "fe80::/64"},
		{"zone dropped /128", id128, "[fe80::1%eth0]:80", "fe80::1", "fe80::1"},
		{"zone no port", id128, "fe80::1%eth0", "fe80::1", "fe80::1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.id.PeerOf(tt.remoteAddr, nil)
			if p.Addr.String() != tt.addr || p.Key.String() != tt.key || !p.Key.IsValid() {
				t.Errorf("PeerOf(%q) = {%v, %v}, want {%s, %s}", tt.remoteAddr, p.Addr, p.Key, tt.addr, tt.key)
			}
		})
	}

	// Two addresses in one /64 are one peer; another /64 is another peer.
	a := id64.PeerOf("[2001:db8:0:1::1]:1000", nil)
	b := id64.PeerOf("[2001:db8:0:1:ffff:ffff:ffff:ffff]:2000", nil)
	c := id64.PeerOf("[2001:db8:0:2::1]:1000", nil)
	if a.Key != b.Key {
		t.Errorf("one /64, two keys: %v, %v", a.Key, b.Key)
	}
	if a.Key == c.Key {
		t.Errorf("two /64s, one key: %v", a.Key)
	}
	if a.Addr == b.Addr {
		t.Error("Addr must stay the whole address")
	}
	// With ipv6_prefix 128 they are distinct.
	if id128.PeerOf("[2001:db8:0:1::1]:1", nil).Key == id128.PeerOf("[2001:db8:0:1::2]:1", nil).Key {
		t.Error("ipv6_prefix 128 must key by the whole address")
	}
	// The port never matters; IPv4 and its mapped form are one peer.
	if id64.PeerOf("1.2.3.4:1", nil) != id64.PeerOf("[::ffff:1.2.3.4]:2", nil) {
		t.Error("IPv4 and IPv4-mapped differ")
	}
}

func TestPeerOfGarbage(t *testing.T) {
	id := mustIdentifier(t, []string{"0.0.0.0/0", "::/0"}, 64)
	spoof := headers("X-Forwarded-For", "9.9.9.9", "Forwarded", "for=9.9.9.9")
	keys := map[peer.Key]string{}
	for _, s := range []string{
		"", "@", "/run/limiterd.sock", "unix socket path", ":80", "1.2.3.4:", "1.2.3.4:port",
		"1.2.3.4:65536", "1.2.3.4:123456", "[1.2.3.4]:80", "[::1", "[::1]80", "[::1]:", "::1]:80",
		"1.2.3.4.5", "1.2.3.4%eth0", "[fe80::1%]:80", "localhost:80", "[]:80", "[%eth0]:80", "999.1.1.1:80",
		"1.2.3.4 ", " 1.2.3.4:80", "\x00", "[::1]:80:80",
	} {
		p := id.PeerOf(s, spoof)
		if p.Addr.IsValid() {
			t.Errorf("PeerOf(%q).Addr = %v, want invalid", s, p.Addr)
		}
		if !p.Key.IsValid() || !p.Key.IsOpaque() || p.Key != peer.OpaqueKey(s) {
			t.Errorf("PeerOf(%q).Key = %v, want OpaqueKey(%q)", s, p.Key, s)
		}
		if prev, dup := keys[p.Key]; dup {
			t.Errorf("PeerOf(%q) and PeerOf(%q) share the key %v", s, prev, p.Key)
		}
		keys[p.Key] = s
	}
}

// TestPeerOfForwarded covers the forwarding headers (docs/limiting.md,
// "Peers").
func TestPeerOfForwarded(t *testing.T) {
	// 10.0.0.0/8 and 2001:db8:ffff::/48 are our proxies; they write the
	// header a case's name begins with (X-Forwarded-For unless it is
	// "Forwarded"). want "-" is MalformedForwarded.
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48"}
	xffID := mustIdentifierFor(t, proxies, 64, peer.ForwardedXFF)
	fwdID := mustIdentifierFor(t, proxies, 64, peer.ForwardedRFC7239)
	for _, tt := range []struct {
		name       string
		remoteAddr string
		h          header
		want       string // the peer's Addr
	}{
		// Untrusted sources: headers ignored.
		{"untrusted XFF ignored", "1.2.3.4:1", headers("X-Forwarded-For", "9.9.9.9"), "1.2.3.4"},
		{"untrusted Forwarded ignored", "1.2.3.4:1", headers("Forwarded", "for=9.9.9.9"), "1.2.3.4"},
		{"untrusted trusted-looking chain ignored", "[2001:db8::1]:1", headers("X-Forwarded-For", "9.9.9.9, 10.0.0.1"), "2001:db8::1"},

		// Trusted source, X-Forwarded-For.
		{"no header: the proxy", "10.0.0.1:1", nil, "10.0.0.1"},
		{"XFF one", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9"), "9.9.9.9"},
		{"XFF right-most untrusted", "10.0.0.1:1", headers("X-Forwarded-For", "6.6.6.6, 9.9.9.9"), "9.9.9.9"},
		{"XFF spoofed left part", "10.0.0.1:1", headers("X-Forwarded-For", "1.1.1.1, 10.0.0.7, 9.9.9.9, 10.0.0.3, 10.0.0.2"), "9.9.9.9"},
		{"XFF through trusted hops", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9, 10.0.0.3, 10.9.9.9"), "9.9.9.9"},
		{"XFF all trusted: left-most", "10.0.0.1:1", headers("X-Forwarded-For", "10.0.0.5, 10.0.0.3, 10.0.0.2"), "10.0.0.5"},
		{"XFF lines concatenated", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9", "X-Forwarded-For", "10.0.0.3"), "9.9.9.9"},
		{"XFF later line wins", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9", "X-Forwarded-For", "8.8.8.8, 10.0.0.3"), "8.8.8.8"},
		{"XFF whitespace", "10.0.0.1:1", headers("X-Forwarded-For", " \t9.9.9.9 ,\t10.0.0.3\t "), "9.9.9.9"},
		{"XFF empty elements", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9,, ,10.0.0.3,"), "9.9.9.9"},
		{"XFF empty value", "10.0.0.1:1", headers("X-Forwarded-For", ""), "10.0.0.1"},
		{"XFF blank values", "10.0.0.1:1", headers("X-Forwarded-For", " , ", "X-Forwarded-For", ""), "10.0.0.1"},
		{"XFF with ports", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9:4000, 10.0.0.3:80"), "9.9.9.9"},
		{"XFF IPv6", "10.0.0.1:1", headers("X-Forwarded-For", "2001:db8:1::1, [2001:db8:ffff::2]:80"), "2001:db8:1::1"},
		{"XFF bracketed IPv6", "10.0.0.1:1", headers("X-Forwarded-For", "[2001:db8:1::1]"), "2001:db8:1::1"},
		{"XFF IPv4-mapped", "10.0.0.1:1", headers("X-Forwarded-For", "::ffff:9.9.9.9, ::ffff:10.0.0.3"), "9.9.9.9"},
		{"XFF zone dropped", "10.0.0.1:1", headers("X-Forwarded-For", "fe80::9%eth0"), "fe80::9"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::1]:1", headers("X-Forwarded-For", "9.9.9.9"), "9.9.9.9"},
		{"trusted mapped proxy", "[::ffff:10.0.0.1]:1", headers("X-Forwarded-For", "9.9.9.9"), "9.9.9.9"},
		{"trusted proxy with zone", "[2001:db8:ffff::1%eth0]:1", headers("X-Forwarded-For", "9.9.9.9"), "9.9.9.9"},

		// Malformed elements where the peer would be: the one bucket of
		// MalformedForwarded, never the (possibly exempt) proxy.
		{"XFF garbage", "10.0.0.1:1", headers("X-Forwarded-For", "garbage"), "-"},
		{"XFF unknown", "10.0.0.1:1", headers("X-Forwarded-For", "unknown"), "-"},
		{"XFF garbage behind a hop", "10.0.0.1:1", headers("X-Forwarded-For", "garbage, 10.0.0.3"), "-"},
		{"XFF garbage left of the peer", "10.0.0.1:1", headers("X-Forwarded-For", "garbage, 9.9.9.9, 10.0.0.3"), "9.9.9.9"},
		{"XFF bad port", "10.0.0.1:1", headers("X-Forwarded-For", "9.9.9.9:99999"), "-"},
		{"XFF hex-looking garbage", "10.0.0.1:1", headers("X-Forwarded-For", "deadbeef, 10.0.0.3"), "-"},

		// Forwarded (RFC 7239).
		{"Forwarded", "10.0.0.1:1", headers("Forwarded", "for=9.9.9.9"), "9.9.9.9"},
		{"Forwarded params", "10.0.0.1:1", headers("Forwarded", "by=10.0.0.1;for=9.9.9.9;proto=https;host=example.com"), "9.9.9.9"},
		{"Forwarded FOR case", "10.0.0.1:1", headers("Forwarded", "FoR=9.9.9.9"), "9.9.9.9"},
		{"Forwarded quoted IPv4", "10.0.0.1:1", headers("Forwarded", `for="9.9.9.9"`), "9.9.9.9"},
		{"Forwarded quoted IPv6 with port", "10.0.0.1:1", headers("Forwarded", `for="[2001:db8::17]:4711"`), "2001:db8::17"},
		{"Forwarded quoted IPv6", "10.0.0.1:1", headers("Forwarded", `For="[2001:db8::17]"`), "2001:db8::17"},
		{"Forwarded obfuscated port", "10.0.0.1:1", headers("Forwarded", `for="9.9.9.9:_p0rt"`), "9.9.9.9"},
		{"Forwarded elements", "10.0.0.1:1", headers("Forwarded", "for=1.1.1.1, for=9.9.9.9, for=10.0.0.3"), "9.9.9.9"},
		{"Forwarded lines", "10.0.0.1:1", headers("Forwarded", "for=9.9.9.9", "Forwarded", "for=10.0.0.3;proto=http"), "9.9.9.9"},
		{"Forwarded all trusted", "10.0.0.1:1", headers("Forwarded", "for=10.0.0.5, for=10.0.0.3"), "10.0.0.5"},
		{"Forwarded whitespace", "10.0.0.1:1", headers("Forwarded", " for=9.9.9.9 ;proto=http ,\tfor=10.0.0.3 "), "9.9.9.9"},
		{"Forwarded comma in quotes", "10.0.0.1:1", headers("Forwarded", `for=9.9.9.9;host="a,for=8.8.8.8", for=10.0.0.3`), "9.9.9.9"},
		{"Forwarded escaped quote", "10.0.0.1:1", headers("Forwarded", `for=9.9.9.9;ext="x\",for=8.8.8.8"`), "9.9.9.9"},
		{"Forwarded escaped backslash", "10.0.0.1:1", headers("Forwarded", `for=9.9.9.9;ext="x\\", for=10.0.0.3`), "9.9.9.9"},
		{"Forwarded spoofed unbalanced quote", "10.0.0.1:1", headers("Forwarded", `for="8.8.8.8, for=9.9.9.9`), "9.9.9.9"},
		// Both headers: only the one the proxy writes is read; a client's
		// other one, passed through, never is.
		{"XFF written, Forwarded passed through", "10.0.0.1:1", headers("X-Forwarded-For", "8.8.8.8", "Forwarded", "for=9.9.9.9"), "8.8.8.8"},
		{"XFF written, client Forwarded unknown ignored", "10.0.0.1:1", headers("X-Forwarded-For", "8.8.8.8", "Forwarded", "for=unknown"), "8.8.8.8"},
		{"XFF written, client Forwarded trusted ignored", "10.0.0.1:1", headers("X-Forwarded-For", "8.8.8.8", "Forwarded", "for=10.0.0.3"), "8.8.8.8"},
		{"XFF written empty, Forwarded not read", "10.0.0.1:1", headers("X-Forwarded-For", "", "Forwarded", "for=9.9.9.9"), "10.0.0.1"},
		{"Forwarded written, client XFF unknown ignored", "10.0.0.1:1", headers("Forwarded", "for=9.9.9.9", "X-Forwarded-For", "unknown"), "9.9.9.9"},
		{"Forwarded written, client XFF ignored", "10.0.0.1:1", headers("Forwarded", "for=9.9.9.9", "X-Forwarded-For", "8.8.8.8"), "9.9.9.9"},
		{"Forwarded written empty, XFF not read", "10.0.0.1:1", headers("X-Forwarded-For", "8.8.8.8", "Forwarded", ""), "10.0.0.1"},

		// Malformed Forwarded elements.
		{"Forwarded unknown", "10.0.0.1:1", headers("Forwarded", "for=unknown"), "-"},
		{"Forwarded hidden", "10.0.0.1:1", headers("Forwarded", "for=_hidden, for=10.0.0.3"), "-"},
		{"Forwarded hidden left of the peer", "10.0.0.1:1", headers("Forwarded", "for=_hidden, for=9.9.9.9"), "9.9.9.9"},
		{"Forwarded without for", "10.0.0.1:1", headers("Forwarded", "for=8.8.8.8, proto=https"), "-"},
		{"Forwarded twice for", "10.0.0.1:1", headers("Forwarded", "for=8.8.8.8;for=7.7.7.7"), "-"},
		{"Forwarded empty for", "10.0.0.1:1", headers("Forwarded", "for="), "-"},
		{"Forwarded garbage", "10.0.0.1:1", headers("Forwarded", "garbage, for=10.0.0.3"), "-"},
		{"Forwarded unquoted quote", "10.0.0.1:1", headers("Forwarded", `for="9.9.9.9`), "-"},
		// Found by FuzzForwardedChain: a quote that never closes in another
		// parameter made the element well-formed alone, malformed with
		// anything on its left.
		{"Forwarded unclosed quote after for", "10.0.0.1:1", headers("Forwarded", `for=9.9.9.9;x="`), "-"},
		{"Forwarded unclosed quote left of a hop", "10.0.0.1:1", headers("Forwarded", `for=9.9.9.9;ext="x, for=10.0.0.3`), "-"},
		{"Forwarded escape in value", "10.0.0.1:1", headers("Forwarded", `for="9.9.9.\9"`), "-"},
		{"Forwarded bad port", "10.0.0.1:1", headers("Forwarded", `for="[2001:db8::17]:x"`), "-"},
		{"Forwarded IPv4 in brackets", "10.0.0.1:1", headers("Forwarded", `for="[9.9.9.9]"`), "-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := xffID
			if strings.HasPrefix(tt.name, "Forwarded") {
				id = fwdID
			}
			p := id.PeerOf(tt.remoteAddr, tt.h)
			if tt.want == "-" {
				if p.Addr.IsValid() || p.Key != peer.MalformedForwarded {
					t.Errorf("PeerOf(%q, %v) = {%v, %v}, want MalformedForwarded", tt.remoteAddr, tt.h, p.Addr, p.Key)
				}
				return
			}
			want := netip.MustParseAddr(tt.want)
			if p.Addr != want || p.Key != peer.KeyFromAddr(want, 64) {
				t.Errorf("PeerOf(%q, %v) = {%v, %v}, want %v", tt.remoteAddr, tt.h, p.Addr, p.Key, want)
			}
		})
	}
}

// TestPeerOfForwardedHeader: peers.forwarded_header names the one header
// the proxy writes; the other is never read, whatever it says.
func TestPeerOfForwardedHeader(t *testing.T) {
	both := headers("X-Forwarded-For", "8.8.8.8", "Forwarded", "for=9.9.9.9")
	for _, tt := range []struct {
		header peer.ForwardedHeader
		h      header
		want   string
	}{
		{peer.ForwardedXFF, both, "8.8.8.8"},
		{peer.ForwardedRFC7239, both, "9.9.9.9"},
		{peer.ForwardedXFF, headers("Forwarded", "for=9.9.9.9"), "10.0.0.1"},
		{peer.ForwardedRFC7239, headers("X-Forwarded-For", "8.8.8.8"), "10.0.0.1"},
		// A client's unidentifiable element in the header the proxy does
		// not write cannot make the peer the (possibly exempt) proxy.
		{peer.ForwardedXFF, headers("X-Forwarded-For", "8.8.8.8", "Forwarded", "for=unknown"), "8.8.8.8"},
		{peer.ForwardedRFC7239, headers("Forwarded", "for=9.9.9.9", "X-Forwarded-For", "garbage"), "9.9.9.9"},
	} {
		id := mustIdentifierFor(t, []string{"10.0.0.0/8"}, 64, tt.header)
		if p := id.PeerOf("10.0.0.1:1", tt.h); p.Addr != netip.MustParseAddr(tt.want) {
			t.Errorf("%v: PeerOf(%v) = %v, want %v", tt.header, tt.h, p.Addr, tt.want)
		}
	}
}

func TestParseForwardedHeader(t *testing.T) {
	for s, want := range map[string]peer.ForwardedHeader{
		"": peer.ForwardedUnset, "X-Forwarded-For": peer.ForwardedXFF, "forwarded": peer.ForwardedRFC7239,
	} {
		if got, err := peer.ParseForwardedHeader(s); err != nil || got != want {
			t.Errorf("ParseForwardedHeader(%q) = %v, %v; want %v", s, got, err, want)
		}
		if got := want.String(); !strings.EqualFold(got, s) {
			t.Errorf("%d.String() = %q, want %q", want, got, s)
		}
	}
	for _, s := range []string{"auto", "xff", "X-Real-IP"} {
		if _, err := peer.ParseForwardedHeader(s); err == nil || !strings.Contains(err.Error(), "peers.forwarded_header") {
			t.Errorf("ParseForwardedHeader(%q) error = %v, want one naming peers.forwarded_header", s, err)
		}
	}
	if _, err := peer.NewIdentifier(nil, 64, peer.ForwardedHeader(9)); err == nil {
		t.Error("NewIdentifier with an unknown header: no error")
	}
	// Trusted proxies without the header they write: refused, naming the key.
	trusted, _ := peer.ParseSet([]string{"127.0.0.1"})
	if _, err := peer.NewIdentifier(trusted, 64, peer.ForwardedUnset); err == nil || !strings.HasPrefix(err.Error(), "peers.forwarded_header: ") {
		t.Errorf("NewIdentifier(trusted, unset) error = %v, want one naming peers.forwarded_header", err)
	}
}

func TestPeerFromAddrAndParsePeer(t *testing.T) {
	id := mustIdentifier(t, nil, 64)
	for _, tt := range []struct{ in, addr, key string }{
		{"1.2.3.4", "1.2.3.4", "1.2.3.4"},
		{"1.2.3.4:80", "1.2.3.4", "1.2.3.4"},
		{"[2001:db8::1]:443", "2001:db8::1", "2001:db8::/64"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::/64"},
		{"[2001:db8::1]", "2001:db8::1", "2001:db8::/64"},
		{"::ffff:1.2.3.4", "1.2.3.4", "1.2.3.4"},
		{"[fe80::1%eth0]:80", "fe80::1", "fe80::/64"},
	} {
		p, err := id.ParsePeer(tt.in)
		if err != nil || p.Addr.String() != tt.addr || p.Key.String() != tt.key {
			t.Errorf("ParsePeer(%q) = {%v, %v}, %v; want {%s, %s}", tt.in, p.Addr, p.Key, err, tt.addr, tt.key)
		}
		if q := id.PeerOf(tt.in, nil); q != p {
			t.Errorf("ParsePeer(%q) = %v, PeerOf says %v", tt.in, p, q)
		}
		if q := id.PeerFromAddr(p.Addr); q != p {
			t.Errorf("PeerFromAddr(%v) = %v, want %v", p.Addr, q, p)
		}
	}
	for _, s := range []string{"", "garbage", "1.2.3.4:", "1.2.3.4:x", "[1.2.3.4]:80", "1.2.3.4/32", "opaque:00", "1.2.3.4:_obf"} {
		if p, err := id.ParsePeer(s); err == nil {
			t.Errorf("ParsePeer(%q) = %v, want an error", s, p)
		} else if !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParsePeer(%q) error %q does not quote the input", s, err)
		}
	}
	if p := id.PeerFromAddr(netip.MustParseAddr("fe80::1%eth0")); p.Addr.Zone() != "" {
		t.Errorf("PeerFromAddr kept the zone: %v", p.Addr)
	}
	if p := id.PeerFromAddr(netip.Addr{}); p != (peer.Peer{}) || p.Key.IsValid() {
		t.Errorf("PeerFromAddr(invalid) = %v, want the zero Peer", p)
	}
}

func TestPeerOfAllocs(t *testing.T) {
	plain := mustIdentifier(t, nil, 64)
	proxied := mustIdentifier(t, []string{"10.0.0.0/8"}, 64)
	h := headers("X-Forwarded-For", "9.9.9.9, 10.0.0.3, 10.0.0.2", "User-Agent", "x")
	fh := headers("Forwarded", `for="[2001:db8::17]:4711", for=10.0.0.3;proto=https`)
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"IPv4", func() { plain.PeerOf("1.2.3.4:5678", nil) }},
		{"IPv4 with headers", func() { plain.PeerOf("1.2.3.4:5678", h) }},
		{"IPv4 untrusted, proxies configured", func() { proxied.PeerOf("1.2.3.4:5678", h) }},
		{"IPv6", func() { plain.PeerOf("[2001:db8::1]:443", nil) }},
		{"XFF through a trusted proxy", func() { proxied.PeerOf("10.0.0.1:5678", h) }},
		{"Forwarded through a trusted proxy", func() { proxied.PeerOf("10.0.0.1:5678", fh) }},
	} {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: PeerOf allocates %v times per call", tt.name, n)
		}
	}
}

func TestIdentifierConcurrent(t *testing.T) {
	id := mustIdentifier(t, []string{"10.0.0.0/8"}, 64)
	h := headers("X-Forwarded-For", "9.9.9.9, 10.0.0.3")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if p := id.PeerOf("10.0.0.1:1", h); p.Addr != netip.MustParseAddr("9.9.9.9") {
					t.Errorf("PeerOf = %v", p)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzPeerOf(f *testing.F) {
	for _, s := range [][3]string{
		{"1.2.3.4:5678", "", ""},
		{"10.0.0.1:80", "9.9.9.9, 10.0.0.3", ""},
		{"10.0.0.1:80", "9.9.9.9", `for="[2001:db8::17]:4711";proto=https, for=10.0.0.2`},
		{"[2001:db8:ffff::1]:443", "garbage,,", "for=_hidden, for=unknown"},
		{"[fe80::1%eth0]:80", "fe80::1%eth0", `for="\"x\\", for="`},
		{"@", "1.1.1.1", "for=1.1.1.1"},
		{"", "", ""},
		{"10.0.0.1", "::ffff:10.0.0.1, [::1]:80", `For=1.2.3.4;by="a,b;c"`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	plain := mustIdentifier(f, nil, 64)
	proxied := mustIdentifier(f, []string{"10.0.0.0/8", "2001:db8:ffff::/48", "127.0.0.1"}, 56)
	trusted, _ := peer.ParseSet([]string{"10.0.0.0/8", "2001:db8:ffff::/48", "127.0.0.1"})
	f.Fuzz(func(t *testing.T, remoteAddr, xff, forwarded string) {
		h := header{}
		if xff != "" {
			h["X-Forwarded-For"] = strings.Split(xff, "\n")
		}
		if forwarded != "" {
			h["Forwarded"] = strings.Split(forwarded, "\n")
		}
		for _, id := range []*peer.Identifier{plain, proxied} {
			p := id.PeerOf(remoteAddr, h)
			if !p.Key.IsValid() {
				t.Fatalf("PeerOf(%q, %v) key %v is not valid", remoteAddr, h, p.Key)
			}
			direct := id.PeerOf(remoteAddr, nil)
			if p.Addr.IsValid() {
				if p.Addr.Is4In6() || p.Addr.Zone() != "" || p.Key != id.PeerFromAddr(p.Addr).Key {
					t.Fatalf("PeerOf(%q, %v) = %v: not canonical", remoteAddr, h, p)
				}
			} else if p.Key != peer.OpaqueKey(remoteAddr) && p.Key != peer.MalformedForwarded {
				t.Fatalf("PeerOf(%q, %v) = %v without an address but not the opaque key", remoteAddr, h, p)
			}
			if id == plain || !trusted.Contains(direct.Addr) {
				if p != direct {
					t.Fatalf("untrusted source %q: PeerOf with headers %v = %v, without %v", remoteAddr, h, p, direct)
				}
			} else if !p.Addr.IsValid() && p.Key != peer.MalformedForwarded {
				t.Fatalf("trusted source %q: PeerOf(%v) = %v without an address", remoteAddr, h, p)
			}
		}
	})
}

func BenchmarkPeerOf(b *testing.B) {
	plain := mustIdentifier(b, nil, 64)
	proxied := mustIdentifier(b, []string{"10.0.0.0/8", "192.168.0.0/16"}, 64)
	xff := headers("X-Forwarded-For", "203.0.113.9, 10.0.0.3, 10.0.0.2")
	fwd := headers("Forwarded", `for="[2001:db8::17]:4711", for=10.0.0.3;proto=https, for=10.0.0.2`)
	for _, bb := range []struct {
		name       string
		id         *peer.Identifier
		remoteAddr string
		h          header
	}{
		{"IPv4", plain, "203.0.113.9:5678", nil},
		{"IPv6", plain, "[2001:db8::1]:443", nil},
		{"IPv4 untrusted with XFF", proxied, "203.0.113.9:5678", xff},
		{"trusted proxy XFF 3", proxied, "10.0.0.1:5678", xff},
		{"trusted proxy Forwarded 3", proxied, "10.0.0.1:5678", fwd},
		{"garbage", plain, "@", nil},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bb.id.PeerOf(bb.remoteAddr, bb.h)
			}
		})
	}
}
