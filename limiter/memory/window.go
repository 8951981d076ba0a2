package memory

// window holds the timestamps (Unix ms) of one (peer, group)'s sliding
// window admissions, oldest first. Its capacity grows to the limit Add is
// given; it never holds more timestamps than that, because an admission
// happens only while fewer are unexpired. The zero window is empty. A window
// is not safe for concurrent use (its shard's lock guards it).
type window struct {
	ts   []int64
	head int32
	// N is how many timestamps the ring holds; N-- drops the newest.
	N int32
	// Ctick is the index of the last cleanup tick applied (the owner's).
	Ctick uint32
}

// At returns the i-th oldest timestamp, 0 ≤ i < N (without a division:
// head + i < 2·len).
func (w *window) At(i int32) int64 {
	j := w.head + i
	if j >= int32(len(w.ts)) {
		j -= int32(len(w.ts))
	}
	return w.ts[j]
}

// DropBefore removes every timestamp t with t < cut and returns how many.
func (w *window) DropBefore(cut int64) int32 {
	var k int32
	for w.N > 0 && w.ts[w.head] < cut {
		w.head = (w.head + 1) % int32(len(w.ts))
		w.N--
		k++
	}
	if w.N == 0 {
		w.head = 0
	}
	return k
}

// DropOldest removes the oldest timestamp (N > 0).
func (w *window) DropOldest() {
	w.head = (w.head + 1) % int32(len(w.ts))
	if w.N--; w.N == 0 {
		w.head = 0
	}
}

// CountFrom returns how many timestamps are ≥ cut (the unexpired ones).
func (w *window) CountFrom(cut int64) int32 {
	// Timestamps are sorted: count the expired prefix (most often none).
	if w.N == 0 || w.ts[w.head] >= cut {
		return w.N
	}
	var i int32
	for i < w.N && w.At(i) < cut {
		i++
	}
	return w.N - i
}

// Add inserts t keeping the ring sorted, growing it to at most limit
// entries. Requests decided out of order by a few microseconds insert
// near the back.
func (w *window) Add(t int64, limit int32) {
	if int(w.N) == len(w.ts) {
		size := int32(len(w.ts)) * 2
		if size < 4 {
			size = 4
		}
		if size < w.N+1 {
			size = w.N + 1
		}
		if size > limit && limit >= w.N+1 {
			size = limit
		}
		ts := make([]int64, size)
		for i := int32(0); i < w.N; i++ {
			ts[i] = w.At(i)
		}
		w.ts, w.head = ts, 0
	}
	size := int32(len(w.ts))
	i := w.N
	for i > 0 && w.At(i-1) > t {
		w.ts[(w.head+i)%size] = w.At(i - 1)
		i--
	}
	w.ts[(w.head+i)%size] = t
	w.N++
}
