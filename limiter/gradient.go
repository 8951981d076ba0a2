package limiter

import "math/bits"

// The gradient controller of a group's adaptive concurrency limit
// (docs/limiting.md, "Adaptive concurrency"; decisions 200 and 225): the
// gradient controller of Envoy's adaptive concurrency filter, with Netflix
// Gradient2's smoothing, its gradient of at most 1 and its rule against
// growth while the traffic does not use the limit, and failed answers
// counted as congestion. Pure: times are arguments, nothing is read from
// the clock, integers only.
//
// Every window (adaptive_window ms, or twice the last window's latency
// when longer; closed by the first answer after its end that brings it to
// minWindowSamples answers) the latency that stands for it, its
// adaptive_percentile of the answers' latencies, is compared with the
// unloaded latency:
//
//	gradient = unloaded × (1 + buffer) / latency, within [½, 1]
//	target   = limit × gradient + √(limit × gradient)
//	limit   += (target − limit) × smoothing
//
// within [adaptive_min_limit, adaptive_max_limit]. The limit grows by the
// √ term only, a little every window (Gradient2's queue): a window that
// looks unloaded does not lift it by the buffer at once (decision 225).
// A window with a share f of failed answers (5xx, timeouts, resets) takes
// a gradient of at most 1 − f, never below ½: a node that fails every
// answer shrinks the limit by the most each window, whatever its latency.
// The limit does not grow on a window whose traffic held less than half
// of it in flight, nor on one faster than the unloaded latency by more
// than the buffer (the unloaded latency is then stale).
//
// The unloaded latency is measured by pinning the limit at
// adaptive_min_limit until adaptive_probe_samples answers to requests
// admitted since then have come back (or 10, once it has lasted 4
// windows: a slow node's measurement would hold the limit at the minimum
// long); their percentile is the new unloaded latency, and the limit goes
// back to what it was. A measurement starts at the first window's end
// every adaptive_probe_interval (plus up to 15 %), and at once after 5
// windows in a row at the minimum or with the gradient at its floor (the
// node slowed down: the old unloaded latency is out of reach), or 5
// windows in a row faster than the unloaded latency by more than the
// buffer (the node got faster).

// Fixed-point units of the controller.
const (
	// milli: a limit is held in thousandths of a request.
	milli = 1000
	// permille: a gradient is held in thousandths.
	permille = 1000
	// minWindowSamples: a window with fewer answers is not closed.
	minWindowSamples = 10
	// rearm: windows in a row at the minimum, at the gradient's floor or
	// faster than the unloaded latency, that start a measurement at once.
	rearm = 5
	// probeJitter: a measurement starts up to this percent of
	// adaptive_probe_interval late.
	probeJitter = 15
	// probeWindows: a measurement that has lasted this many windows ends
	// with minWindowSamples answers.
	probeWindows = 4
)

// gradient is one group's controller. It is not safe for concurrent use:
// its owner (adaptiveGroup) locks.
type gradient struct {
	p Adaptive

	limit    int64 // thousandths
	deferred int64 // the limit to go back to after a measurement, thousandths
	unloaded int64 // µs; 0 until measured
	latency  int64 // the last window's, µs; 0 until one closed

	probing bool
	// routine is set while a measurement runs that only its interval
	// started (the node's speed gave no reason for it): the limit it goes
	// back to is still the node's.
	routine   bool
	probeFrom int64 // ms: answers to requests admitted before it are not part of the measurement
	nextProbe int64 // ms
	windowEnd int64 // ms; 0 while no window is open

	hist       latencyHist
	ok, failed int64
	peak       int64 // the most requests in flight seen by an answer of the window
	// Windows in a row at the minimum, with the gradient at its floor ½,
	// faster than the unloaded latency by more than the buffer.
	atMin, slow, fast int
	probes            uint64
}

// newGradient returns a controller with settings p (valid, on) at ms: it
// has no unloaded latency yet, so it starts by measuring it, pinned at
// the minimum, which it then starts from.
func newGradient(p Adaptive, ms int64) *gradient {
	c := &gradient{p: p}
	c.limit = p.AdaptiveMinLimit * milli
	c.startProbe(ms)
	return c
}

