package throttle

// window holds the admission timestamps (Unix ms) of one (peer, type),
// sorted, oldest first: ts[off:] are the live ones. Dropping from the
// front moves off; the slice is compacted once the dropped part is the
// larger half, so a key costs at most about twice its timestamps.
type window struct {
	ts  []int64
	off int
}

// len returns how many timestamps the window holds.
func (w *window) len() int { return len(w.ts) - w.off }

// at returns the i-th oldest timestamp.
func (w *window) at(i int) int64 { return w.ts[w.off+i] }

// dropBefore removes every timestamp t < cut and returns how many.
func (w *window) dropBefore(cut int64) int {
	i := w.off
	for i < len(w.ts) && w.ts[i] < cut {
		i++
	}
	k := i - w.off
	w.off = i
	switch {
	case w.off == len(w.ts):
		w.ts, w.off = w.ts[:0], 0
	case w.off > len(w.ts)/2:
		n := copy(w.ts, w.ts[w.off:])
		w.ts, w.off = w.ts[:n], 0
	}
	return k
}

// countFrom returns how many timestamps are ≥ cut.
func (w *window) countFrom(cut int64) int {
	i := w.off
	for i < len(w.ts) && w.ts[i] < cut {
		i++
	}
	return len(w.ts) - i
}

// add inserts t keeping the order; calls decided a moment out of order
// insert near the back.
func (w *window) add(t int64) {
	w.ts = append(w.ts, t)
	for i := len(w.ts) - 1; i > w.off && w.ts[i-1] > t; i-- {
		w.ts[i], w.ts[i-1] = w.ts[i-1], t
	}
}
