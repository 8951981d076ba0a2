package limiter

// A group's adaptive concurrency at run time (docs/limiting.md, "Adaptive
// concurrency"): the requests in flight over all its peers and per peer,
// counted with atomics on the decision path, and the controller that sets
// the limit from the node's answers, under a lock off it.

import (
	"sync"
	"sync/atomic"
	"time"
)

// adaptiveSlots is the size of a group's table of per-peer in-flight
// counts: a peer counts in the slot its key hashes to (decision 201).
const adaptiveSlots = 4096

// fairBurst is the admissions a peer may be ahead of its fair pace over
// the limit (decision 235).
const fairBurst = 4

// adaptiveGroup is the adaptive concurrency of one group: safe for
// concurrent use. It is kept across the group's versions while
// adaptive_concurrency stays on (see groupAdaptive), so that a request
// admitted under one version gives its slot back to the counts it took it
// from.
type adaptiveGroup struct {
	// bounds holds the limit (low 32 bits) and the ceiling (high 32): in
	// flight up to the limit, anyone is admitted; above it, only a peer
	// below its fair share, up to the ceiling (twice the limit, the limit
	// itself while the unloaded latency is measured). One word, so that a
	// decision reads both at once.
	bounds atomic.Uint64
	// pace is the fair pace (decision 235): the second the answers are
	// counted in (Unix ms / 1000, high 32 bits); whether the group was
	// busy in the second before (paceBusy: it held more than half its
	// limit at some decision), and only then are its peers counted and
	// paced; and the interval, µs, between two admissions of one peer at
	// the quota, the last second's answers over its peers with an
	// admission (low 31 bits; 0: no pace). Written once a second; with
	// bounds, alone on a cache line the decisions only read.
	pace atomic.Uint64
	_    [48]byte
	// counts holds the group's requests in flight (low 32 bits) and the
	// peers they are of (high 32: the slots holding any; two peers sharing
	// a slot count once), changed together by one addition. epochPeers
	// counts the peers with an admission in pace's second, busy is set
	// once a decision finds the group holding more than half its limit.
	counts     atomic.Int64
	epochPeers atomic.Int64
	busy       atomic.Bool
	_          [44]byte // (an atomic.Bool is 4 bytes)

	// What the last window measured, for the dashboard and the metrics.
	latency  atomic.Int64 // µs
	unloaded atomic.Int64 // µs
	probing  atomic.Bool

	mu      sync.Mutex
	ctl     gradient
	answers int64 // answers in pace's second, under mu

	// slots holds each slot's requests in flight; seen the last second
	// it had an admission in, tat its theoretical arrival time at the
	// fair pace (µs), both read and written only while the group is busy:
	// an idle group's decisions touch slots alone.
	slots [adaptiveSlots]atomic.Int32
	seen  [adaptiveSlots]atomic.Uint32
	tat   [adaptiveSlots]atomic.Int64
}

// paceBusy is pace's bit set when the group was busy in the second
// before.
const paceBusy = 1 << 31

// onePeer is a peer's part of adaptiveGroup.counts.
const onePeer = 1 << 32

// split returns the requests in flight and the peers of a counts word.
func split(w int64) (inflight, peers int64) { return w & (onePeer - 1), w >> 32 }

// newAdaptiveGroup returns the adaptive concurrency of settings p (on,
// valid) at ms, measuring the unloaded latency first.
func newAdaptiveGroup(p Adaptive, ms int64) *adaptiveGroup {
	a := &adaptiveGroup{}
	a.ctl = *newGradient(p, ms)
	a.publish()
	return a
}

// publish copies the controller's limit and figures to the atomics the
// decisions and the readers see. a.mu is held (or a is not shared yet).
func (a *adaptiveGroup) publish() {
	l := min(a.ctl.current(), maxSetting)
	ceil := 2 * l
	if a.ctl.probing {
		ceil = l
	}
	a.bounds.Store(uint64(ceil)<<32 | uint64(l))
	a.latency.Store(a.ctl.latency)
	a.unloaded.Store(a.ctl.unloaded)
	a.probing.Store(a.ctl.probing)
}

// setParams applies a group's new adaptive settings (on, valid).
func (a *adaptiveGroup) setParams(p Adaptive) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctl.p != p {
		a.ctl.setParams(p)
		a.publish()
	}
}

