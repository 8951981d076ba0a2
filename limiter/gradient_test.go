package limiter

import (
	"math"
	"testing"
)

// U is an unloaded latency the histogram holds exactly (the middle of its
// bucket, as are its doublings).
const U = 8448

// testAdaptive: the limit within 3 … 1000, windows of 100 ms, the median,
// a buffer of 25 %, no smoothing, a measurement every minute on 10
// answers.
func testAdaptive() Adaptive {
	a := DefaultAdaptive()
	a.AdaptiveConcurrency = true
	a.AdaptiveWindow, a.AdaptiveSmoothing, a.AdaptiveProbeSamples = 100, 100, 10
	return a
}

// feed sends n answers of latency us to requests admitted at from, at
// from, from+1, … with inflight in flight, and returns the time after the
// last.
func feed(c *gradient, from int64, n int, us int64, failed bool, inflight int64) int64 {
	t := from
	for range n {
		c.sample(t, from, us, failed, inflight)
		t++
	}
	return t
}

// window runs one whole window from t: 10 answers of latency us, the last
// one at the window's end, which closes it; it returns the limit after it
// and the time of the next window.
func window(c *gradient, t int64, us int64, failed bool, inflight int64) (int64, int64) {
	feed(c, t, 9, us, failed, inflight)
	c.sample(t+c.p.AdaptiveWindow, t, us, failed, inflight)
	return c.current(), t + c.p.AdaptiveWindow + 1
}

// measured returns a controller that has measured the unloaded latency U
// at t = 0 … 9 and starts from the limit limit at t = 10.
func measured(t *testing.T, limit int64) *gradient {
	t.Helper()
	c := newGradient(testAdaptive(), 0)
	feed(c, 0, 10, U, false, 1)
	if c.probing || c.unloaded != U {
		t.Fatalf("after 10 answers: probing %v, unloaded %d", c.probing, c.unloaded)
	}
	c.limit = limit * milli
	return c
}

// A new controller measures the unloaded latency first, pinned at the
// minimum: answers to requests admitted before the measurement began do
// not count, failed ones neither; it then starts from the minimum.
func TestGradientFirstMeasurement(t *testing.T) {
	c := newGradient(testAdaptive(), 1000)
	if !c.probing || c.current() != 3 {
		t.Fatalf("new: probing %v, limit %d", c.probing, c.current())
	}
	c.sample(1001, 999, 100, false, 1) // admitted before: ignored
	feed(c, 1001, 5, 3*U, true, 1)     // failed: ignored
	for i := range 9 {
		c.sample(1002+int64(i), 1000, U, false, 1)
	}
	if !c.probing || c.ok != 9 {
		t.Fatalf("9 answers: probing %v, counted %d", c.probing, c.ok)
	}
	if !c.sample(1011, 1000, 2*U, false, 1) {
		t.Fatal("the 10th answer ends the measurement: not reported")
	}
	if c.probing || c.unloaded != U || c.current() != 3 {
		t.Fatalf("measured: probing %v, unloaded %d (want the median %d), limit %d", c.probing, c.unloaded, U, c.current())
	}
	if c.nextProbe < 1011+60_000 || c.nextProbe > 1011+69_000 {
		t.Fatalf("next measurement at %d, want within 60 000 … 69 000 ms of 1011", c.nextProbe)
	}
}

// A measurement that has lasted 4 windows ends with 10 answers: a slow
// node does not hold the limit at the minimum for 50 of its answers.
func TestGradientMeasurementBounded(t *testing.T) {
	p := testAdaptive()
	p.AdaptiveProbeSamples = 50
	c := newGradient(p, 0)
	for i := range 10 {
		c.sample(int64(30*i), 0, U, false, 1) // 10 answers over 270 ms
	}
	if !c.probing {
		t.Fatal("10 answers within 4 windows (400 ms) ended the measurement")
	}
	c.sample(399, 0, U, false, 1)
	if !c.probing {
		t.Fatal("ended before 4 windows")
	}
	c.sample(400, 0, U, false, 1)
	if c.probing || c.unloaded != U {
		t.Fatalf("12 answers over 4 windows: probing %v, unloaded %d", c.probing, c.unloaded)
	}
}

