package store

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
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
	// The other algorithms (docs/limiting.md).
	{Algorithm: algo.TokenBucket, State: algo.State{A: 450 * 60_000, B: 1_772_366_399_999}, LastSeen: 1_772_366_400, Requests: 3},
	{Algorithm: algo.GCRA, State: algo.State{A: 1_772_366_400_123, B: 7}, LastSeen: 1_772_366_400},
	{Algorithm: algo.FixedWindow, State: algo.State{A: 1_772_366_460_000, B: 99}, LastSeen: 1_772_366_400, RejectedRateLimit: 4},
	{Algorithm: algo.SlidingWindow, State: algo.State{A: 1_772_366_460_000, B: 5 | 7<<32}, LastSeen: 1_772_366_400},
	{Algorithm: algo.SlidingLog, Window: []int64{1_772_366_399_100, 1_772_366_400_000}, LastSeen: 1_772_366_400},
	{Algorithm: algo.FixedWindow, LastSeen: 9}, // in flight only: no state
	{Algorithm: algo.GCRA, State: algo.State{A: math.MinInt64, B: math.MaxInt64}, LastSeen: math.MaxInt64},
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
		{3, 0, 0, 0},                      // unknown version
		{1, 0, 0, 0},                      // encoding 1: migration 6 turned every one into 2
		{2, 0x80, 0, 0},                   // unknown flag
		{2, entryWindow, 0, 0, 200, 1, 0}, // window longer than the bytes left
		{2, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, // overlong varint
		{2, entryAlgo, 0, 0},                       // no algorithm byte
		{2, entryAlgo, 0, 0, 0},                    // the hybrid written as an algorithm
		{2, entryAlgo, 0, 0, 9},                    // no such algorithm
		{2, entryAlgo | entryState, 0, 0, 1, 0, 0}, // an empty state written as one
		{2, entryAlgo | entryState, 0, 0, 1, 4},    // a state cut short
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

// op is one decoded blob record.
type op struct {
	group string
	peer  peer.Key
	del   bool
	value []byte
}

func (o op) key() []byte { return append([]byte(o.group+"\x00"), o.peer[:]...) }

// readBlobs decodes blobs whole, failing on anything that does not decode.
func readBlobs(t *testing.T, blobs [][]byte) []op {
	t.Helper()
	var out []op
	for i, v := range blobs {
		bl, err := parseBlob(v)
		if err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
		rest := bl.records
		for len(rest) > 0 {
			var rec []byte
			rec, rest = nextRecord(rest)
			var e limiter.EntrySnapshot
			g, del, err := decodeRecord(rec, &e)
			if err != nil || g >= len(bl.names) {
				t.Fatalf("blob %d: record %x: group %d, %v", i, rec, g, err)
			}
			o := op{group: string(bl.names[g]), peer: e.Peer, del: del}
			if !del {
				o.value = appendEntry(nil, &e)
			}
			out = append(out, o)
		}
	}
	return out
}

// encodeDelta returns one record per key, in key byte order (group, then
// peer key bytes), whatever the mix of peer kinds and group names: of
// several operations on a key, the last (deletions come before changes).
func TestEncodeDeltaOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	groupNames := []string{"general", "a", "ab", "b", "chunk", "get_vdf", "z"}
	var entries []limiter.EntrySnapshot
	for i := range 20000 {
		var p peer.Key
		switch rng.IntN(4) {
		case 0:
			p = peer.KeyFromAddr(netip.AddrFrom4([4]byte{byte(rng.IntN(3)), byte(rng.Uint32()), 0, byte(rng.Uint32())}), 64)
		case 1:
			var a [16]byte
			for j := range a {
				a[j] = byte(rng.Uint32())
			}
			p = peer.KeyFromAddr(netip.AddrFrom16(a), []int{48, 64, 128}[rng.IntN(3)])
		case 2:
			p = peer.OpaqueKey(string(rune(rng.IntN(50))))
		default:
			if i > 0 {
				p = entries[rng.IntN(i)].Peer // a duplicate peer
			}
		}
		entries = append(entries, limiter.EntrySnapshot{Peer: p, Group: groupNames[rng.IntN(len(groupNames))], Requests: uint64(i), LastSeen: int64(i)})
	}
	var deleted []limiter.EntryRef
	for range 3000 {
		e := entries[rng.IntN(len(entries))]
		if rng.IntN(2) == 0 {
			e.Group = groupNames[rng.IntN(len(groupNames))]
		}
		deleted = append(deleted, limiter.EntryRef{Peer: e.Peer, Group: e.Group})
	}
	for _, c := range []struct {
		changed []limiter.EntrySnapshot
		deleted []limiter.EntryRef
	}{{entries, deleted}, {entries, nil}, {nil, deleted}, {entries[:1], nil}, {nil, nil}} {
		enc, err := encodeDelta(context.Background(), c.changed, c.deleted)
		if err != nil {
			t.Fatal(err)
		}
		// Expected: deletions then changes, stably sorted by key bytes,
		// the last of each key.
		var all []op
		for _, r := range c.deleted {
			all = append(all, op{group: r.Group, peer: r.Peer, del: true})
		}
		for i := range c.changed {
			e := &c.changed[i]
			all = append(all, op{group: e.Group, peer: e.Peer, value: appendEntry(nil, e)})
		}
		slices.SortStableFunc(all, func(a, b op) int { return bytes.Compare(a.key(), b.key()) })
		var want []op
		for i, o := range all {
			if i+1 < len(all) && bytes.Equal(o.key(), all[i+1].key()) {
				continue
			}
			want = append(want, o)
		}
		got := readBlobs(t, enc.blobs)
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		written, dels := 0, 0
		for j := range want {
			if !reflect.DeepEqual(got[j], want[j]) {
				t.Fatalf("record %d: got %+v, want %+v", j, got[j], want[j])
			}
			if want[j].del {
				dels++
			} else {
				written++
			}
		}
		if enc.written != written || enc.deleted != dels {
			t.Errorf("counted %d written, %d deleted; want %d, %d", enc.written, enc.deleted, written, dels)
		}
		size := 0
		for i, b := range enc.blobs {
			size += len(b)
			if len(b) > blobTarget+64 {
				t.Errorf("blob %d of %d bytes", i, len(b))
			}
		}
		if size != enc.size {
			t.Errorf("size %d, blobs of %d bytes", enc.size, size)
		}
		if len(c.changed) == len(entries) && len(enc.blobs) < 2 {
			t.Errorf("%d blobs for %d entries", len(enc.blobs), len(entries))
		}
	}
}