// restore sets the limit and the unloaded latency of a snapshot at ms.
func (a *adaptiveGroup) restore(s *AdaptiveSnapshot, ms int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctl.restore(s.Limit, s.UnloadedUS, ms)
	a.publish()
}

// slotOf returns the slot of peer k: its words folded into one, the high
// bits onto the low (an IPv4 address sits in bits 8–39 of Lo, an IPv6
// prefix's site and subnet in its high bytes; 29, a shift across the
// bytes), then Fibonacci hashing — the top 12 bits of a product by 2⁶⁴/φ.
// Half the instructions of a full mixer on every decision, and peers as
// well spread over the slots (TestSlotOfSpreadsAddresses).
func slotOf(k Key) uint32 {
	x := k.Lo ^ k.Hi*0xbf58476d1ce4e5b9 ^ uint64(k.Last)
	x ^= x >> 29
	return uint32(x * 0x9e3779b97f4a7c15 >> (64 - 12))
}

// contend decides a request that finds its group busy or over its limit.
// Every request first takes its in-flight slot — the peer's count in its
// slot and the group's counts, one addition each — and is admitted at
// once while the group holds no more than half its limit and keeps no
// fair pace (Limiter.Decide does that part itself rather than call it:
// every decision of the group pays it). Otherwise, up to the limit,
// anyone is admitted. Above it (decisions 201 and 235), a request is shed
// when the group holds its ceiling; when the peer is more than fairBurst
// admissions ahead of its fair pace (one admission every second / quota,
// the quota being the last second's answers over its peers, kept as GCRA
// keeps a theoretical arrival time); and when the peer holds its fair
// share of the slots (the limit divided by the peers in flight, itself
// included) and is not behind its pace. s is the peer's count (slot i,
// held before the request), w the group's counts after it, b and pace
// bounds and pace as the request read them. contend returns the peer's
// count to give back (release), and shed true when the request is over
// them — nil then, its counts given back, but with force (dry_run), when
// it keeps them.
func (a *adaptiveGroup) contend(s *atomic.Int32, i uint32, held, w int64, b, pace uint64, ms int64, force bool) (slot *atomic.Int32, shed bool) {
	limit, ceil := int64(b&(1<<32-1)), int64(b>>32)
	n, peers := split(w)
	if 2*n > limit && !a.busy.Load() {
		a.busy.Store(true)
	}
	// interval is the fair pace's (µs), ahead how far the peer's
	// theoretical arrival time is past ms (µs); both 0 without a pace.
	interval := int64(pace & (paceBusy - 1))
	var ahead, tat, us int64
	if interval > 0 {
		us = ms * 1000
		tat = a.tat[i].Load()
		ahead = tat - us
	}
	if n > limit {
		paced := interval == 0 || ahead > (fairBurst-1)*interval
		if n > ceil || interval > 0 && ahead > fairBurst*interval || held > 0 && held*peers >= limit && paced {
			shed = true
			if !force {
				// Given back as a release gives it: by the slot's own
				// transition, since a request sharing the slot may have
				// come or gone since it was counted.
				a.release(s)
				return nil, true
			}
		}
	}
	if interval > 0 {
		a.tat[i].Store(max(tat, us) + interval)
	}
	if pace&paceBusy != 0 {
		if e := uint32(pace >> 32); a.seen[i].Load() != e && a.seen[i].Swap(e) != e {
			a.epochPeers.Add(1)
		}
	}
	return s, shed
}

// release gives back a slot a decision took.
func (a *adaptiveGroup) release(s *atomic.Int32) {
	d := int64(-1)
	if s.Add(-1) == 0 {
		d -= onePeer
	}
	a.counts.Add(d)
}