// The limit window by window: at the unloaded latency, or faster within
// the buffer, it grows by the headroom √limit only (the gradient at most
// 1); at twice the unloaded latency it shrinks (gradient 0.625); at four
// times, by the floor ½; faster than the unloaded latency by more than
// the buffer, it holds; it never leaves [min, max].
func TestGradientSteps(t *testing.T) {
	c := measured(t, 3)
	next := int64(10)
	for i, st := range []struct {
		us   int64
		want int64
	}{
		{U, 4},           // 3 + √3 = 4.732
		{U, 6},           // 4.732 + 2.175 = 6.907
		{U, 9},           // 6.907 + 2.628 = 9.535
		{U, 12},          // 9.535 + 3.088 = 12.623
		{2 * U, 10},      // 12.623 × 0.625 = 7.889, + 2.809 = 10.698
		{2 * U, 9},       // 6.686 + 2.586 = 9.272
		{4 * U, 6},       // × ½: 4.636 + 2.153 = 6.789
		{4 * U, 5},       // 3.394 + 1.842 = 5.237
		{4 * U, 4},       // 2.618 + 1.618 = 4.237: the fixed point of × ½ + √ is 2, towards the floor
		{4 * U, 3},       // 2.118 + 1.455 = 3.574
		{U * 17 / 20, 5}, // 1.470 capped at 1: 3.574 + 1.890 = 5.465
		{U / 4, 5},       // 4× faster than measured: holds
		{U * 17 / 20, 7}, // 5.465 + 2.338 = 7.803
	} {
		var got int64
		got, next = window(c, next, st.us, false, 1000)
		if got != st.want {
			t.Fatalf("window %d (latency %d µs): limit %d, want %d", i+1, st.us, got, st.want)
		}
	}
	if c.probing {
		t.Fatal("measuring")
	}
	// The ceiling: √limit a window (√limit grows by about ½ a window),
	// never past it.
	for i := range 70 {
		_, next = window(c, next, U*17/20, false, 1000)
		if i < 40 && c.current() >= 1000 {
			t.Fatalf("the maximum after %d windows: growth by more than √limit a window", i+1)
		}
	}
	if c.current() != 1000 {
		t.Fatalf("70 more windows at 0.85 × the unloaded latency: %d, want the maximum 1000", c.current())
	}
}

// A window of fewer than 10 answers stays open past its end: a quiet
// group's figure is not one answer's.
func TestGradientWindowNeedsSamples(t *testing.T) {
	c := measured(t, 100)
	feed(c, 10, 5, 4*U, false, 1000)
	c.sample(500, 10, 4*U, false, 1000)
	if c.current() != 100 || c.windowEnd != 110 {
		t.Fatalf("6 answers, past the end: limit %d, window end %d", c.current(), c.windowEnd)
	}
	feed(c, 501, 4, 4*U, false, 1000)
	if c.current() >= 100 {
		t.Fatalf("the 10th answer closes it: limit %d", c.current())
	}
}

// Gradient2's rule: a window whose traffic held less than half the limit
// in flight does not raise it; it may lower it.
func TestGradientNoGrowthWhenUnused(t *testing.T) {
	c := measured(t, 100)
	if got, _ := window(c, 10, U, false, 49); got != 100 {
		t.Fatalf("49 in flight of 100, at the unloaded latency: %d, want 100 unchanged", got)
	}
	if got, _ := window(c, 200, U, false, 50); got <= 100 {
		t.Fatalf("50 in flight of 100: %d, want more", got)
	}
	c.limit = 100 * milli
	if got, _ := window(c, 400, 4*U, false, 10); got >= 100 {
		t.Fatalf("10 in flight of 100 at 4× the latency: %d, want less", got)
	}
}

