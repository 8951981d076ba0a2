package peer_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/limiter/peer"
)

func TestParsePrefix(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"1.2.3.4", "1.2.3.4/32"},
		{"1.2.3.4/32", "1.2.3.4/32"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"2001:DB8::1", "2001:db8::1/128"},
		{"::/0", "::/0"},
		{"::ffff:1.2.3.4", "1.2.3.4/32"},
		{"::ffff:1.2.3.4/128", "1.2.3.4/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:0:0/96", "0.0.0.0/0"},
		{"::fffe:0:0/95", "::fffe:0:0/95"}, // covers the mapped range, stays IPv6
	} {
		got, err := peer.ParsePrefix(tt.in)
		if err != nil {
			t.Errorf("ParsePrefix(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want {
			t.Errorf("ParsePrefix(%q) = %v, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParsePrefixErrors(t *testing.T) {
	for _, tt := range []struct {
		in       string
		contains []string
	}{
		{"", []string{`""`, "empty"}},
		{"10.0.0.1/8", []string{`"10.0.0.1/8"`, "host bits", `"10.0.0.0/8"`}},
		{"2001:db8::1/32", []string{`"2001:db8::1/32"`, "host bits", `"2001:db8::/32"`}},
		{"::ffff:10.0.0.1/104", []string{"host bits", `"10.0.0.0/8"`}},
		{"fe80::1%eth0", []string{`"fe80::1%eth0"`, "zone"}},
		{"fe80::%eth0/64", []string{"zone"}},
		{"garbage", []string{`"garbage"`, "not an IP address"}},
		{"1.2.3.4/33", []string{`"1.2.3.4/33"`}},
		{"1.2.3.4/", []string{`"1.2.3.4/"`}},
		{"1.2.3", []string{`"1.2.3"`}},
		{"1.2.3.4:80", []string{`"1.2.3.4:80"`}},
		{" 1.2.3.4", []string{"space"}},
		{"1.2.3.4\n", []string{"space"}},
		{"10.0.0.0/8/8", []string{`"10.0.0.0/8/8"`}},
	} {
		p, err := peer.ParsePrefix(tt.in)
		if err == nil {
			t.Errorf("ParsePrefix(%q) = %v, want an error", tt.in, p)
			continue
		}
		for _, c := range tt.contains {
			if !strings.Contains(err.Error(), c) {
				t.Errorf("ParsePrefix(%q) error %q does not mention %s", tt.in, err, c)
			}
		}
	}
}

func TestParsePrefixSet(t *testing.T) {
	s, err := peer.ParseSet([]string{"10.0.0.0/8", "1.2.3.4", "10.0.0.0/8", "::ffff:1.2.3.4", "2001:db8::/32", "10.1.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
	if got := s.Prefixes(); !slices.Equal(got, want) {
		t.Errorf("Prefixes() = %v, want %v", got, want)
	}
	if s.Len() != len(want) {
		t.Errorf("Len() = %d, want %d", s.Len(), len(want))
	}
	// Prefixes returns a copy.
	s.Prefixes()[0] = netip.Prefix{}
	if s.Prefixes()[0] != want[0] {
		t.Error("Prefixes() exposes the set's slice")
	}

	_, err = peer.ParseSet([]string{"10.0.0.0/8", "1.2.3.4", "10.0.0.1/8"})
	if err == nil || !strings.HasPrefix(err.Error(), `[2] "10.0.0.1/8": `) {
		t.Errorf("ParsePrefixSet error = %v, want it to start with `[2] \"10.0.0.1/8\": `", err)
	}

	empty, err := peer.ParseSet(nil)
	if err != nil || empty.Len() != 0 || empty.Contains(netip.MustParseAddr("1.2.3.4")) {
		t.Errorf("ParsePrefixSet(nil) = %v, %v; want an empty set", empty, err)
	}
}

func TestPrefixSetContains(t *testing.T) {
	s, err := peer.ParseSet([]string{
		"10.0.0.0/8", "192.168.1.1", "192.168.1.2", "192.168.1.3", // adjacent entries merge
		"255.255.255.255", "0.0.0.0",
		"2001:db8::/32", "2001:db8:1::/48", "fe80::/10", "::1",
		"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"10.0.0.0", true},
		{"10.255.255.255", true},
		{"9.255.255.255", false},
		{"11.0.0.0", false},
		{"192.168.1.0", false},
		{"192.168.1.1", true},
		{"192.168.1.2", true},
		{"192.168.1.3", true},
		{"192.168.1.4", false},
		{"255.255.255.255", true},
		{"255.255.255.254", false},
		{"0.0.0.0", true},
		{"0.0.0.1", false},
		{"::ffff:10.1.2.3", true}, // mapped: matched as IPv4
		{"::ffff:11.1.2.3", false},
		{"::a01:203", false}, // IPv4-compatible is not mapped
		{"2001:db8::1", true},
		{"2001:db8:ffff::1", true},
		{"2001:db9::", false},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"fe80::1%eth0", true}, // zone ignored
		{"fec0::1", false},
		{"::1", true},
		{"::2", false},
		{"::", false},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", false},
	} {
		if got := s.Contains(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Contains(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if s.Contains(netip.Addr{}) {
		t.Error("Contains(invalid) = true")
	}

	var nilSet *peer.Set
	if nilSet.Contains(netip.MustParseAddr("1.2.3.4")) || nilSet.Len() != 0 || nilSet.Prefixes() != nil {
		t.Error("the nil set is not empty")
	}

	all, _ := peer.ParseSet([]string{"0.0.0.0/0"})
	if !all.Contains(netip.MustParseAddr("203.0.113.9")) || all.Contains(netip.MustParseAddr("2001:db8::1")) {
		t.Error("0.0.0.0/0 must match every IPv4 address and no IPv6 one")
	}
	all6, _ := peer.ParseSet([]string{"::/0"})
	if !all6.Contains(netip.MustParseAddr("2001:db8::1")) || all6.Contains(netip.MustParseAddr("203.0.113.9")) || all6.Contains(netip.MustParseAddr("::ffff:203.0.113.9")) {
		t.Error("::/0 must match every IPv6 address and no IPv4 (or IPv4-mapped) one")
	}
}

func TestNewPrefixSetCanonical(t *testing.T) {
	s := peer.NewSet([]netip.Prefix{
		netip.PrefixFrom(netip.MustParseAddr("10.1.2.3"), 8), // not masked
		{}, // invalid: skipped
		netip.PrefixFrom(netip.MustParseAddr("::ffff:1.2.3.4"), 128),
		netip.MustParsePrefix("10.0.0.0/8"),
	})
	want := []netip.Prefix{netip.MustParsePrefix("1.2.3.4/32"), netip.MustParsePrefix("10.0.0.0/8")}
	if got := s.Prefixes(); !slices.Equal(got, want) {
		t.Errorf("Prefixes() = %v, want %v", got, want)
	}
	if !s.Contains(netip.MustParseAddr("10.9.9.9")) || !s.Contains(netip.MustParseAddr("1.2.3.4")) {
		t.Error("Contains misses a canonicalised entry")
	}
}

// naiveContains is the reference Contains: a linear scan.
func naiveContains(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// randomPrefixes returns n prefixes clustered in a few ranges, so that they
// overlap, nest and touch.
func randomPrefixes(r *rand.Rand, n int) []netip.Prefix {
	ps := make([]netip.Prefix, n)
	for i := range ps {
		if r.IntN(2) == 0 {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(r.IntN(4))<<30|uint32(r.IntN(1<<12)))
			ps[i] = netip.PrefixFrom(netip.AddrFrom4(b), 18+r.IntN(15)).Masked()
		} else {
			var b [16]byte
			b[0] = byte(r.IntN(2)) * 0xff
			binary.BigEndian.PutUint64(b[8:], uint64(r.IntN(1<<12)))
			ps[i] = netip.PrefixFrom(netip.AddrFrom16(b), 114+r.IntN(15)).Masked()
		}
	}
	return ps
}

func randomAddr(r *rand.Rand) netip.Addr {
	if r.IntN(2) == 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(r.IntN(4))<<30|uint32(r.IntN(1<<13)))
		a := netip.AddrFrom4(b)
		if r.IntN(4) == 0 {
			a = netip.AddrFrom16(a.As16()) // mapped
		}
		return a
	}
	var b [16]byte
	b[0] = byte(r.IntN(2)) * 0xff
	binary.BigEndian.PutUint64(b[8:], uint64(r.IntN(1<<13)))
	return netip.AddrFrom16(b)
}

func TestPrefixSetMatchesLinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		ps := randomPrefixes(r, 1+r.IntN(40))
		s := peer.NewSet(ps)
		for range 200 {
			a := randomAddr(r)
			if got, want := s.Contains(a), naiveContains(ps, a); got != want {
				t.Fatalf("round %d: Contains(%v) = %v, linear scan says %v; set %v", round, a, got, want, ps)
			}
		}
	}
}

func FuzzPrefixSetContains(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 8, 10, 1, 2, 3}, []byte{10, 1, 2, 3})
	f.Fuzz(func(t *testing.T, set, addr []byte) {
		// set: records of 4 address bytes and a length byte, IPv4 or, when
		// the length is over 32, an IPv6 address repeating the bytes.
		var ps []netip.Prefix
		for len(set) >= 5 {
			var a netip.Addr
			bits := int(set[4])
			if bits <= 32 {
				a = netip.AddrFrom4([4]byte(set[:4]))
			} else {
				var b [16]byte
				for i := range b {
					b[i] = set[i%4]
				}
				a, bits = netip.AddrFrom16(b), bits%129
			}
			ps = append(ps, netip.PrefixFrom(a, bits).Masked())
			set = set[5:]
		}
		s := peer.NewSet(ps)
		var a netip.Addr
		switch {
		case len(addr) >= 16:
			a = netip.AddrFrom16([16]byte(addr[:16]))
		case len(addr) >= 4:
			a = netip.AddrFrom4([4]byte(addr[:4]))
		}
		if got, want := s.Contains(a), naiveContains(ps, a); got != want {
			t.Fatalf("Contains(%v) = %v, linear scan says %v; set %v", a, got, want, ps)
		}
	})
}

func FuzzParsePrefix(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4", "10.0.0.0/8", "10.0.0.1/8", "2001:db8::/32", "::ffff:1.2.3.4",
		"::ffff:10.0.0.0/104", "fe80::1%eth0", "", " ", "garbage", "1.2.3.4/33", "::/0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := peer.ParsePrefix(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParsePrefix(%q) error %q does not quote the input", s, err)
			}
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
				t.Fatalf("ParsePrefix(%q) refused the address %v", s, a)
			}
			return
		}
		if !p.IsValid() || p.Masked() != p || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			t.Fatalf("ParsePrefix(%q) = %v: not canonical", s, p)
		}
		if p2, err := peer.ParsePrefix(p.String()); err != nil || p2 != p {
			t.Fatalf("ParsePrefix(%q) = %v, which reparses as %v, %v", s, p, p2, err)
		}
		set := peer.NewSet([]netip.Prefix{p})
		if !set.Contains(p.Addr()) || set.Len() != 1 {
			t.Fatalf("the set of %v does not contain its address", p)
		}
		if np, err := netip.ParsePrefix(s); err == nil && !np.Addr().Is4In6() && np != p {
			t.Fatalf("ParsePrefix(%q) = %v, netip says %v", s, p, np)
		}
	})
}

func TestPrefixSetConcurrent(t *testing.T) {
	s := peer.NewSet(randomPrefixes(rand.New(rand.NewPCG(3, 4)), 1000))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			for range 1000 {
				s.Contains(randomAddr(r))
			}
			_ = s.Prefixes()
		})
	}
	wg.Wait()
}

func TestPrefixSetContainsAllocs(t *testing.T) {
	s := peer.NewSet(randomPrefixes(rand.New(rand.NewPCG(5, 6)), 10000))
	a4, a6 := netip.MustParseAddr("64.0.3.7"), netip.MustParseAddr("fe80::1%eth0")
	if n := testing.AllocsPerRun(100, func() { s.Contains(a4); s.Contains(a6) }); n != 0 {
		t.Errorf("Contains allocates %v times", n)
	}
}

func BenchmarkPrefixSetContains(b *testing.B) {
	for _, n := range []int{1, 10, 10000} {
		r := rand.New(rand.NewPCG(7, 8))
		s := peer.NewSet(randomPrefixes(r, n))
		addrs := make([]netip.Addr, 1024)
		for i := range addrs {
			addrs[i] = randomAddr(r)
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Contains(addrs[i&1023])
				i++
			}
		})
	}
}
