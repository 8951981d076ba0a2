package insight

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// The sampling Activity keeps the limiter's record within.
const (
	// ArrivalsPerShard is the Recorder's ring per shard the daemon asks
	// for (NewRecorder): small, so that it stays in cache; Run drains it
	// when half full.
	ArrivalsPerShard = 256
	// NthTarget is the uniform sample of decisions Activity asks for, per
	// second: below it every decision is recorded.
	NthTarget = 8192
	// PeerTarget is the rate of the peer sample's requests the request
	// log can hold for RequestLogSpan.
	PeerTarget = RequestLogSize / 3600
	// drainEvery is how often Run drains the limiter's record at least
	// (sooner when a shard's ring is half full).
	drainEvery = 100 * time.Millisecond
	// maxPendingOffenses bounds the (peer, group)s waiting to be saved.
	maxPendingOffenses = 10000
)

// ArrivalShifts returns the sampling Activity settles on for uniform
// traffic of rate decisions per second: the smallest shifts that keep the
// peer sample under PeerTarget and the uniform sample under NthTarget.
func ArrivalShifts(rate float64) (peerShift, nthShift uint) {
	return shiftFor(rate, PeerTarget), shiftFor(rate, NthTarget)
}

// shiftFor returns the smallest k with rate / 2^k ≤ target.
func shiftFor(rate, target float64) uint {
	if rate <= target {
		return 0
	}
	return min(uint(math.Ceil(math.Log2(rate/target))), MaxArrivalShift)
}

// Offense is one (peer, group)'s rejections over a stretch, for the
// forensic record of offenders.
type Offense struct {
	Peer  peer.Key
	Group string
	// Rejections is an estimate when the limiter samples its decisions.
	Rejections  uint64
	First, Last time.Time
}

// Activity follows the record of a limiter's decisions (Recorder): it
// drains it, counts the top talkers
// (Talkers), logs the peer sample's requests for the what-if (Log),
// collects the rejections per (peer, group) to be saved (TakeOffenses),
// and keeps the sampling within NthTarget and PeerTarget. Nothing on the
// request path waits for it. It is safe for concurrent use; Run owns its
// goroutine.
type Activity struct {
	lim     *limiter.Limiter
	rec     *Recorder
	now     func() time.Time
	talkers *Talkers
	log     *RequestLog

	drainMu sync.Mutex // one drain at a time
	buf     []Arrival
	// The sampler's window: since when, the decisions and the peer
	// sample's requests seen in it.
	winStart               time.Time
	winDecisions, winPeers float64
	peerAvg                float64 // the peer sample's rate, over about a minute
	lastLower              time.Time

	mu        sync.Mutex
	offenses  map[talkerKey]*Offense
	dropped   uint64 // offenses not kept: too many pending
	lost      uint64 // records the Recorder overwrote before a drain
	peer, nth uint   // the sampling in force
}

// NewActivity returns an Activity following rec, the record of lim's
// decisions (lim names their groups), counting from now().
func NewActivity(lim *limiter.Limiter, rec *Recorder, now func() time.Time) *Activity {
	t := now()
	return &Activity{lim: lim, rec: rec, now: now, talkers: NewTalkers(t), log: NewRequestLogAt(t), winStart: t, lastLower: t, offenses: map[talkerKey]*Offense{}}
}

// Talkers returns the top talkers' record.
func (a *Activity) Talkers() *Talkers { return a.talkers }

// Log returns the request log the what-if replays.
func (a *Activity) Log() *RequestLog { return a.log }

// Run drains the record every drainEvery, and whenever a shard's ring is
// half full, until ctx ends.
func (a *Activity) Run(ctx context.Context) {
	pending := a.rec.Pending()
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.Drain()
			return
		case <-t.C:
		case <-pending:
		}
		a.Drain()
	}
}

// Drain takes what the Recorder recorded since the last drain and feeds the
// talkers, the log and the offenses; then it adjusts the sampling.
func (a *Activity) Drain() {
	a.drainMu.Lock()
	defer a.drainMu.Unlock()
	now := a.now()
	var lost uint64
	a.buf, lost = a.rec.Drain(a.buf[:0])
	as := a.buf
	a.talkers.Add(now, as)
	a.log.Add(as)
	a.mu.Lock()
	a.lost += lost
	for i := range as {
		x := &as[i]
		if x.Nth {
			a.winDecisions += float64(uint64(1) << x.NthShift)
		}
		if x.InSample {
			a.winPeers++
		}
		// A shed request is no offense: the node was saturated, not the
		// peer over its limits.
		if !x.Nth || x.Reason == limiter.ReasonNone || x.Reason == limiter.ReasonAdaptive {
			continue
		}
		k := talkerKey{x.Peer, x.Group}
		o := a.offenses[k]
		at := time.UnixMilli(x.MS)
		if o == nil {
			if len(a.offenses) >= maxPendingOffenses {
				a.dropped++
				continue
			}
			o = &Offense{Peer: x.Peer, Group: a.lim.GroupName(x.Group), First: at, Last: at}
			a.offenses[k] = o
		}
		o.Rejections += uint64(1) << x.NthShift
		if at.Before(o.First) {
			o.First = at
		}
		if at.After(o.Last) {
			o.Last = at
		}
	}
	a.mu.Unlock()
	a.adjust(now)
}

// adjust sets the sampling from the last second's rates: at once when the
// traffic grows, one step a minute when it falls. drainMu must be held.
func (a *Activity) adjust(now time.Time) {
	el := now.Sub(a.winStart).Seconds()
	if el < 1 {
		if el < 0 {
			a.winStart = now
		}
		return
	}
	rate, peers := a.winDecisions/el, a.winPeers/el
	a.winStart, a.winDecisions, a.winPeers = now, 0, 0
	a.peerAvg += (peers - a.peerAvg) * min(el/60, 1)

	a.mu.Lock()
	nth, peer := shiftFor(rate, NthTarget), a.peer
	switch {
	case peers > 2*PeerTarget:
		peer = min(peer+shiftFor(peers, PeerTarget), MaxArrivalShift)
	case a.peerAvg < PeerTarget/4 && peer > 0 && now.Sub(a.lastLower) >= time.Minute:
		peer--
		a.lastLower = now
		a.peerAvg *= 2
	}
	changed := nth != a.nth || peer != a.peer
	a.nth, a.peer = nth, peer
	a.mu.Unlock()
	if changed {
		a.rec.SetSampling(peer, nth)
	}
}

// Sampling returns the sampling in force (one (peer, group) in 2^peer
// logged whole, one decision in 2^nth counted) and how many records the
// Recorder overwrote before a drain, in all.
func (a *Activity) Sampling() (peer, nth uint, lost uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peer, a.nth, a.lost
}

// TakeOffenses returns the rejections per (peer, group) collected since
// the previous call, and how many (peer, group)s were not kept because too
// many were pending; both start again from nothing.
func (a *Activity) TakeOffenses() ([]Offense, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Offense, 0, len(a.offenses))
	for _, o := range a.offenses {
		out = append(out, *o)
	}
	dropped := a.dropped
	a.offenses, a.dropped = map[talkerKey]*Offense{}, 0
	return out, dropped
}

// PendingOffenses returns a copy of the rejections collected and not yet
// taken (of peer only, when not nil), so that a page can show them before
// they are saved.
func (a *Activity) PendingOffenses(peer *peer.Key) []Offense {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Offense
	for k, o := range a.offenses {
		if peer == nil || k.peer == *peer {
			out = append(out, *o)
		}
	}
	return out
}