// A node that answers at once with errors drives the limit down, not up:
// failed answers are congestion whatever their latency (a gradient of at
// most 1 − the failed share, at least ½); a window of only failures halves
// the limit. After 5 such windows the unloaded latency is measured again,
// and a node that only fails keeps the limit pinned at the minimum.
func TestGradientFailuresDriveTheLimitDown(t *testing.T) {
	c := measured(t, 200)
	next := int64(10)
	var got int64
	got, next = window(c, next, 1, true, 1000) // 1 µs, every one failed
	if got != 110 {                            // 100 + 10
		t.Fatalf("a window of instant failures from 200: %d, want 110", got)
	}
	for i := range rearm - 2 {
		got, next = window(c, next, 1, true, 1000)
		if c.probing {
			t.Fatalf("measuring after %d windows of failures", i+2)
		}
	}
	if got >= 110 || got < 20 {
		t.Fatalf("4 windows of instant failures from 200: %d", got)
	}
	_, next = window(c, next, 1, true, 1000)
	if !c.probing || c.current() != 3 {
		t.Fatalf("5 windows of failures: probing %v, limit %d", c.probing, c.current())
	}
	feed(c, next, 1000, 1, true, 1000)
	if !c.probing || c.current() != 3 {
		t.Fatal("a node that only fails ends the measurement")
	}

	// A share of failures: 3 of 10 at the unloaded latency, which alone
	// would raise the limit, lowers it (gradient 1 × 0.7).
	c = measured(t, 100)
	feed(c, 10, 3, 1, true, 1000)
	feed(c, 13, 6, U, false, 1000)
	c.sample(110, 10, U, false, 1000)
	if got := c.current(); got != 78 { // 70 + √70 = 78.37
		t.Fatalf("30 %% failed at the unloaded latency, from 100: %d, want 78", got)
	}
}

// A measurement every adaptive_probe_interval, up to 15 % late: the limit
// is pinned at the minimum meanwhile and goes back to where it was.
func TestGradientPeriodicMeasurement(t *testing.T) {
	c := measured(t, 50)
	due := c.nextProbe
	next := int64(10)
	for next+c.p.AdaptiveWindow < due {
		window(c, next, U*11/10, false, 10) // below the target, unused: unchanged
		next += c.p.AdaptiveWindow + 1
		if c.probing {
			t.Fatalf("measuring at %d, due at %d", next, due)
		}
	}
	window(c, next, U*11/10, false, 10)
	if !c.probing || !c.routine || c.current() != 3 || c.deferred != 50*milli {
		t.Fatalf("past the due time: probing %v, routine %v, limit %d, deferred %d", c.probing, c.routine, c.current(), c.deferred)
	}
	start := c.probeFrom
	feed(c, start, 10, 2*U, false, 1)
	if c.probing || c.unloaded != 2*U || c.current() != 50 {
		t.Fatalf("after the measurement: probing %v, unloaded %d, limit %d", c.probing, c.unloaded, c.current())
	}
	if d := c.nextProbe - (start + 9); d < 60_000 || d > 69_000 {
		t.Fatalf("the next one %d ms later", d)
	}
}

// A node that got slower (the gradient at its floor ½ for 5 windows in a
// row) is measured again, from the limit it came down to; so is one that
// kept the limit at the minimum for 5 windows.
func TestGradientSlowerNodeMeasuredAgain(t *testing.T) {
	c := measured(t, 100)
	next := int64(10)
	for i, want := range []int64{57, 33, 21, 13} {
		var got int64
		if got, next = window(c, next, 4*U, false, 1000); got != want || c.probing {
			t.Fatalf("window %d at 4× the latency: limit %d (want %d), probing %v", i+1, got, want, c.probing)
		}
	}
	window(c, next, 4*U, false, 1000)
	if !c.probing || c.routine || c.current() != 3 || c.deferred != 9508 {
		t.Fatalf("5 windows at 4×: probing %v, routine %v, limit %d, back to %d", c.probing, c.routine, c.current(), c.deferred)
	}
	feed(c, c.probeFrom, 10, 4*U, false, 1)
	if c.probing || c.unloaded != 4*U || c.current() != 9 {
		t.Fatalf("measured: probing %v, unloaded %d, limit %d", c.probing, c.unloaded, c.current())
	}

	// At 2× the latency the gradient is 0.625, above its floor, and the
	// limit settles at 4.4: with a minimum of 5, it stays at 5.
	c = measured(t, 5)
	c.p.AdaptiveMinLimit = 5
	next = 10
	for i := range rearm - 1 {
		if _, next = window(c, next, 2*U, false, 1000); c.probing || c.current() != 5 {
			t.Fatalf("window %d at the minimum: probing %v, limit %d", i+1, c.probing, c.current())
		}
	}
	window(c, next, 2*U, false, 1000)
	if !c.probing {
		t.Fatal("5 windows at the minimum: not measuring")
	}
}

