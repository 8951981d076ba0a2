package store

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

var codecCases = []limiter.EntrySnapshot{
	{},
	{LastSeen: 1_772_366_400, Requests: 1},
	{InTokens: true, Tokens: 450, LeakyTick: 59_000, Requests: 12_345, LastSeen: 1_772_366_400},
	{InTokens: false, Tokens: 3, LeakyTick: -4, LastSeen: -1},
	{Window: []int64{1_772_366_399_100, 1_772_366_399_100, 1_772_366_400_000}, CleanupTick: 14_000, LastSeen: 1_772_366_400,
		Requests: math.MaxUint64, RejectedConcurrency: 1, RejectedRateLimit: math.MaxUint32},
	{CleanupTick: 5},
	{Window: []int64{math.MaxInt64, math.MinInt64, 0}, LastSeen: math.MaxInt64, Tokens: math.MinInt64, LeakyTick: math.MaxInt64},
	{Window: []int64{5, 3, 1}, LastSeen: 0}, // a clock that went backwards
}

func TestEntryCodecRoundTrip(t *testing.T) {
	for i, e := range codecCases {
		v := appendEntry(nil, &e)
		var got limiter.EntrySnapshot
		if err := decodeEntry(v, &got); err != nil {
			t.Errorf("case %d: decode: %v", i, err)
			continue
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("case %d: round trip\n got %+v\nwant %+v", i, got, e)
		}
		// Every strict prefix is refused, and so is one byte more.
		for n := range len(v) {
			if err := decodeEntry(v[:n], &got); err == nil {
				t.Errorf("case %d: %d of %d bytes decoded", i, n, len(v))
			}
		}
		if err := decodeEntry(append(bytes.Clone(v), 0), &got); err == nil {
			t.Errorf("case %d: a trailing byte decoded", i)
		}
	}
}

func TestEntryCodecRefuses(t *testing.T) {
	var e limiter.EntrySnapshot
	for _, v := range [][]byte{
		nil,
		{1},
		{2, 0, 0, 0},                      // unknown version
		{1, 0x80, 0, 0},                   // unknown flag
		{1, entryWindow, 0, 0, 200, 1, 0}, // window longer than the bytes left
		{1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, // overlong varint
	} {
		if err := decodeEntry(v, &e); err == nil {
			t.Errorf("decodeEntry(%x): no error", v)
		}
	}
}

// A token-only entry, the common case, takes few bytes.
func TestEntryCodecSize(t *testing.T) {
	e := limiter.EntrySnapshot{InTokens: true, Tokens: 450, LeakyTick: 59_000, Requests: 12_345, LastSeen: 1_772_366_400}
	v := appendEntry(nil, &e)
	if len(v) > 14 {
		t.Errorf("token-only entry: %d bytes", len(v))
	}
	e.Window = []int64{1_772_366_399_100, 1_772_366_399_500, 1_772_366_400_000}
	e.CleanupTick = 14_000
	w := appendEntry(nil, &e)
	t.Logf("token-only entry %d bytes (%x); with 3 timestamps %d bytes", len(v), v, len(w))
	if len(w)-len(v) > 3+3*3 {
		t.Errorf("3 window timestamps take %d bytes", len(w)-len(v))
	}
}

func TestEntryKey(t *testing.T) {
	for _, p := range []limiter.PeerKey{
		limiter.KeyFromAddr(netip.MustParseAddr("1.2.3.4"), 64),
		limiter.KeyFromAddr(netip.MustParseAddr("2001:db8::1"), 48),
		limiter.OpaqueKey("x"),
		{},
	} {
		k := appendEntryKey(nil, "get_vdf_session", p)
		g, got, err := parseEntryKey(k)
		if err != nil || string(g) != "get_vdf_session" || got != p {
			t.Errorf("parseEntryKey(%x) = %q, %v, %v", k, g, got, err)
		}
	}
	for _, k := range [][]byte{nil, []byte("general"), append([]byte("x\x00y\x00"), make([]byte, 17)...), make([]byte, 18), append([]byte("general\x01"), make([]byte, 17)...)} {
		if _, _, err := parseEntryKey(k); err == nil {
			t.Errorf("parseEntryKey(%x): no error", k)
		}
	}
}

func FuzzEntryCodec(f *testing.F) {
	for _, e := range codecCases {
		f.Add(appendEntry(nil, &e))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		var e limiter.EntrySnapshot
		if decodeEntry(v, &e) != nil {
			return
		}
		// What decodes encodes back to something that decodes the same.
		var again limiter.EntrySnapshot
		if err := decodeEntry(appendEntry(nil, &e), &again); err != nil || !reflect.DeepEqual(again, e) {
			t.Errorf("%x: %+v re-encoded to %+v, %v", v, e, again, err)
		}
	})
}

// encodeChanged returns the entries in key byte order, whatever the mix of
// peer kinds and group names, and of two changes of one key the later
// comes later.
func TestEncodeChangedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	groupNames := []string{"general", "a", "ab", "b", "chunk", "get_vdf", "z"}
	var entries []limiter.EntrySnapshot
	for i := range 5000 {
		var p limiter.PeerKey
		switch rng.IntN(4) {
		case 0:
			p = limiter.KeyFromAddr(netip.AddrFrom4([4]byte{byte(rng.IntN(3)), byte(rng.Uint32()), 0, byte(rng.Uint32())}), 64)
		case 1:
			var a [16]byte
			for j := range a {
				a[j] = byte(rng.Uint32())
			}
			p = limiter.KeyFromAddr(netip.AddrFrom16(a), []int{48, 64, 128}[rng.IntN(3)])
		case 2:
			p = limiter.OpaqueKey(string(rune(rng.IntN(50))))
		default:
			if i > 0 {
				p = entries[rng.IntN(i)].Peer // a duplicate peer
			}
		}
		entries = append(entries, limiter.EntrySnapshot{Peer: p, Group: groupNames[rng.IntN(len(groupNames))], Requests: uint64(i)})
	}
	for _, in := range [][]limiter.EntrySnapshot{entries, entries[:1], nil} {
		out, err := encodeChanged(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) {
			t.Fatalf("%d out of %d", len(out), len(in))
		}
		// Expected: a stable sort of the entries by key bytes.
		want := make([]int, len(in))
		for i := range want {
			want[i] = i
		}
		keyOf := func(i int) []byte { return appendEntryKey(nil, in[i].Group, in[i].Peer) }
		slices.SortStableFunc(want, func(a, b int) int { return bytes.Compare(keyOf(a), keyOf(b)) })
		for j, i := range want {
			if !bytes.Equal(out[j].k, keyOf(i)) || !bytes.Equal(out[j].v, appendEntry(nil, &in[i])) {
				t.Fatalf("position %d: got key %x value %x, want entry %d: %x %x", j, out[j].k, out[j].v, i, keyOf(i), appendEntry(nil, &in[i]))
			}
		}
	}
	// Already in order: the same result without sorting.
	sortedIn := make([]limiter.EntrySnapshot, 0, len(entries))
	out, _ := encodeChanged(entries)
	for _, o := range out {
		g, p, _ := parseEntryKey(o.k)
		var e limiter.EntrySnapshot
		decodeEntry(o.v, &e)
		e.Group, e.Peer = string(g), p
		sortedIn = append(sortedIn, e)
	}
	again, _ := encodeChanged(sortedIn)
	if !reflect.DeepEqual(again, out) {
		t.Error("encoding sorted entries changed their order")
	}
}
