package web

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

	"github.com/limiterd/limiterd/limiter"
)

// Sizes of the peer index.
const (
	// indexTop is how many entries the index keeps per sort order: the
	// dashboard pages through at most this many without a search.
	indexTop = 1000
	// indexSearchMax bounds the entries one prefix search reads live.
	indexSearchMax = 10000
	// indexFrom is the table size from which queries go through the
	// index; below it a direct scan is fast and exact.
	indexFrom = 20000
	// indexMaxAge is how often Run rebuilds the index: a pass over
	// 1 000 000 entries costs about 1.2 s of CPU here, so about 4 % of a
	// core at this period. Searches read their rows live anyway.
	indexMaxAge = 30 * time.Second
)

// PeerIndex answers the dashboard's peer queries on large tables without
// scanning every entry per request. One pass over the table (every
// indexMaxAge, in Run) keeps the top indexTop entries of each sort
// order and the sorted list of every tracked (peer, group); a query reads
// the top lists, or binary-searches the sorted keys for an IP or CIDR and
// reads those few entries live. Below indexFrom entries it scans directly
// (exact and live). Safe for concurrent use.
type PeerIndex struct {
	lim *limiter.Limiter
	now func() time.Time

	mu  sync.Mutex // one refresh at a time
	cur atomic.Pointer[peerIndexData]
}

type indexRef struct {
	peer  limiter.PeerKey
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
	heaps := make(map[string]*topK, len(sortKeys))
	for name := range sortKeys {
		heaps[name] = newTopK(name, indexTop)
	}
	refs := make([]indexRef, 0, x.lim.Tracked()+1024)
	x.lim.Each(now, func(v limiter.EntryView) bool {
		refs = append(refs, indexRef{peer: v.Peer, group: v.GroupID})
		for _, h := range heaps {
			h.offer(&v)
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
		d.top[name] = h.drain()
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
	Every(ctx, indexMaxAge, func() {
		if x.lim.Tracked() >= indexFrom {
			x.Refresh()
		}
	})
}

// compareKeys orders peer keys as bytes.Compare does, eight bytes at a
// time: sorting a million keys this way takes about half the time.
func compareKeys(a, b *limiter.PeerKey) int {
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
	// AsOf is when the rows were read: now for direct scans and searches,
	// the index's last refresh for top lists.
	AsOf time.Time
	// Capped is true when the answer is limited by the index's size
	// (indexTop rows per order, indexSearchMax per search).
	Capped bool
}

// Query answers q: exact and live below indexFrom entries, from the index
// above.
func (x *PeerIndex) Query(q PeerQuery) PeerPage {
	now := x.now()
	if x.lim.Tracked() < indexFrom {
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
	capped := d.total > indexTop
	if q.Group == "" && !capped {
		total = d.total
	}
	if q.Offset >= len(rows) {
		return PeerPage{Total: total, AsOf: d.at, Capped: capped}
	}
	rows = rows[q.Offset:min(len(rows), q.Offset+q.Limit)]
	return PeerPage{Rows: rows, Total: total, AsOf: d.at, Capped: capped}
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
	top := newTopK(q.Sort, q.Offset+q.Limit)
	read, total, capped := 0, 0, false
	for _, r := range keyRanges(q.Prefix, x.lim.Config().IPv6Prefix) {
		i, _ := slices.BinarySearchFunc(d.refs, r[0], func(a indexRef, k limiter.PeerKey) int { return bytes.Compare(a.peer[:], k[:]) })
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
				top.offer(&v)
			}
		}
	}
	rows := top.drain()
	if q.Offset >= len(rows) {
		return PeerPage{Total: total, AsOf: now, Capped: capped}
	}
	return PeerPage{Rows: rows[q.Offset:], Total: total, AsOf: now, Capped: capped}
}

// topK keeps the keep best entries offered by one sort order: a min-heap
// of bounded size on the order's key, ties going to the smaller (peer,
// group). Offering an entry allocates nothing: the key is computed on a
// copy held by the heap, so the offered entry does not escape.
type topK struct {
	key  func(*limiter.EntryView) int64
	keep int
	tmp  limiter.EntryView
	h    []rankedEntry
}

type rankedEntry struct {
	key int64
	v   limiter.EntryView
}

func newTopK(order string, keep int) *topK {
	return &topK{key: sortKeys[order], keep: keep, h: make([]rankedEntry, 0, min(keep, 1024))}
}

// worse reports whether a ranks below b.
func worse(a, b *rankedEntry) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if c := bytes.Compare(a.v.Peer[:], b.v.Peer[:]); c != 0 {
		return c > 0
	}
	return a.v.GroupID > b.v.GroupID
}

// offer adds *v when fewer than keep entries are held, or replaces the
// worst when *v ranks above it.
func (t *topK) offer(v *limiter.EntryView) {
	if t.keep <= 0 {
		return
	}
	t.tmp = *v
	e := rankedEntry{key: t.key(&t.tmp), v: *v}
	if len(t.h) < t.keep {
		t.h = append(t.h, e)
		t.up(len(t.h) - 1)
		return
	}
	if worse(&t.h[0], &e) {
		t.h[0] = e
		t.down(0)
	}
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(&t.h[i], &t.h[p]) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.h)
	for {
		l, w := 2*i+1, i
		if l < n && worse(&t.h[l], &t.h[w]) {
			w = l
		}
		if r := l + 1; r < n && worse(&t.h[r], &t.h[w]) {
			w = r
		}
		if w == i {
			return
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

// drain returns the entries held, best first, and empties the heap.
func (t *topK) drain() []limiter.EntryView {
	slices.SortFunc(t.h, func(a, b rankedEntry) int {
		if worse(&b, &a) {
			return -1
		}
		if worse(&a, &b) {
			return 1
		}
		return 0
	})
	out := make([]limiter.EntryView, len(t.h))
	for i := range t.h {
		out[i] = t.h[i].v
	}
	t.h = t.h[:0]
	return out
}

// keyRanges returns the [first, last] PeerKey ranges whose keys stand for
// addresses in p: IPv4 keys by address; IPv6 keys of whole addresses and of
// masked prefixes (the prefix length sorts last, so one range per kind
// covers every length). A search narrower than ipv6Prefix is widened to it
// for the masked keys: the peer is the whole prefix.
func keyRanges(p netip.Prefix, ipv6Prefix int) [][2]limiter.PeerKey {
	p = p.Masked()
	first := p.Addr()
	last := lastAddr(p)
	if first.Is4() {
		return [][2]limiter.PeerKey{{limiter.KeyFromAddr(first, 128), limiter.KeyFromAddr(last, 128)}}
	}
	whole := [2]limiter.PeerKey{limiter.KeyFromAddr(first, 128), limiter.KeyFromAddr(last, 128)}
	if ipv6Prefix > 0 && ipv6Prefix < p.Bits() {
		p = netip.PrefixFrom(first, ipv6Prefix).Masked()
		first, last = p.Addr(), lastAddr(p)
	}
	// Masked keys: kind byte, the address with its last byte replaced by
	// the prefix length. Cover every length from 1 to 120.
	lo, hi := limiter.KeyFromAddr(first, 128), limiter.KeyFromAddr(last, 128)
	netKind := limiter.KeyFromAddr(netip.MustParseAddr("2001:db8::"), 64)[0]
	lo[0], hi[0] = netKind, netKind
	lo[16], hi[16] = 0, 0xff
	return [][2]limiter.PeerKey{whole, {lo, hi}}
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