// restore sets the limit and the unloaded latency a snapshot saved (both
// in whole units) at ms: no measurement runs, the next is due an interval
// later. A saved limit outside the bounds is brought within them; an
// unloaded latency of 0 (none saved) starts a measurement.
func (c *gradient) restore(limit, unloadedUS, ms int64) {
	c.limit = c.clamp(limit * milli)
	c.probing, c.deferred = false, 0
	c.reset()
	c.windowEnd, c.atMin, c.slow, c.fast = 0, 0, 0, 0
	if unloadedUS <= 0 {
		c.startProbe(ms)
		return
	}
	c.unloaded = unloadedUS
	c.nextProbe = ms + c.interval(ms)
}

// setParams applies new settings (valid, on): the limit, and the one a
// measurement will go back to, are brought within the new bounds; a
// measurement in progress is pinned at the new minimum. The window and
// the interval apply from the next window and the next measurement.
func (c *gradient) setParams(p Adaptive) {
	c.p = p
	c.limit = c.clamp(c.limit)
	if c.probing {
		c.deferred = c.clamp(c.deferred)
		c.limit = p.AdaptiveMinLimit * milli
	}
}

// current returns the limit in whole requests, at least 1.
func (c *gradient) current() int64 { return max(1, c.limit/milli) }

// clamp brings a limit (thousandths) within the bounds.
func (c *gradient) clamp(l int64) int64 {
	return min(max(l, c.p.AdaptiveMinLimit*milli), c.p.AdaptiveMaxLimit*milli)
}

// interval returns the wait until the next measurement started at ms:
// adaptive_probe_interval plus up to 15 % of it, drawn from ms.
func (c *gradient) interval(ms int64) int64 {
	span := c.p.AdaptiveProbeInterval * probeJitter / 100
	if span <= 0 {
		return c.p.AdaptiveProbeInterval
	}
	return c.p.AdaptiveProbeInterval + int64(mix64(uint64(ms))%uint64(span+1))
}

// startProbe pins the limit at the minimum from ms until a measurement of
// the unloaded latency completes.
func (c *gradient) startProbe(ms int64) {
	if !c.probing {
		c.deferred = c.limit
	}
	c.probing, c.probeFrom, c.routine = true, ms, false
	c.limit = c.p.AdaptiveMinLimit * milli
	c.windowEnd, c.atMin, c.slow, c.fast = 0, 0, 0, 0
	c.probes++
	c.reset()
}

// reset empties the window.
func (c *gradient) reset() {
	c.hist.clear()
	c.ok, c.failed, c.peak = 0, 0, 0
}

// sample records one answer at ms to a request admitted at admitted:
// latencyUS to the answer's head, failed for a 5xx, a timeout or a reset;
// inflight is the group's requests in flight now. It closes the window
// when due, and reports whether it closed one or ended a measurement
// (whether the limit or the figures may have changed).
func (c *gradient) sample(ms, admitted, latencyUS int64, failed bool, inflight int64) bool {
	latencyUS = max(latencyUS, 1)
	if c.probing {
		if admitted < c.probeFrom || failed {
			return false
		}
		c.hist.add(latencyUS)
		c.ok++
		// adaptive_probe_samples answers; or, for a slow node, which
		// would hold the limit at the minimum long, minWindowSamples once
		// the measurement has lasted probeWindows windows.
		enough := c.ok >= c.p.AdaptiveProbeSamples ||
			c.ok >= minWindowSamples && ms-c.probeFrom >= probeWindows*c.span()
		if !enough {
			return false
		}
		c.unloaded = c.hist.percentile(c.p.AdaptivePercentile)
		c.probing = false
		c.limit = c.clamp(c.deferred)
		c.nextProbe = ms + c.interval(ms)
		c.reset()
		return true
	}
	if c.windowEnd == 0 {
		c.windowEnd = ms + c.span()
	}
	if failed {
		c.failed++
	} else {
		c.ok++
		c.hist.add(latencyUS)
	}
	c.peak = max(c.peak, inflight)
	if ms < c.windowEnd || c.ok+c.failed < minWindowSamples {
		return false
	}
	return c.close(ms)
}

