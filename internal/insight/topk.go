package insight

import (
	"bytes"
	"slices"

	"github.com/limiterd/limiterd/limiter"
)

// TopK keeps the keep best values offered: those with the highest key,
// ties going to the value tie orders first. It is a heap of bounded size
// whose root is the worst value kept, so offering costs O(log keep) and it
// never holds more than keep values; keep ≤ 0 keeps nothing. Offering
// allocates nothing once the heap is full: the key is computed on a copy
// the TopK holds, so the offered value does not escape. A TopK is not
// safe for concurrent use.
type TopK[T any] struct {
	key  func(*T) int64
	tie  func(a, b *T) int // negative: a ranks first
	keep int
	tmp  T
	h    []ranked[T]
}

type ranked[T any] struct {
	key int64
	v   T
}

// NewTopK returns a TopK that keeps the keep values of highest key, ties
// ordered by tie (negative: a ranks first).
func NewTopK[T any](keep int, key func(*T) int64, tie func(a, b *T) int) *TopK[T] {
	return &TopK[T]{key: key, tie: tie, keep: keep, h: make([]ranked[T], 0, min(max(keep, 0), 1024))}
}

// worse reports whether a ranks below b.
func (t *TopK[T]) worse(a, b *ranked[T]) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return t.tie(&a.v, &b.v) > 0
}

// Offer adds *v when fewer than keep values are held, or replaces the
// worst when *v ranks above it.
func (t *TopK[T]) Offer(v *T) {
	if t.keep <= 0 {
		return
	}
	t.tmp = *v
	e := ranked[T]{key: t.key(&t.tmp), v: *v}
	if len(t.h) < t.keep {
		t.h = append(t.h, e)
		t.up(len(t.h) - 1)
		return
	}
	if t.worse(&t.h[0], &e) {
		t.h[0] = e
		t.down(0)
	}
}

func (t *TopK[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(&t.h[i], &t.h[p]) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *TopK[T]) down(i int) {
	n := len(t.h)
	for {
		l, w := 2*i+1, i
		if l < n && t.worse(&t.h[l], &t.h[w]) {
			w = l
		}
		if r := l + 1; r < n && t.worse(&t.h[r], &t.h[w]) {
			w = r
		}
		if w == i {
			return
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

// Drain returns the values held, best first, and empties the TopK.
func (t *TopK[T]) Drain() []T {
	slices.SortFunc(t.h, func(a, b ranked[T]) int {
		if t.worse(&b, &a) {
			return -1
		}
		if t.worse(&a, &b) {
			return 1
		}
		return 0
	})
	out := make([]T, len(t.h))
	for i := range t.h {
		out[i] = t.h[i].v
	}
	t.h = t.h[:0]
	return out
}

// entryTie orders entries of equal key by (peer, group), the smaller first.
func entryTie(a, b *limiter.EntryView) int {
	if c := bytes.Compare(a.Peer[:], b.Peer[:]); c != 0 {
		return c
	}
	return int(a.GroupID) - int(b.GroupID)
}

// newEntryTop returns a TopK of entries by order (which must be one of
// SortOrders).
func newEntryTop(order string, keep int) *TopK[limiter.EntryView] {
	key, _ := SortKey(order)
	return NewTopK(keep, key, entryTie)
}
