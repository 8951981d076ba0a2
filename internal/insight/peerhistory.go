package insight

import (
	"sync"
	"time"
	"unsafe"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Sizes of the per-peer history.
const (
	// PeerHistoryStep is the time between two points of a peer's history:
	// Server.Run samples the chosen peers this often.
	PeerHistoryStep = 10 * time.Second
	// PeerHistoryPoints is how many points a peer's history keeps: an hour.
	PeerHistoryPoints = 360
	// PeerHistoryMax is the most peers the history keeps at once. At 16
	// bytes a point that is 1000 × 360 × 16 B ≈ 5.8 MB, plus about 100
	// bytes of bookkeeping a peer.
	PeerHistoryMax = 1000
	// PeerHistoryTop is how many of the top entries by requests, and by
	// rejections, are chosen at each sample (from the peer index).
	PeerHistoryTop = 100
	// PeerHistoryWatch is how long after its page was last viewed (or its
	// chart fetched) a peer stays chosen.
	PeerHistoryWatch = 15 * time.Minute
	// PeerHistoryKeep is how long a peer's history is kept (and sampled)
	// after the peer was last chosen.
	PeerHistoryKeep = time.Hour
)

const peerStepSec = int64(PeerHistoryStep / time.Second)

// peerPoint is one peer's 10 seconds: the increase of its counters, summed
// over its groups, and its in-flight requests at the end. Fields saturate.
type peerPoint struct {
	requests, rejConc, rejRate, inflight uint32
}

// groupCounters are a peer's cumulative counters in one group, as the
// limiter's entry holds them.
type groupCounters struct {
	group                      limiter.GroupID
	requests, rejConc, rejRate uint64
}

// peerRecord is one kept peer: a ring of points, the point of slot s (unix
// seconds / 10) at ring[s % PeerHistoryPoints].
type peerRecord struct {
	ring [PeerHistoryPoints]peerPoint
	// prev are the counters at the previous sample (the baseline).
	prev []groupCounters
	// based is false until the first sample, which only sets prev.
	based bool
	// first is the first slot holding a recorded increase.
	first int64
	// start is when the baseline was taken.
	start time.Time
	// chosen is when the peer was last among the top peers or watched;
	// viewed when its page was last viewed.
	chosen, viewed time.Time
}

// PeerHistory keeps the last hour of a bounded set of peers' counters, a
// point every PeerHistoryStep: their requests and rejections by reason
// (the increase over the 10 s, summed over the peer's groups) and their
// in-flight requests. Server.Run samples, every PeerHistoryStep, the
// peers chosen then — the top PeerHistoryTop entries by requests and by
// rejections, and every peer whose page was viewed in the last
// PeerHistoryWatch — and every peer kept; a peer not chosen for
// PeerHistoryKeep is dropped, and beyond PeerHistoryMax peers the one
// chosen longest ago makes room. Nothing on the proxy's request path
// touches it. It is safe for concurrent use.
type PeerHistory struct {
	mu      sync.Mutex
	started bool
	last    int64 // newest slot sampled
	peers   map[peer.Key]*peerRecord
	max     int
}

// NewPeerHistory returns an empty PeerHistory keeping at most
// PeerHistoryMax peers.
func NewPeerHistory() *PeerHistory {
	return &PeerHistory{peers: map[peer.Key]*peerRecord{}, max: PeerHistoryMax}
}

func slotOf(t time.Time) int64 {
	u := t.Unix()
	if u < 0 {
		return (u - peerStepSec + 1) / peerStepSec
	}
	return u / peerStepSec
}

func ringIndex(slot int64) int {
	i := slot % PeerHistoryPoints
	if i < 0 {
		i += PeerHistoryPoints
	}
	return int(i)
}

// Len returns how many peers are kept.
func (h *PeerHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.peers)
}