// close ends the window at ms: the limit takes its step, and a
// measurement starts when one is due.
func (c *gradient) close(ms int64) bool {
	g := int64(permille / 2)
	if c.ok > 0 {
		c.latency = c.hist.percentile(c.p.AdaptivePercentile)
		g = c.unloaded * (100 + c.p.AdaptiveBuffer) * (permille / 100) / c.latency
		g = min(max(g, permille/2), permille)
	}
	if c.failed > 0 {
		f := c.failed * permille / (c.ok + c.failed)
		g = max(g*(permille-f)/permille, permille/2)
	}
	// A window faster than the unloaded latency by more than the buffer
	// says the node got faster than measured: the limit holds until it is
	// measured again (below), rather than grow towards a latency that is
	// no longer the node's unloaded one.
	fast := c.ok > 0 && c.latency*(100+c.p.AdaptiveBuffer) < c.unloaded*100
	// Growth only when the traffic used the limit (Gradient2's rule): a
	// window that held less than half of it in flight says nothing of
	// more.
	if g < permille || !fast && c.peak*2*milli >= c.limit {
		scaled := c.limit * g / permille
		target := scaled + isqrt(scaled*milli)
		c.limit = c.clamp(c.limit + (target-c.limit)*c.p.AdaptiveSmoothing/100)
	}
	if c.limit == c.p.AdaptiveMinLimit*milli {
		c.atMin++
	} else {
		c.atMin = 0
	}
	if g == permille/2 {
		c.slow++
	} else {
		c.slow = 0
	}
	if fast {
		c.fast++
	} else {
		c.fast = 0
	}
	c.reset()
	c.windowEnd = ms + c.span()
	if changed := c.atMin >= rearm || c.slow >= rearm || c.fast >= rearm; changed || ms >= c.nextProbe {
		c.startProbe(ms)
		c.routine = !changed
	}
	return true
}

// span returns the length of the next window: adaptive_window, or twice
// the last window's latency when that is longer (Netflix's windows are
// twice the shortest round trip), so that a window holds more than one
// turn of the node's queue.
func (c *gradient) span() int64 {
	return max(c.p.AdaptiveWindow, 2*c.latency/1000)
}

// isqrt returns ⌊√n⌋ for n ≥ 0.
func isqrt(n int64) int64 {
	if n <= 0 {
		return 0
	}
	x := int64(1) << ((bits.Len64(uint64(n)) + 1) / 2)
	for {
		y := (x + n/x) / 2
		if y >= x {
			return x
		}
		x = y
	}
}

// mix64 is splitmix64's finaliser: a well-spread hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// latencyHist counts latencies in µs in buckets of 1/16 of an octave
// (every value below 16 µs has its own): a percentile within about 3 %.
type latencyHist struct {
	n     [histBuckets]uint32
	count int64
}

const (
	histSub = 16 // buckets per octave
	// histBuckets covers 1 µs to 2⁴⁰ µs (12 days); longer counts in the last.
	histBuckets = (40 - 4 + 1) * histSub
)

// bucketOf returns the bucket of us ≥ 0.
func bucketOf(us int64) int {
	if us < histSub {
		return int(us)
	}
	e := bits.Len64(uint64(us)) - 5 // us >> e is in [16, 32)
	b := (e+1)*histSub + int(us>>e) - histSub
	return min(b, histBuckets-1)
}

// valueOf returns the middle of bucket b.
func valueOf(b int) int64 {
	if b < histSub {
		return int64(b)
	}
	e := b/histSub - 1
	lo := int64(b%histSub+histSub) << e
	return lo + (int64(1)<<e)/2
}

func (h *latencyHist) add(us int64) {
	h.n[bucketOf(us)]++
	h.count++
}

func (h *latencyHist) clear() {
	if h.count > 0 {
		h.n = [histBuckets]uint32{}
		h.count = 0
	}
}

// percentile returns the value below which pct percent of the latencies
// lie (the bucket holding the ⌈count × pct / 100⌉-th smallest), 0 when
// empty.
func (h *latencyHist) percentile(pct int64) int64 {
	if h.count == 0 {
		return 0
	}
	rank := max((h.count*pct+99)/100, 1)
	var seen int64
	for b, n := range h.n {
		seen += int64(n)
		if seen >= rank {
			return max(valueOf(b), 1)
		}
	}
	return valueOf(histBuckets - 1)
}