// A node that got faster than the unloaded latency (minus the buffer) for
// 5 windows in a row is measured again at once.
func TestGradientFasterNodeMeasuredAgain(t *testing.T) {
	c := measured(t, 100)
	next := int64(10)
	for i := range rearm {
		if c.probing {
			t.Fatalf("measuring after %d fast windows", i)
		}
		_, next = window(c, next, U/2, false, 1000)
	}
	if !c.probing {
		t.Fatal("5 windows at half the unloaded latency: not measuring")
	}
	feed(c, next, 10, U/2, false, 1)
	if c.unloaded != U/2 {
		t.Fatalf("unloaded %d, want %d", c.unloaded, U/2)
	}
}

// Smoothing takes that share of each step.
func TestGradientSmoothing(t *testing.T) {
	c := measured(t, 100)
	c.p.AdaptiveSmoothing = 50
	if got, _ := window(c, 10, 4*U, false, 1000); got != 78 { // target 50 + 7.07; half the step: 78.5
		t.Fatalf("half of a step from 100 to 57: %d, want 78", got)
	}
}

// restore and setParams keep the limit within the bounds.
func TestGradientRestoreAndParams(t *testing.T) {
	c := newGradient(testAdaptive(), 0)
	c.restore(5000, U, 100)
	if c.probing || c.current() != 1000 || c.unloaded != U || c.nextProbe < 60_100 {
		t.Fatalf("restored 5000 over a maximum of 1000: probing %v, limit %d, unloaded %d, next %d", c.probing, c.current(), c.unloaded, c.nextProbe)
	}
	c.restore(40, 0, 100)
	if !c.probing || c.current() != 3 || c.deferred != 40*milli {
		t.Fatalf("restored without an unloaded latency: probing %v, limit %d, deferred %d", c.probing, c.current(), c.deferred)
	}
	p := testAdaptive()
	p.AdaptiveMinLimit, p.AdaptiveMaxLimit = 5, 20
	c.setParams(p)
	if c.current() != 5 || c.deferred != 20*milli {
		t.Fatalf("new bounds while measuring: limit %d, deferred %d", c.current(), c.deferred)
	}
}

// The histogram's percentiles are within 1/32 of the true value.
func TestLatencyHistogram(t *testing.T) {
	var h latencyHist
	if h.percentile(50) != 0 {
		t.Fatal("an empty histogram has a median")
	}
	for _, v := range []int64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 8448, 123_456, 1 << 39, 1 << 45} {
		h.clear()
		h.add(v)
		got := h.percentile(99)
		want := max(v, 1)
		if v >= 1<<40 {
			want = valueOf(histBuckets - 1)
		}
		if math.Abs(float64(got-want)) > float64(want)/32+0.5 {
			t.Errorf("%d: %d", v, got)
		}
	}
	h.clear()
	for v := int64(1); v <= 1000; v++ {
		h.add(v * 100)
	}
	for _, p := range []int64{1, 50, 90, 99, 100} {
		want := p * 10 * 100
		if got := h.percentile(p); math.Abs(float64(got-want)) > float64(want)/32+100 {
			t.Errorf("p%d: %d, want about %d", p, got, want)
		}
	}
}

func TestIsqrt(t *testing.T) {
	for _, n := range []int64{0, 1, 2, 3, 4, 15, 16, 17, 99, 100, 3_750_000, 1 << 52, math.MaxInt64 / 4} {
		r := isqrt(n)
		if r*r > n || (r+1)*(r+1) <= n {
			t.Errorf("isqrt(%d) = %d", n, r)
		}
	}
}