// A token-only entry of an IPv4 peer takes at most 23 bytes in a blob.
func TestBlobRecordSize(t *testing.T) {
	var es []limiter.EntrySnapshot
	for i := range 1000 {
		es = append(es, limiter.EntrySnapshot{
			Peer:     peer.KeyFromAddr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 64),
			Group:    "general",
			InTokens: true, Tokens: 450, LeakyTick: 59_000, Requests: 12_345, LastSeen: 1_772_366_400,
		})
	}
	enc, err := encodeDelta(context.Background(), es, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries: %d bytes in %d blobs, %.1f bytes/entry", len(es), enc.size, len(enc.blobs), float64(enc.size)/float64(len(es)))
	if per := float64(enc.size) / float64(len(es)); per > 23.1 {
		t.Errorf("%.1f bytes per entry", per)
	}
}

func TestParseBlobRefuses(t *testing.T) {
	p := peer.KeyFromAddr(netip.MustParseAddr("10.0.0.1"), 64)
	e := codecCases[2]
	good := RawBlob([]string{"general"}, RawRecord(0, false, p, appendEntry(nil, &e)))
	if _, err := parseBlob(good); err != nil {
		t.Fatalf("good blob: %v", err)
	}
	for _, c := range []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"unknown format", append([]byte{2}, good[1:]...)},
		{"truncated header", good[:3]},
		{"truncated record", good[:len(good)-1]},
		{"a byte too many", append(bytes.Clone(good), 0)},
		{"count too high", append([]byte{1, 2}, good[2:]...)},
		{"count too low", append([]byte{1, 0}, good[2:]...)},
		{"absurd count", append([]byte{1, 0xff, 0xff, 0xff, 0x7f}, good[2:]...)},
		{"absurd names", []byte{1, 0, 0xff, 0xff, 0xff, 0x7f}},
		{"name past the end", []byte{1, 0, 1, 9, 'a'}},
	} {
		if _, err := parseBlob(c.v); err == nil {
			t.Errorf("%s: parseBlob(%x): no error", c.name, c.v)
		}
	}
}

