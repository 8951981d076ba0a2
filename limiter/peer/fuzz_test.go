package peer_test

import (
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter/peer"
)

// FuzzForwardedChain: peer extraction behind trusted proxies, for both
// forwarding headers, by its invariants rather than by example:
//
//   - a request whose TCP source is not a trusted proxy is keyed by that
//     source, whatever its headers;
//   - from a trusted proxy, the key is the address found (keyed as
//     PeerFromAddr keys it) or MalformedForwarded: never a key of the
//     header's text, so no variation of it buys a fresh identity;
//   - a malformed hop where the walk needs an address never yields an
//     address, so never a trusted (or exempt) hop: prepending a malformed
//     element to a chain the walk read to its end makes the peer
//     MalformedForwarded, and to a chain it stopped in changes nothing;
//   - appending a trusted hop on the right changes nothing once the chain
//     named someone;
//   - the header the proxies do not write is never read.
func FuzzForwardedChain(f *testing.F) {
	for _, c := range []struct {
		remote, chain string
		rfc           bool
	}{
		{"10.0.0.1:80", "203.0.113.9, 10.0.0.3", false},
		{"10.0.0.1:80", "garbage, 10.0.0.3", false},
		{"10.0.0.1:80", "127.0.0.1", false},
		{"127.0.0.1:80", "unknown, 127.0.0.1", false},
		{"10.0.0.1:80", "_hidden", false},
		{"10.0.0.1:80", "", false},
		{"10.0.0.1:80", ",,, ,", false},
		{"10.0.0.1:80", "1.2.3.4:99999, [2001:db8::1]:80", false},
		{"10.0.0.1:80", "::ffff:10.0.0.7\n203.0.113.9", false},
		{"[2001:db8:ffff::1]:443", "2001:db8:ffff::2, 2001:db8:ffff::3", false},
		{"203.0.113.1:80", "127.0.0.1", false},
		{"10.0.0.1:80", `for=203.0.113.9;proto=https, for="[2001:db8::17]:4711", for=10.0.0.2`, true},
		{"10.0.0.1:80", `for=unknown, for=10.0.0.2`, true},
		{"10.0.0.1:80", `for="_gazonk"`, true},
		{"10.0.0.1:80", `for="\"1.2.3.4", for=10.0.0.5`, true},
		{"10.0.0.1:80", `for="1.2.3.4, for=10.0.0.5`, true},
		{"10.0.0.1:80", `proto=http;by=10.0.0.9`, true},
		{"10.0.0.1:80", `for=1.2.3.4;for=5.6.7.8`, true},
		{"10.0.0.1:80", `For=127.0.0.1`, true},
		{"127.0.0.1", `for=127.0.0.1`, true},
		{"10.0.0.1:80", `for="[::1]:x"`, true},
	} {
		f.Add(c.remote, c.chain, c.rfc)
	}
	trusted := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "127.0.0.1"}
	set, _ := peer.ParseSet(trusted)
	xff := mustIdentifierFor(f, trusted, 56, peer.ForwardedXFF)
	rfc := mustIdentifierFor(f, trusted, 56, peer.ForwardedRFC7239)
	f.Fuzz(func(t *testing.T, remote, chain string, useRFC bool) {
		id, name, other, bad := xff, "X-Forwarded-For", "Forwarded", "unknown, "
		if useRFC {
			id, name, other, bad = rfc, "Forwarded", "X-Forwarded-For", "for=unknown, "
		}
		lines := strings.Split(chain, "\n")
		with := func(lines []string) header {
			return header{name: lines}
		}
		direct := id.PeerOf(remote, nil)
		p := id.PeerOf(remote, with(lines))

		// The header the proxies do not write is never read.
		h := with(lines)
		h[other] = []string{"198.51.100.1", "for=198.51.100.1"}
		if q := id.PeerOf(remote, h); q != p {
			t.Fatalf("%q %q: %v, but %v with a %s header", remote, chain, p, q, other)
		}

		if !set.Contains(direct.Addr) {
			if p != direct {
				t.Fatalf("untrusted source %q: %v with the chain %q, %v without", remote, p, chain, direct)
			}
			return
		}
		switch {
		case p.Key == peer.MalformedForwarded:
			if p.Addr.IsValid() {
				t.Fatalf("%q %q: MalformedForwarded with the address %v", remote, chain, p.Addr)
			}
		case !p.Addr.IsValid() || p.Key != id.PeerFromAddr(p.Addr).Key:
			t.Fatalf("%q %q: %v is neither an address's key nor MalformedForwarded", remote, chain, p)
		case p.Key == peer.OpaqueKey(chain):
			t.Fatalf("%q %q: keyed by the header's text", remote, chain)
		}

		// A malformed element on the left.
		pre := append([]string{bad + lines[0]}, lines[1:]...)
		q := id.PeerOf(remote, with(pre))
		readToEnd := p.Key == peer.MalformedForwarded || set.Contains(p.Addr)
		if readToEnd && q.Key != peer.MalformedForwarded {
			t.Fatalf("%q: chain %q gives %v; with a malformed hop on its left, %v, not MalformedForwarded", remote, chain, p, q)
		}
		if !readToEnd && q != p {
			t.Fatalf("%q: chain %q gives %v, but %v with a malformed hop on its left the walk never reaches", remote, chain, p, q)
		}

		// A trusted hop on the right.
		if !set.Contains(p.Addr) {
			hop := "10.9.8.7"
			if useRFC {
				hop = `for="[2001:db8:ffff::9]:1"`
			}
			if q := id.PeerOf(remote, with(append(lines[:len(lines):len(lines)], hop))); q != p {
				t.Fatalf("%q: chain %q gives %v, but %v with a trusted hop %s on its right", remote, chain, p, q, hop)
			}
		}
	})
}
