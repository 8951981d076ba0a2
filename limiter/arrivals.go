package limiter

import (
	"encoding/binary"
	"slices"

	"github.com/limiterd/limiterd/limiter/peer"
)

// Arrival is one request the local backend decided, as recorded for the
// dashboard (WithArrivals): when, whose, in which group, whether the
// backend rejected it, and why it was recorded. It is the backend's
// decision: a dry_run group's rejection (let through by the policy) is
// recorded as a rejection.
type Arrival struct {
	// MS is the decision's time, Unix milliseconds (0 for a time before
	// 1970, saturated at 2⁴⁴−1, the year 2527).
	MS   int64
	Peer peer.Key
	// Group is the group's ID in its Limiter (GroupTable.Name names it).
	Group GroupID
	// Reason is ReasonNone when admitted, else ReasonConcurrency or
	// ReasonRateLimit.
	Reason Reason
	// Tag is the (peer, group)'s sampling hash (uniform over uint32).
	Tag uint32
	// InSample is true when every decision of this (peer, group) is being
	// recorded: its Tag is below 2^(32−PeerShift) (see SetArrivalSampling).
	InSample  bool
	PeerShift uint8
	// Nth is true when it was recorded as one of every 2^NthShift
	// decisions of its (peer, group).
	Nth      bool
	NthShift uint8
}

// arrivalRec is an Arrival in four words: the peer key's first sixteen
// bytes; its last byte, the group, the reason and the time (bits 0–7,
// 8–15, 16–19, 20–63); the tag and the sampling (bits 0–31, 32–63).
type arrivalRec struct{ lo, hi, tail, tag uint64 }

const maxArrivalMS = 1<<44 - 1

// Sampling flags of arrivalRec.tag's upper half.
const (
	arrInSample = 1 << iota
	arrNth
)

// arrivalRing is one shard's record of its decisions, written under the
// shard's lock (plain stores: no atomic, no allocation) and drained under
// it. A nil buf records nothing.
type arrivalRing struct {
	buf  []arrivalRec
	mask uint64
	head uint64 // records written ever
	read uint64 // records drained (or lost) ever
}

// sampled returns the sampling flags of a decision of the (peer, group)
// with tag whose requests counter (after it) is requests, under sampling
// (SetArrivalSampling's shifts, peer | nth<<8); 0 when it is not to be
// recorded.
func sampled(sampling, tag, requests uint32) uint32 {
	var f uint32
	if tag>>(32-sampling&0xff) == 0 {
		f = arrInSample
	}
	if requests&(1<<(sampling>>8&0xff)-1) == 0 {
		f |= arrNth
	}
	return f
}

// put records one decision with flags under sampling; it tells poke
// (without waiting) when the ring is half full. The shard's lock must be
// held.
func (a *arrivalRing) put(k Key, g GroupID, r Reason, ms int64, tag, flags, sampling uint32, poke chan struct{}) {
	ms = min(max(ms, 0), maxArrivalMS)
	a.buf[a.head&a.mask] = arrivalRec{
		lo: k.lo, hi: k.hi,
		tail: uint64(k.last) | uint64(g)<<8 | uint64(r&0xf)<<16 | uint64(ms)<<20,
		tag:  uint64(tag) | uint64(flags|sampling<<2)<<32,
	}
	a.head++
	if a.head-a.read == uint64(len(a.buf)/2) {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
}

func (r *arrivalRec) arrival() Arrival {
	var p peer.Key
	le := binary.LittleEndian
	le.PutUint64(p[0:8], r.lo)
	le.PutUint64(p[8:16], r.hi)
	p[16] = byte(r.tail)
	f := uint32(r.tag >> 32)
	return Arrival{
		MS: int64(r.tail >> 20), Peer: p, Group: GroupID(r.tail >> 8), Reason: Reason(r.tail>>16) & 0xf,
		Tag: uint32(r.tag), InSample: f&arrInSample != 0, Nth: f&arrNth != 0,
		PeerShift: uint8(f >> 2), NthShift: uint8(f >> 10),
	}
}

// WithArrivals makes the Limiter's local backend record its decisions
// (Arrival) in a ring of perShard records per shard (rounded up to a power
// of two, at least 2; 64 shards) that DrainArrivals empties: what the
// dashboard's top talkers, offenders and what-if are built from. Which
// decisions are recorded is SetArrivalSampling's (at first, all). A record
// costs a few plain stores under the lock the decision holds anyway; a
// ring half full tells ArrivalsPending, and one not drained in time
// overwrites its oldest records (which DrainArrivals counts as lost).
// perShard ≤ 0, or a Backend other than the local one (WithBackend),
// records nothing.
func WithArrivals(perShard int) Option {
	return func(l *Limiter) { l.arrivalsPerShard = perShard }
}

// recordArrivals gives every shard a ring of n records (a power of two).
func (b *local) recordArrivals(n int) {
	size := 2
	for size < n {
		size <<= 1
	}
	b.poke = make(chan struct{}, 1)
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		sh.arr = arrivalRing{buf: make([]arrivalRec, size), mask: uint64(size - 1)}
		sh.mu.Unlock()
	}
}

// MaxArrivalShift bounds SetArrivalSampling's shifts.
const MaxArrivalShift = 24

// SetArrivalSampling chooses which decisions WithArrivals records: every
// decision of the (peer, group)s whose Tag falls in a sample of one in
// 2^peerShift (their sequences are complete: what a replay needs), and
// every 2^nthShift-th decision of every (peer, group) (a uniform sample of
// the traffic: what rates and top lists need). 0 and 0, the default,
// record every decision. Shifts above MaxArrivalShift are taken as it.
// Safe to call at any time; decisions taken after it follow it.
func (l *Limiter) SetArrivalSampling(peerShift, nthShift uint) {
	if l.local != nil {
		l.local.sampling.Store(uint32(min(peerShift, MaxArrivalShift)) | uint32(min(nthShift, MaxArrivalShift))<<8)
	}
}

// ArrivalsPending returns a channel that receives when a shard's record is
// half full since it was last drained (at most one value waits in it), so
// that the drainer need not poll fast to lose nothing; nil without
// WithArrivals.
func (l *Limiter) ArrivalsPending() <-chan struct{} {
	if l.local == nil {
		return nil
	}
	return l.local.poke
}

// DrainArrivals appends to buf the decisions recorded since the previous
// call (see WithArrivals), shard by shard: every (peer, group) lives in
// one shard, so the arrivals of one (peer, group) come in the order they
// were decided, while arrivals of different ones are not ordered by time.
// It also returns how many were lost (overwritten before being drained).
// Each shard's lock is held while its records are copied. Call it from
// one goroutine.
func (l *Limiter) DrainArrivals(buf []Arrival) ([]Arrival, uint64) {
	if l.local == nil {
		return buf, 0
	}
	var lost uint64
	for i := range l.local.shards {
		sh := &l.local.shards[i]
		sh.mu.Lock()
		a := &sh.arr
		if n := uint64(len(a.buf)); n > 0 {
			if a.head-a.read > n {
				lost += a.head - a.read - n
				a.read = a.head - n
			}
			buf = slices.Grow(buf, int(a.head-a.read))
			for ; a.read < a.head; a.read++ {
				buf = append(buf, a.buf[a.read&a.mask].arrival())
			}
		}
		sh.mu.Unlock()
	}
	return buf, lost
}