// sample feeds the controller with one answer of the node at ms to a
// request admitted at admitted (docs/limiting.md, "Adaptive concurrency").
func (a *adaptiveGroup) sample(ms, admitted int64, latency time.Duration, failed bool) {
	us := latency.Microseconds()
	n, _ := split(a.counts.Load())
	a.mu.Lock()
	if e := ms / 1000; uint64(e) != a.pace.Load()>>32 {
		// A new second. Its peers are counted, and it is paced, when the
		// one before was busy; the quota is the last second's answers over
		// its peers, when it was the second before and they were counted.
		prev := a.pace.Load()
		var next uint64
		busy := a.busy.Swap(false)
		p := a.epochPeers.Swap(0)
		if busy {
			next = paceBusy
			if p > 0 && prev&paceBusy != 0 && uint64(e) == prev>>32+1 {
				next |= uint64(min(max(1, 1_000_000/((a.answers+p-1)/p)), paceBusy-1))
			}
		}
		a.pace.Store(uint64(e)<<32 | next)
		a.answers = 0
	}
	a.answers++
	routine := a.ctl.probing && a.ctl.routine
	if a.ctl.sample(ms, admitted, us, failed, n) {
		if routine && !a.ctl.probing {
			a.catchUp(ms)
		}
		a.publish()
	}
	a.mu.Unlock()
}

// catchUp brings every peer's fair pace up to ms at the end of a routine
// measurement of the unloaded latency (decision 226): each stands as if it
// had just taken its burst, fairBurst − 1 admissions ahead. The limit goes
// back from the minimum to where it was, the node unchanged; without it,
// the peers the measurement shed, their paces in the past, are all
// admitted over the limit at once, up to the ceiling, and the node queues
// twice its concurrency for a turn. a.mu is held.
func (a *adaptiveGroup) catchUp(ms int64) {
	interval := int64(a.pace.Load() & (paceBusy - 1))
	if interval == 0 {
		return
	}
	t := ms*1000 + (fairBurst-1)*interval
	for i := range a.tat {
		if a.tat[i].Load() < t {
			a.tat[i].Store(t)
		}
	}
}

// AdaptiveView is what a group's adaptive concurrency stands at: for the
// dashboard, the metrics and the API.
type AdaptiveView struct {
	// Limit is the limit in force (the minimum while the unloaded
	// latency is measured).
	Limit int64 `json:"limit"`
	// Inflight are the group's requests in flight, all peers together;
	// Peers, the peers they are of.
	Inflight int64 `json:"inflight"`
	Peers    int64 `json:"peers"`
	// Latency is the last window's latency (its percentile), Unloaded
	// the last measurement's; zero until there is one.
	Latency  time.Duration `json:"latency_ns"`
	Unloaded time.Duration `json:"unloaded_ns"`
	// Probing is true while the unloaded latency is measured.
	Probing bool `json:"probing"`
}

// view returns the figures now.
func (a *adaptiveGroup) view() AdaptiveView {
	n, peers := split(a.counts.Load())
	return AdaptiveView{
		Limit:    int64(a.bounds.Load() & (1<<32 - 1)),
		Inflight: n,
		Peers:    peers,
		Latency:  time.Duration(a.latency.Load()) * time.Microsecond,
		Unloaded: time.Duration(a.unloaded.Load()) * time.Microsecond,
		Probing:  a.probing.Load(),
	}
}

// snapshot returns what a restart restores, nil while nothing was
// measured.
func (a *adaptiveGroup) snapshot() *AdaptiveSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &a.ctl
	if c.unloaded == 0 {
		return nil
	}
	l := c.limit
	if c.probing {
		l = c.deferred
	}
	return &AdaptiveSnapshot{Limit: max(1, l/milli), UnloadedUS: c.unloaded}
}

// AdaptiveSnapshot is a group's adaptive limit as a snapshot keeps it
// (GroupSnapshot.Adaptive): a restart starts from it rather than from the
// minimum or the maximum.
type AdaptiveSnapshot struct {
	// Limit is the limit (outside a measurement of the unloaded latency,
	// the one it goes back to).
	Limit int64 `json:"limit"`
	// UnloadedUS is the node's unloaded latency, µs.
	UnloadedUS int64 `json:"unloaded_us"`
}

// groupAdaptive returns the adaptive concurrency of group id with settings
// gs at ms: nil when off; prev's while it was on (its new settings are
// applied when the version is installed, see Limiter.install); else new.
func groupAdaptive(prev *settings, id GroupID, gs *GroupSettings, ms int64) *adaptiveGroup {
	if !gs.AdaptiveConcurrency {
		return nil
	}
	if prev != nil && prev.groups[id].defined {
		if a := prev.groups[id].adaptive; a != nil {
			return a
		}
	}
	return newAdaptiveGroup(gs.Adaptive, ms)
}
