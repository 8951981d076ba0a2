package limiter

// A group's periodic ticks (the Arweave hybrid's leaky and cleanup ticks)
// on a fixed timeline that keeps its phase across live changes of the
// interval and restarts.

import "math"

// maxInterval bounds an interval: 2³¹−1 ms, as the settings.
const maxInterval = 1<<31 - 1

// Schedule places a group's ticks on a fixed timeline: tick Index at time
// Anchor, then one every Interval ms. A live change of the interval takes
// effect at the next tick of the old schedule (Switch), so no entry ever
// sees a tick twice or misses one: ticks before Switch follow the old
// interval, ticks from Switch on follow Next.
//
// Times are Unix milliseconds. The zero Schedule is not valid; make one
// with NewSchedule.
type Schedule struct {
	Anchor   int64 `json:"anchor_ms"`
	Index    int64 `json:"index"`
	Interval int64 `json:"interval_ms"`
	// Switch is the time of the tick from which NextInterval applies, or 0
	// when no change is pending.
	Switch       int64 `json:"switch_ms,omitempty"`
	SwitchIndex  int64 `json:"switch_index,omitempty"`
	NextInterval int64 `json:"next_interval_ms,omitempty"`
}

// NewSchedule returns a schedule whose tick 0 falls at epoch.
func NewSchedule(epoch, interval int64) Schedule {
	return Schedule{Anchor: epoch, Interval: interval}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// IndexAt returns the index of the last tick at or before t. A tick and a
// request at the same millisecond: the tick comes first.
func (s *Schedule) IndexAt(t int64) int64 {
	if s.Switch != 0 && t >= s.Switch {
		return s.SwitchIndex + floorDiv(t-s.Switch, s.NextInterval)
	}
	return s.Index + floorDiv(t-s.Anchor, s.Interval)
}

// TimeOf returns the time of tick k.
func (s *Schedule) TimeOf(k int64) int64 {
	if s.Switch != 0 && k >= s.SwitchIndex {
		return s.Switch + (k-s.SwitchIndex)*s.NextInterval
	}
	return s.Anchor + (k-s.Index)*s.Interval
}

// NextAfter returns the time of the first tick strictly after t.
func (s *Schedule) NextAfter(t int64) int64 { return s.TimeOf(s.IndexAt(t) + 1) }

// Settled returns s with a switch that is in the past at now folded into
// the base segment.
func (s Schedule) Settled(now int64) Schedule {
	if s.Switch != 0 && now >= s.Switch {
		return Schedule{Anchor: s.Switch, Index: s.SwitchIndex, Interval: s.NextInterval}
	}
	return s
}

// Retimed returns s with its interval changed to interval as of now: the
// next tick of the current schedule still happens, and the new interval
// applies from it on. Retimed with the current interval changes nothing.
func (s Schedule) Retimed(now, interval int64) Schedule {
	s = s.Settled(now)
	if s.Switch == 0 && s.Interval == interval {
		return s
	}
	k := s.IndexAt(now) + 1
	t := s.TimeOf(k)
	if s.Switch != 0 {
		// A change is already pending at s.Switch: replace its interval.
		if s.Interval == interval {
			return Schedule{Anchor: s.Anchor, Index: s.Index, Interval: s.Interval}
		}
		s.NextInterval = interval
		return s
	}
	return Schedule{Anchor: s.Anchor, Index: s.Index, Interval: s.Interval, Switch: t, SwitchIndex: k, NextInterval: interval}
}

// Shifted returns s moved by d ms (used to restore across a clock that went
// backwards: the schedule keeps its phase relative to the saved state).
func (s Schedule) Shifted(d int64) Schedule {
	s.Anchor += d
	if s.Switch != 0 {
		s.Switch += d
	}
	return s
}

// Valid reports whether s can be used: intervals from 1 to 2³¹−1 ms, and
// an anchor far from the ends of int64 (Restore refuses others).
func (s Schedule) Valid() bool {
	return s.Interval > 0 && s.Interval <= maxInterval &&
		(s.Switch == 0 || (s.NextInterval > 0 && s.NextInterval <= maxInterval)) &&
		s.Anchor > math.MinInt64/4 && s.Anchor < math.MaxInt64/4
}

// TickSpan caches the span [From, To) of times that share one tick index of a
// schedule, and that index, for one version of the schedule: a caller
// that asks again within the span does not divide. The zero TickSpan is
// empty. It is not safe for concurrent use (the limiter keeps one per
// table shard and group, under the shard's lock).
type TickSpan struct {
	ver      uint64
	From, To int64
	k        int64
}

// Index returns s.IndexAt(ms), from the span when ms is in it and ver is
// the version it was computed for, else computing the span anew.
func (c *TickSpan) Index(s *Schedule, ver uint64, ms int64) int64 {
	if c.ver != ver || ms < c.From || ms >= c.To {
		k := s.IndexAt(ms)
		*c = TickSpan{ver: ver, From: s.TimeOf(k), To: s.TimeOf(k + 1), k: k}
	}
	return c.k
}
