package limiter

import "slices"

// topK keeps the keep best values offered, by cmp (negative: a ranks
// before b), in a heap whose root is the worst kept; keep ≤ 0 keeps all.
// Offering costs O(log keep) and never holds more than keep values. cmp
// takes values, not pointers: a pointer handed to a function value
// escapes, and every offer would allocate.
type topK[T any] struct {
	keep int
	cmp  func(a, b T) int
	h    []T
}

func (t *topK[T]) offer(v T) {
	if t.keep <= 0 || len(t.h) < t.keep {
		t.h = append(t.h, v)
		if t.keep > 0 {
			t.up(len(t.h) - 1)
		}
		return
	}
	if t.cmp(v, t.h[0]) < 0 {
		t.h[0] = v
		t.down(0)
	}
}

// worse reports whether h[i] ranks after h[j].
func (t *topK[T]) worse(i, j int) bool { return t.cmp(t.h[i], t.h[j]) > 0 }

func (t *topK[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(i, p) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *topK[T]) down(i int) {
	n := len(t.h)
	for {
		l, w := 2*i+1, i
		if l < n && t.worse(l, w) {
			w = l
		}
		if r := l + 1; r < n && t.worse(r, w) {
			w = r
		}
		if w == i {
			return
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

// sorted returns the values kept, best first; the topK is spent.
func (t *topK[T]) sorted() []T {
	slices.SortFunc(t.h, t.cmp)
	return t.h
}
