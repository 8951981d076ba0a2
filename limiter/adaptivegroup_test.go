package limiter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter/peer"
)

// A routine measurement of the unloaded latency (one its interval
// started) ends with every peer's fair pace brought up to the present,
// fairBurst − 1 admissions ahead (decision 226); the first one, and one
// the node's speed started, leave the paces as they are.
func TestAdaptiveRoutineMeasurementCatchesUp(t *testing.T) {
	const interval = 50_000 // µs: a quota of 20 a second
	a := newAdaptiveGroup(testAdaptive(), 0)
	pace := func(ms int64) { a.pace.Store(uint64(ms/1000)<<32 | paceBusy | interval) }
	// measure ends the measurement running since from with 10 answers at
	// ms and reports whether every pace but slot 7's stands at want (µs).
	measure := func(from, ms, want int64) bool {
		t.Helper()
		for range 10 {
			a.sample(ms, from, time.Duration(U)*time.Microsecond, false)
		}
		if a.ctl.probing {
			t.Fatalf("measuring after 10 answers at %d", ms)
		}
		for i := range a.tat {
			if i != 7 && a.tat[i].Load() != want {
				return false
			}
		}
		return true
	}
	start := func(ms int64, routine bool) {
		a.mu.Lock()
		a.ctl.startProbe(ms)
		a.ctl.routine = routine
		a.mu.Unlock()
		pace(ms)
	}
	const far = 9_999_000_000 // a peer far ahead of its pace stays there
	a.tat[7].Store(far)
	pace(500)
	if !measure(0, 500, 0) {
		t.Fatal("the first measurement moved the paces")
	}
	start(2000, false)
	if !measure(2000, 2100, 0) {
		t.Fatal("a measurement the node's speed started moved the paces")
	}
	start(3000, true)
	want := int64(3100)*1000 + (fairBurst-1)*interval
	if !measure(3000, 3100, want) {
		t.Fatalf("after a routine measurement: pace of slot 0 at %d, want %d", a.tat[0].Load(), want)
	}
	if a.tat[7].Load() != far {
		t.Fatal("the peer ahead was moved back")
	}
}

// The slots spread peers about as a random assignment would: 4 096
// neighbouring IPv4 addresses, or spaced out, the /64s of one IPv6 /48,
// of one /56 spaced out, and the /48s of one /32 each fill at least 2 400
// of the 4 096 slots (a random assignment fills 2 589 on average, with a
// standard deviation near 20; a hash that clusters them fills far fewer).
func TestSlotOfSpreadsAddresses(t *testing.T) {
	cases := map[string]func(i int) netip.Addr{
		"IPv4 198.18.0.0/20": func(i int) netip.Addr {
			return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		},
		"IPv4 10.0.0.0/8, every fourth address": func(i int) netip.Addr {
			return netip.AddrFrom4([4]byte{10, byte(i >> 6), byte(i << 2), 3})
		},
		"IPv6 /64s of 2001:db8:1::/48": func(i int) netip.Addr {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i >> 8), byte(i), 15: 1})
		},
		"IPv6 2001:db8:1234::/48, one /64 per /60": func(i int) netip.Addr {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, byte(i >> 4), byte(i << 4), 15: 1})
		},
		"IPv6 /48s of 2001:db8::/32": func(i int) netip.Addr {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i), 15: 1})
		},
	}
	for name, addr := range cases {
		seen := map[uint32]bool{}
		for i := range adaptiveSlots {
			k := peer.KeyFromAddr(addr(i), 64)
			seen[slotOf(KeyOf(&k))] = true
		}
		if len(seen) < 2400 {
			t.Errorf("%s: %d slots of %d filled", name, len(seen), adaptiveSlots)
		}
	}
}
