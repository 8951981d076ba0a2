package cluster

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The keys built in one buffer are the ones tagOf and string concatenation
// name, for every kind of peer key and group names that need escaping.
func TestKeysAsTagOfNamesThem(t *testing.T) {
	peers := []peer.Key{
		peer.KeyFromAddr(netip.MustParseAddr("11.0.3.7"), 64),
		peer.KeyFromAddr(netip.MustParseAddr("::ffff:10.1.2.3"), 64),
		peer.KeyFromAddr(netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), 64),
		peer.KeyFromAddr(netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), 128),
		peer.KeyFromAddr(netip.MustParseAddr("2001:db8::1"), 48),
		peer.OpaqueKey("not an address {|}%"),
		{},
	}
	sc := &sharedSched{gen: "12"}
	for _, p := range peers {
		k := limiter.KeyOf(&p)
		for _, g := range []string{"general", "a{b}", "x|y%z", ""} {
			tag := keyPrefix + tagOf(p.String(), g)
			if got, want := stableKey(k, g, sufTokens), tag+sufTokens; got != want {
				t.Errorf("stableKey(%v, %q) = %q, want %q", p, g, got, want)
			}
			if got, want := baseKey(k, g, sc), tag+":12"; got != want {
				t.Errorf("baseKey(%v, %q) = %q, want %q", p, g, got, want)
			}
			if got, want := genKey(k, g, sc, sufHybridWin), tag+":12"+sufHybridWin; got != want {
				t.Errorf("genKey(%v, %q) = %q, want %q", p, g, got, want)
			}
		}
	}
}

var sink string

// A decision's key names cost one allocation each.
func TestKeyAllocations(t *testing.T) {
	p := peer.KeyFromAddr(netip.MustParseAddr("2001:db8::1"), 64)
	k := limiter.KeyOf(&p)
	sc := &sharedSched{gen: "3"}
	if n := testing.AllocsPerRun(100, func() { sink = stableKey(k, "general", sufState) }); n > 1 {
		t.Errorf("stableKey: %v allocations, want at most 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink = genKey(k, "general", sc, sufHybridWin) }); n > 1 {
		t.Errorf("genKey: %v allocations, want at most 1", n)
	}
}

// The shared arguments are made once per group version and schedule.
func TestParamsCache(t *testing.T) {
	var pc paramsCache
	g := &limiter.Group{ID: 3, Version: 1}
	sc := &sharedSched{gen: "0"}
	built := 0
	build := func(*limiter.Group, *sharedSched) []any { built++; return []any{built} }
	a := pc.get(g, sc, build)
	if b := pc.get(g, sc, build); b != a || built != 1 {
		t.Fatalf("the same group and schedule built again (%d builds)", built)
	}
	g.Version = 2
	if b := pc.get(g, sc, build); b == a || built != 2 {
		t.Fatalf("a new version kept the old arguments (%d builds)", built)
	}
	sc2 := &sharedSched{gen: "1"}
	if b := pc.get(g, sc2, build); b.sc != sc2 || built != 3 {
		t.Fatalf("a new schedule kept the old arguments (%d builds)", built)
	}
	g2 := &limiter.Group{ID: 3, Version: 2}
	if b := pc.get(g2, sc2, build); b.g != g2 || built != 4 {
		t.Fatalf("another group of the same id kept the old arguments (%d builds)", built)
	}
}

// An entry is one argument: its op, its params block's number (0 and the
// block's numbers the first time), its numbers, its member; the entries
// made before the batch's buffer grew keep their bytes.
func TestEntryArgument(t *testing.T) {
	num := func(vs ...int64) string { return string(packNums(nil, anys(vs))) }
	const inst = "an-instance-named-at-some-length"
	p := &entryParams{packed: packNums(nil, []any{int64(7), 8, numArg("12")})}
	b := newBatchCall("", inst, 10000)
	var want []string
	for i := range maxEntries - 1 {
		c := &call{e: entry{op: "h", keys: []string{"k", "w"}, pkey: p, params: p.packed, args: []any{i}, seq: uint64(i + 1)}}
		c.ent = &c.e
		b.add(c, inst)
		w := "h\x01" + num(int64(i)) + inst + ":" + strconv.FormatUint(uint64(i+1), 36)
		if i == 0 {
			w = "h\x00" + num(7, 8, 12) + num(int64(i)) + inst + ":1"
		}
		want = append(want, w)
	}
	f := &call{e: entry{op: "r", keys: []string{"k"}, args: []any{3}}}
	f.ent = &f.e
	b.add(f, inst)
	want = append(want, "r"+num(3))
	if len(b.ents) != len(want) || len(b.keys) != 2*(maxEntries-1)+1 || cap(b.buf) <= 1024 {
		t.Fatalf("%d entries, %d keys, a buffer of %d bytes: want %d, %d, more than the first 1024", len(b.ents), len(b.keys), cap(b.buf), len(want), 2*(maxEntries-1)+1)
	}
	for i := range want {
		if b.ents[i] != want[i] {
			t.Errorf("entry %d is %q, want %q", i, b.ents[i], want[i])
		}
	}
}

func anys(vs []int64) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
