package insight

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Sizes of the peer index.
const (
	// IndexTop is how many entries the index keeps per sort order: the
	// dashboard pages through at most this many without a search.
	IndexTop = 1000
	// indexSearchMax bounds the entries one prefix search reads live.
	indexSearchMax = 10000
	// DirectKeys is the most peer keys a search may cover to be answered
	// by looking each key up in the limiter (live and complete, peers
	// first seen since the index's rebuild included) rather than through
	// the index: an address, an IPv4 /24, an IPv6 prefix at most 8 bits
	// wider than the configured peer prefix.
	DirectKeys = 256
	// IndexFrom is the table size from which queries go through the
	// index; below it a direct scan is fast and exact.
	IndexFrom = 20000
	// indexMaxAge is how often Run rebuilds the index: a pass over
	// 1 000 000 entries costs about 1.2 s of CPU here, so about 4 % of a
	// core at this period. Searches read their rows live anyway.
	indexMaxAge = 30 * time.Second
)

// PeerIndex answers the dashboard's peer queries on large tables without
// scanning every entry per request. One pass over the table (every
// indexMaxAge, in Run) keeps the top IndexTop entries of each sort
// order and the sorted list of every tracked (peer, group); a query reads
// the top lists, or binary-searches the sorted keys for an IP or CIDR and
// reads those few entries live; a search of at most DirectKeys keys (an
// address, a /24) looks each key up instead, so that it also finds the
// peers first seen since the last rebuild. Below IndexFrom entries it
// scans directly (exact and live). Safe for concurrent use.
type PeerIndex struct {
	lim *limiter.Limiter
	now func() time.Time

	mu  sync.Mutex // one refresh at a time
	cur atomic.Pointer[peerIndexData]
}

type indexRef struct {
	peer  peer.Key
	group limiter.GroupID
}

type peerIndexData struct {
	at    time.Time
	total int
	top   map[string][]limiter.EntryView // by sort order, best first
	refs  []indexRef                     // sorted by peer key bytes
}

// NewPeerIndex returns an index over lim.
func NewPeerIndex(lim *limiter.Limiter, now func() time.Time) *PeerIndex {
	return &PeerIndex{lim: lim, now: now}
}

// Refresh rebuilds the index with one pass over the table.
func (x *PeerIndex) Refresh() {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	heaps := make(map[string]*TopK[limiter.EntryView], len(sortTable))
	for _, o := range sortTable {
		heaps[o.name] = newEntryTop(o.name, IndexTop)
	}
	refs := make([]indexRef, 0, x.lim.Tracked()+1024)
	x.lim.Each(now, func(v limiter.EntryView) bool {
		refs = append(refs, indexRef{peer: v.Peer, group: v.GroupID})
		for _, h := range heaps {
			h.Offer(&v)
		}
		return true
	})
	slices.SortFunc(refs, func(a, b indexRef) int {
		if c := compareKeys(&a.peer, &b.peer); c != 0 {
			return c
		}
		return int(a.group) - int(b.group)
	})
	d := &peerIndexData{at: now, total: len(refs), top: make(map[string][]limiter.EntryView, len(heaps)), refs: refs}
	for name, h := range heaps {
		d.top[name] = h.Drain()
	}
	x.cur.Store(d)
}

// data returns the index, building it on first use; afterwards Run
// refreshes it in the background so that no request pays for a pass.
func (x *PeerIndex) data() *peerIndexData {
	d := x.cur.Load()
	if d == nil {
		x.Refresh()
		d = x.cur.Load()
	}
	return d
}

// Run refreshes the index every indexMaxAge while the table is large
// enough for queries to use it, until ctx ends.
func (x *PeerIndex) Run(ctx context.Context) {
	ticker.Every(ctx, indexMaxAge, func() {
		if x.lim.Tracked() >= IndexFrom {
			x.Refresh()
		}
	})
}

// compareKeys orders peer keys as bytes.Compare does, eight bytes at a
// time: sorting a million keys this way takes about half the time.
func compareKeys(a, b *peer.Key) int {
	if x, y := binary.BigEndian.Uint64(a[0:8]), binary.BigEndian.Uint64(b[0:8]); x != y {
		return cmp.Compare(x, y)
	}
	if x, y := binary.BigEndian.Uint64(a[8:16]), binary.BigEndian.Uint64(b[8:16]); x != y {
		return cmp.Compare(x, y)
	}
	return cmp.Compare(a[16], b[16])
}

// PeerPage is one page of a peer query.
type PeerPage struct {
	Rows  []limiter.EntryView
	Total int
	// AsOf is when the rows were read: now for direct scans and searches
	// of at most DirectKeys keys; the index's last rebuild for top lists
	// and wider searches (whose rows are read live, but chosen among the
	// peers the index held then).
	AsOf time.Time
	// Indexed is true when the rows were chosen from the index: peers
	// first seen after AsOf may be missing.
	Indexed bool
	// Capped is true when the answer is limited by the index's size
	// (IndexTop rows per order, indexSearchMax per search).
	Capped bool
}

