package limiter

// window holds the timestamps (Unix ms) of one (peer, group)'s sliding
// window admissions, oldest first, in a ring. Its capacity grows to the
// group's sliding_window_limit; it never holds more timestamps than that,
// because an admission happens only while fewer are unexpired.
type window struct {
	ts    []int64
	head  int32
	n     int32
	ctick uint32 // index of the last cleanup tick applied
}

// at returns the i-th oldest timestamp, 0 ≤ i < n (without a division:
// head + i < 2·len).
func (w *window) at(i int32) int64 {
	j := w.head + i
	if j >= int32(len(w.ts)) {
		j -= int32(len(w.ts))
	}
	return w.ts[j]
}

// dropBefore removes every timestamp t with t < cut and returns how many.
func (w *window) dropBefore(cut int64) int32 {
	var k int32
	for w.n > 0 && w.ts[w.head] < cut {
		w.head = (w.head + 1) % int32(len(w.ts))
		w.n--
		k++
	}
	if w.n == 0 {
		w.head = 0
	}
	return k
}

// dropOldest removes the oldest timestamp (n > 0).
func (w *window) dropOldest() {
	w.head = (w.head + 1) % int32(len(w.ts))
	if w.n--; w.n == 0 {
		w.head = 0
	}
}

// countFrom returns how many timestamps are ≥ cut (the unexpired ones).
func (w *window) countFrom(cut int64) int32 {
	// Timestamps are sorted: count the expired prefix (most often none).
	if w.n == 0 || w.ts[w.head] >= cut {
		return w.n
	}
	var i int32
	for i < w.n && w.at(i) < cut {
		i++
	}
	return w.n - i
}

// add inserts t keeping the ring sorted, growing it to at most limit
// entries. Requests decided out of order by a few microseconds insert
// near the back.
func (w *window) add(t int64, limit int32) {
	if int(w.n) == len(w.ts) {
		size := int32(len(w.ts)) * 2
		if size < 4 {
			size = 4
		}
		if size < w.n+1 {
			size = w.n + 1
		}
		if size > limit && limit >= w.n+1 {
			size = limit
		}
		ts := make([]int64, size)
		for i := int32(0); i < w.n; i++ {
			ts[i] = w.at(i)
		}
		w.ts, w.head = ts, 0
	}
	size := int32(len(w.ts))
	i := w.n
	for i > 0 && w.at(i-1) > t {
		w.ts[(w.head+i)%size] = w.at(i - 1)
		i--
	}
	w.ts[(w.head+i)%size] = t
	w.n++
}