// PeerHistoryMaxBytes is the memory PeerHistoryMax kept peers' records
// hold, not counting their baselines (a few dozen bytes a group the peer
// is tracked in).
const PeerHistoryMaxBytes = PeerHistoryMax * int64(unsafe.Sizeof(peerRecord{}))

// Bytes returns the memory the kept peers' records hold now, baselines
// included (the map's own buckets are not counted).
func (h *PeerHistory) Bytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := int64(len(h.peers)) * int64(unsafe.Sizeof(peerRecord{}))
	for _, r := range h.peers {
		n += int64(cap(r.prev)) * int64(unsafe.Sizeof(groupCounters{}))
	}
	return n
}

// Kept reports whether k's history is kept.
func (h *PeerHistory) Kept(k peer.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.peers[k]
	return ok
}

// addLocked returns k's record, making room for a new one (dropping the
// peer chosen longest ago) when PeerHistoryMax are kept.
func (h *PeerHistory) addLocked(k peer.Key, now time.Time) (rec *peerRecord, added bool) {
	if rec := h.peers[k]; rec != nil {
		return rec, false
	}
	if len(h.peers) >= h.max {
		var oldest peer.Key
		var at time.Time
		first := true
		for pk, r := range h.peers {
			if first || r.chosen.Before(at) {
				oldest, at, first = pk, r.chosen, false
			}
		}
		delete(h.peers, oldest)
	}
	rec = &peerRecord{chosen: now}
	h.peers[k] = rec
	return rec, true
}

// Watch marks k as viewed at now: it is sampled for PeerHistoryWatch from
// now on. When k was not kept, views (its entries now) are its baseline
// and Watch returns false: its history starts now.
func (h *PeerHistory) Watch(now time.Time, k peer.Key, views []limiter.EntryView) (wasKept bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, added := h.addLocked(k, now)
	rec.chosen, rec.viewed = now, now
	if added {
		rec.baseline(now, views)
	}
	return !added
}

func (r *peerRecord) baseline(now time.Time, views []limiter.EntryView) {
	r.prev = countersOfViews(r.prev[:0], views)
	r.based, r.start, r.first = true, now, slotOf(now)+1
}

func countersOfViews(dst []groupCounters, views []limiter.EntryView) []groupCounters {
	for _, v := range views {
		dst = append(dst, groupCounters{group: v.GroupID, requests: v.Requests, rejConc: v.RejectedConcurrency, rejRate: v.RejectedRateLimit})
	}
	return dst
}

// record adds the increase since the previous sample to slot's point and
// sets its in-flight gauge. A group the peer was not tracked in at the
// previous sample counts from zero (its entry is new); a counter that went
// down (the entry was forgotten and made again) counts from zero too.
func (r *peerRecord) record(now time.Time, slot int64, views []limiter.EntryView) {
	if !r.based {
		r.baseline(now, views)
		return
	}
	var req, conc, rate, inflight uint64
	for _, v := range views {
		var p groupCounters
		for _, x := range r.prev {
			if x.group == v.GroupID {
				p = x
				break
			}
		}
		req += delta(v.Requests, p.requests)
		conc += delta(v.RejectedConcurrency, p.rejConc)
		rate += delta(v.RejectedRateLimit, p.rejRate)
		inflight += uint64(max(v.Inflight, 0))
	}
	r.prev = countersOfViews(r.prev[:0], views)
	if slot < r.first {
		// The baseline was taken earlier in this very slot.
		r.first = slot
	}
	pt := &r.ring[ringIndex(slot)]
	pt.requests = sat32(uint64(pt.requests) + req)
	pt.rejConc = sat32(uint64(pt.rejConc) + conc)
	pt.rejRate = sat32(uint64(pt.rejRate) + rate)
	pt.inflight = sat32(inflight)
}