// Query answers q: exact and live below IndexFrom entries, from the index
// above.
func (x *PeerIndex) Query(q PeerQuery) PeerPage {
	now := x.now()
	if x.lim.Tracked() < IndexFrom {
		rows, total := QueryPeers(x.lim, now, q)
		return PeerPage{Rows: rows, Total: total, AsOf: now}
	}
	d := x.data()
	if q.Prefix.IsValid() {
		return x.search(d, q, now)
	}
	// The top lists are never written after a refresh: without a group
	// the page is a slice of them.
	rows := d.top[q.Sort]
	if q.Group != "" {
		rows = nil
		for _, v := range d.top[q.Sort] {
			if v.Group == q.Group {
				rows = append(rows, v)
			}
		}
	}
	total := len(rows)
	capped := d.total > IndexTop
	if q.Group == "" && !capped {
		total = d.total
	}
	if q.Offset >= len(rows) {
		return PeerPage{Total: total, AsOf: d.at, Capped: capped, Indexed: true}
	}
	rows = rows[q.Offset:min(len(rows), q.Offset+q.Limit)]
	return PeerPage{Rows: rows, Total: total, AsOf: d.at, Capped: capped, Indexed: true}
}

// search reads live the entries whose keys fall in q.Prefix (at most
// indexSearchMax), found by binary search in the sorted keys, and keeps
// the top offset+limit of them in a bounded heap.
func (x *PeerIndex) search(d *peerIndexData, q PeerQuery, now time.Time) PeerPage {
	gid, groupOK := limiter.GroupID(0), true
	if q.Group != "" {
		gid, groupOK = x.lim.GroupID(q.Group)
	}
	if !groupOK {
		return PeerPage{AsOf: now}
	}
	top := newEntryTop(q.Sort, q.Offset+q.Limit)
	if keys := directKeys(q.Prefix, x.lim.Config().IPv6Prefix); keys != nil {
		total := 0
		offer := func(v limiter.EntryView) { total++; top.Offer(&v) }
		for _, k := range keys {
			if q.Group != "" {
				if v, ok := x.lim.Entry(now, k, gid); ok {
					offer(v)
				}
				continue
			}
			for _, v := range x.lim.Peer(now, k) {
				offer(v)
			}
		}
		return pageOf(top.Drain(), q.Offset, total, now, false)
	}
	read, total, capped := 0, 0, false
	for _, r := range keyRanges(q.Prefix, x.lim.Config().IPv6Prefix) {
		i, _ := slices.BinarySearchFunc(d.refs, r[0], func(a indexRef, k peer.Key) int { return bytes.Compare(a.peer[:], k[:]) })
		for ; i < len(d.refs) && bytes.Compare(d.refs[i].peer[:], r[1][:]) <= 0; i++ {
			if read == indexSearchMax {
				capped = true
				break
			}
			read++
			m := &d.refs[i]
			if q.Group != "" && m.group != gid {
				continue
			}
			if v, ok := x.lim.Entry(now, m.peer, m.group); ok {
				total++
				top.Offer(&v)
			}
		}
	}
	pg := pageOf(top.Drain(), q.Offset, total, d.at, true)
	pg.Capped = capped
	return pg
}

// pageOf is the page of rows (the top offset+limit) from offset.
func pageOf(rows []limiter.EntryView, offset, total int, asOf time.Time, indexed bool) PeerPage {
	pg := PeerPage{Total: total, AsOf: asOf, Indexed: indexed}
	if offset < len(rows) {
		pg.Rows = rows[offset:]
	}
	return pg
}

// directKeys returns the peer keys of the addresses in p, keyed as the
// limiter keys them (IPv6 by its first ipv6Prefix bits), when there are at
// most DirectKeys of them; nil otherwise.
func directKeys(p netip.Prefix, ipv6Prefix int) []peer.Key {
	p = p.Masked()
	unit := 32
	if !p.Addr().Is4() {
		if ipv6Prefix < 1 || ipv6Prefix > 128 {
			return nil
		}
		unit = ipv6Prefix
	}
	free := max(0, unit-p.Bits()) // the bits that vary between keys
	if 1<<min(free, 30) > DirectKeys {
		return nil
	}
	keys := make([]peer.Key, 0, 1<<free)
	base := p.Addr().AsSlice()
	b := make([]byte, len(base))
	for v := range 1 << free {
		copy(b, base)
		for j := range free { // bit j of v into bit unit-1-j of the address
			if v>>j&1 != 0 {
				pos := unit - 1 - j
				b[pos/8] |= 0x80 >> (pos % 8)
			}
		}
		a, _ := netip.AddrFromSlice(b)
		keys = append(keys, peer.KeyFromAddr(a, ipv6Prefix))
	}
	return keys
}

// keyRanges returns the [first, last] PeerKey ranges whose keys stand for
// addresses in p: IPv4 keys by address; IPv6 keys of whole addresses and of
// masked prefixes (the prefix length sorts last, so one range per kind
// covers every length). A search narrower than ipv6Prefix is widened to it
// for the masked keys: the peer is the whole prefix.
func keyRanges(p netip.Prefix, ipv6Prefix int) [][2]peer.Key {
	p = p.Masked()
	first := p.Addr()
	last := lastAddr(p)
	if first.Is4() {
		return [][2]peer.Key{{peer.KeyFromAddr(first, 128), peer.KeyFromAddr(last, 128)}}
	}
	whole := [2]peer.Key{peer.KeyFromAddr(first, 128), peer.KeyFromAddr(last, 128)}
	if ipv6Prefix > 0 && ipv6Prefix < p.Bits() {
		p = netip.PrefixFrom(first, ipv6Prefix).Masked()
		first, last = p.Addr(), lastAddr(p)
	}
	// Masked keys: kind byte, the address with its last byte replaced by
	// the prefix length. Cover every length from 1 to 120.
	lo, hi := peer.KeyFromAddr(first, 128), peer.KeyFromAddr(last, 128)
	netKind := peer.KeyFromAddr(netip.MustParseAddr("2001:db8::"), 64)[0]
	lo[0], hi[0] = netKind, netKind
	lo[16], hi[16] = 0, 0xff
	return [][2]peer.Key{whole, {lo, hi}}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