func TestDecodeRecordRefuses(t *testing.T) {
	p := peer.KeyFromAddr(netip.MustParseAddr("10.0.0.1"), 64)
	e := codecCases[2]
	v := appendEntry(nil, &e)
	var got limiter.EntrySnapshot
	if g, del, err := decodeRecord(RawRecord(3, false, p, v), &got); err != nil || g != 3 || del || got.Peer != p || got.Tokens != e.Tokens {
		t.Errorf("good record: %d %v %v %+v", g, del, err, got)
	}
	if g, del, err := decodeRecord(RawRecord(1, true, p, nil), &got); err != nil || g != 1 || !del || got.Peer != p {
		t.Errorf("good deletion: %d %v %v", g, del, err)
	}
	for _, c := range []struct {
		name string
		rec  []byte
	}{
		{"empty", nil},
		{"no key", []byte{0}},
		{"key length 17", append([]byte{0, 17}, make([]byte, 18)...)},
		{"key cut", []byte{0, 5, 1, 10, 0}},
		{"no value", RawRecord(0, false, p, nil)},
		{"bad value", RawRecord(0, false, p, v[:len(v)-1])},
		{"deletion with a value", RawRecord(0, true, p, v)},
		{"overlong group varint", append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, RawRecord(0, false, p, v)...)},
	} {
		if _, _, err := decodeRecord(c.rec, &got); err == nil {
			t.Errorf("%s: decodeRecord(%x): no error", c.name, c.rec)
		}
	}
}

// Whatever a blob holds, reading it never panics, and what parses frames
// its records exactly.
func FuzzBlob(f *testing.F) {
	enc, _ := encodeDelta(context.Background(), []limiter.EntrySnapshot{
		{Peer: peer.KeyFromAddr(netip.MustParseAddr("10.0.0.1"), 64), Group: "general", InTokens: true, Tokens: 3, LastSeen: 5},
		{Peer: peer.OpaqueKey("x"), Group: "chunk", Window: []int64{1, 2}, LastSeen: 5},
	}, []limiter.EntryRef{{Peer: peer.KeyFromAddr(netip.MustParseAddr("2001:db8::1"), 64), Group: "general"}})
	for _, b := range enc.blobs {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		bl, err := parseBlob(v)
		if err != nil {
			return
		}
		n := 0
		for rest := bl.records; len(rest) > 0; n++ {
			var rec []byte
			rec, rest = nextRecord(rest)
			var e limiter.EntrySnapshot
			decodeRecord(rec, &e)
		}
		if n != bl.count {
			t.Errorf("%d records, header %d", n, bl.count)
		}
	})
}

// Buckets are in key order: keys in order have buckets in order, whichever
// bits vary (the group rank, the peer key's words, its last byte).
func TestBucketOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 50 {
		// Each round fixes some bits of every word, so that the varying
		// bits fall in different places.
		var fixed, val [4]uint64
		for w := range fixed {
			fixed[w], val[w] = rng.Uint64(), rng.Uint64()
		}
		order := make([]entryOrder, 3000)
		var and, or [4]uint64
		and = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		for i := range order {
			var w [4]uint64
			for k := range w {
				w[k] = rng.Uint64()&^fixed[k] | val[k]&fixed[k]
			}
			w[0] &= 1<<24 - 1
			w[3] &= 0xff
			order[i] = entryOrder{gl: uint32(w[0])<<8 | uint32(w[3]), hi: w[1], lo: w[2], i: uint32(i)}
			for k := range w {
				and[k] &= w[k]
				or[k] |= w[k]
			}
		}
		bits := topBits([4]uint64{and[0] ^ or[0], and[1] ^ or[1], and[2] ^ or[2], and[3] ^ or[3]}, 1+round%12)
		slices.SortFunc(order, func(a, b entryOrder) int {
			switch {
			case a.less(&b):
				return -1
			case b.less(&a):
				return 1
			}
			return 0
		})
		for i := 1; i < len(order); i++ {
			if bucketOf(&order[i-1], bits) > bucketOf(&order[i], bits) {
				t.Fatalf("round %d: keys %+v < %+v but buckets %d > %d (bits %v)", round, order[i-1], order[i], bucketOf(&order[i-1], bits), bucketOf(&order[i], bits), bits)
			}
		}
	}
}