// Sample records one point for every kept peer and for the peers of top
// (now chosen), reading each peer's entries with read, which is called
// without PeerHistory's lock held. A peer new to the history gets only its
// baseline. Slots skipped since the previous sample are zeros; a second
// sample in one slot adds to it; a time before the newest sample (the
// clock went back) is ignored.
func (h *PeerHistory) Sample(now time.Time, top []peer.Key, read func(peer.Key) []limiter.EntryView) {
	slot := slotOf(now)
	h.mu.Lock()
	if h.started && slot < h.last {
		h.mu.Unlock()
		return
	}
	h.advanceLocked(slot)
	for _, k := range top {
		rec, _ := h.addLocked(k, now)
		rec.chosen = now
	}
	keys := make([]peer.Key, 0, len(h.peers))
	for k, rec := range h.peers {
		if now.Sub(rec.viewed) <= PeerHistoryWatch {
			rec.chosen = now
		}
		if now.Sub(rec.chosen) > PeerHistoryKeep {
			delete(h.peers, k)
			continue
		}
		keys = append(keys, k)
	}
	h.mu.Unlock()

	views := make([][]limiter.EntryView, len(keys))
	for i, k := range keys {
		views[i] = read(k)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if slot < h.last {
		return
	}
	h.advanceLocked(slot)
	for i, k := range keys {
		if rec := h.peers[k]; rec != nil {
			rec.record(now, slot, views[i])
		}
	}
}

// advanceLocked makes slot the newest, clearing the slots skipped since the
// previous newest (and slot itself) in every record.
func (h *PeerHistory) advanceLocked(slot int64) {
	if !h.started {
		h.started, h.last = true, slot
		for _, rec := range h.peers {
			rec.ring[ringIndex(slot)] = peerPoint{}
		}
		return
	}
	if slot <= h.last {
		return
	}
	from := max(h.last+1, slot-PeerHistoryPoints+1)
	for _, rec := range h.peers {
		for s := from; s <= slot; s++ {
			rec.ring[ringIndex(s)] = peerPoint{}
		}
	}
	h.last = slot
}

// PeerSeries is a peer's history as parallel slices, one element a point:
// T holds the unix second each point's 10 s start at, the others the
// increase of the counters over those seconds (summed over the peer's
// groups) and the in-flight requests at their end.
type PeerSeries struct {
	// Kept is false when no history is kept for the peer.
	Kept bool `json:"kept"`
	// Step is the seconds a point covers.
	Step int `json:"step"`
	// Since is when the recording started (unix seconds); 0 when not kept.
	Since               int64    `json:"since"`
	T                   []int64  `json:"t"`
	Requests            []uint64 `json:"requests"`
	RejectedConcurrency []uint64 `json:"rejected_concurrency"`
	RejectedRateLimit   []uint64 `json:"rejected_rate_limit"`
	Inflight            []uint64 `json:"inflight"`
}

// Series returns k's points from since (or from its first point, or an
// hour before the newest sample, whichever is latest) to the newest
// sample. The slices are never nil.
func (h *PeerHistory) Series(k peer.Key, since time.Time) PeerSeries {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := PeerSeries{Step: int(peerStepSec)}
	rec := h.peers[k]
	n := 0
	from := int64(0)
	if rec != nil {
		s.Kept, s.Since = true, rec.start.Unix()
		from = max(slotOf(since), rec.first, h.last-PeerHistoryPoints+1)
		if h.started && from <= h.last {
			n = int(h.last - from + 1)
		}
	}
	s.T = make([]int64, n)
	s.Requests, s.RejectedConcurrency = make([]uint64, n), make([]uint64, n)
	s.RejectedRateLimit, s.Inflight = make([]uint64, n), make([]uint64, n)
	for i := range n {
		slot := from + int64(i)
		pt := &rec.ring[ringIndex(slot)]
		s.T[i] = slot * peerStepSec
		s.Requests[i] = uint64(pt.requests)
		s.RejectedConcurrency[i] = uint64(pt.rejConc)
		s.RejectedRateLimit[i] = uint64(pt.rejRate)
		s.Inflight[i] = uint64(pt.inflight)
	}
	return s
}
