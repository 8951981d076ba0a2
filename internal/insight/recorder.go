package insight

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Arrival is one decision as the dashboard's record keeps it (Recorder):
// when, whose, in which group, whether the limits rejected it, and why it
// was recorded. A dry_run group's would-be rejection is recorded as a
// rejection: the record is of what the limits decided.
type Arrival struct {
	// MS is the decision's time, Unix milliseconds (0 for a time before
	// 1970, saturated at 2⁴⁴−1, the year 2527).
	MS   int64
	Peer peer.Key
	// Group is the group's ID in its Limiter (Limiter.GroupName names it).
	Group limiter.GroupID
	// Reason is ReasonNone when admitted, else ReasonConcurrency,
	// ReasonRateLimit or ReasonAdaptive (shed by the group's adaptive
	// limit).
	Reason limiter.Reason
	// Tag is the (peer, group)'s sampling hash (uniform over uint32).
	Tag uint32
	// InSample is true when every decision of this (peer, group) is being
	// recorded: its Tag is below 2^(32−PeerShift) (see SetSampling).
	InSample  bool
	PeerShift uint8
	// Nth is true when it was recorded as one of the decisions sampled at
	// random, one in 2^NthShift: a uniform sample of the traffic.
	Nth      bool
	NthShift uint8
}

// MaxArrivalShift bounds SetSampling's shifts.
const MaxArrivalShift = 24

// recShards is the number of rings a Recorder keeps, by the (peer,
// group)'s tag: every (peer, group) records into one of them.
const recShards = 64

// Recorder keeps the dashboard's record of a Limiter's decisions: it is
// the limiter.Observer the Limiter tells (limiter.WithObserver), and
// Activity drains it (Drain). It records the decisions the limits made
// (Observation.Decided), not those the policy answered alone, sampled as
// SetSampling says, in a ring of perShard records per shard that a drain
// empties. A record costs a lock no decision holds and a few stores; a
// decision not sampled costs a hash and a random draw. It is safe for
// concurrent use.
type Recorder struct {
	secret   [3]uint64
	sampling atomic.Uint32 // peer shift | nth shift << 8
	poke     chan struct{}
	shards   [recShards]recShard
}

type recShard struct {
	mu   sync.Mutex
	ring arrivalRing
	_    [64]byte // keep the next shard's lock off this cache line
}

// NewRecorder returns a Recorder whose shards hold perShard records each
// (rounded up to a power of two, at least 2), recording every decision.
func NewRecorder(perShard int) *Recorder {
	size := 2
	for size < perShard {
		size <<= 1
	}
	r := &Recorder{poke: make(chan struct{}, 1)}
	for i := range r.secret {
		r.secret[i] = rand.Uint64() | 1
	}
	for i := range r.shards {
		r.shards[i].ring = arrivalRing{buf: make([]arrivalRec, size), mask: uint64(size - 1)}
	}
	return r
}

// tag returns the sampling hash of (k, g): uniform over uint32, fixed for
// the Recorder's life, secret to the outside so that no client can choose
// to fall in or out of the peer sample.
func (r *Recorder) tag(k *peer.Key, g limiter.GroupID) uint32 {
	le := binary.LittleEndian
	a := le.Uint64(k[0:8]) ^ r.secret[0]
	b := le.Uint64(k[8:16]) ^ r.secret[1]
	hi, lo := bits.Mul64(a, b)
	hi, lo = bits.Mul64(hi^lo^uint64(k[16])^uint64(g)<<8, r.secret[2])
	return uint32((hi ^ lo) >> 32)
}

// Observe records o when the limits decided it, or the group's adaptive
// limit shed it, and it falls in a sample (limiter.Observer). A shed
// request is recorded with limiter.ReasonAdaptive: it is traffic the peer
// sent and was refused, so the rates and top lists count it.
func (r *Recorder) Observe(o *limiter.Observation) {
	if !o.Decided && o.Reason != limiter.ReasonAdaptive {
		return
	}
	s := r.sampling.Load()
	peerShift, nthShift := s&0xff, s>>8&0xff
	tag := r.tag(&o.Peer, o.Group)
	var f uint32
	if tag>>(32-peerShift) == 0 {
		f = arrInSample
	}
	if nthShift == 0 || rand.Uint32()&(1<<nthShift-1) == 0 {
		f |= arrNth
	}
	if f == 0 {
		return
	}
	sh := &r.shards[tag%recShards]
	sh.mu.Lock()
	sh.ring.put(o, tag, f, s, r.poke)
	sh.mu.Unlock()
}

// SetSampling chooses which decisions are recorded: every decision of the
// (peer, group)s whose Tag falls in a sample of one in 2^peerShift (their
// sequences are complete: what a replay needs), and one decision in
// 2^nthShift of every (peer, group), at random (a uniform sample of the
// traffic: what rates and top lists need). 0 and 0, the default, record
// every decision. Shifts above MaxArrivalShift are taken as it. Decisions
// observed after it follow it.
func (r *Recorder) SetSampling(peerShift, nthShift uint) {
	r.sampling.Store(uint32(min(peerShift, MaxArrivalShift)) | uint32(min(nthShift, MaxArrivalShift))<<8)
}

// Pending returns a channel that receives when a shard's ring is half full
// since it was last drained (at most one value waits in it), so that the
// drainer need not poll fast to lose nothing.
func (r *Recorder) Pending() <-chan struct{} { return r.poke }

// Drain appends to buf the decisions recorded since the previous call,
// shard by shard: every (peer, group) records into one shard, so the
// arrivals of one (peer, group) come in the order they were observed
// (which, for two decisions of one peer a few microseconds apart on two
// goroutines, may differ from the order they were decided), while those
// of different ones are not ordered by time. It also returns how many were
// lost (overwritten before being drained). Call it from one goroutine.
func (r *Recorder) Drain(buf []Arrival) ([]Arrival, uint64) {
	var lost uint64
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		a := &sh.ring
		n := uint64(len(a.buf))
		if a.head-a.read > n {
			lost += a.head - a.read - n
			a.read = a.head - n
		}
		buf = slices.Grow(buf, int(a.head-a.read))
		for ; a.read < a.head; a.read++ {
			buf = append(buf, a.buf[a.read&a.mask].arrival())
		}
		sh.mu.Unlock()
	}
	return buf, lost
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

// arrivalRing is one shard's record, written and drained under the
// shard's lock.
type arrivalRing struct {
	buf  []arrivalRec
	mask uint64
	head uint64 // records written ever
	read uint64 // records drained (or lost) ever
}

// put records o with tag and flags under sampling; it tells poke (without
// waiting) when the ring is half full.
func (a *arrivalRing) put(o *limiter.Observation, tag, flags, sampling uint32, poke chan struct{}) {
	ms := min(max(o.MS, 0), maxArrivalMS)
	le := binary.LittleEndian
	a.buf[a.head&a.mask] = arrivalRec{
		lo: le.Uint64(o.Peer[0:8]), hi: le.Uint64(o.Peer[8:16]),
		tail: uint64(o.Peer[16]) | uint64(o.Group)<<8 | uint64(o.Reason&0xf)<<16 | uint64(ms)<<20,
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
		MS: int64(r.tail >> 20), Peer: p, Group: limiter.GroupID(r.tail >> 8), Reason: limiter.Reason(r.tail>>16) & 0xf,
		Tag: uint32(r.tag), InSample: f&arrInSample != 0, Nth: f&arrNth != 0,
		PeerShift: uint8(f >> 2), NthShift: uint8(f >> 10),
	}
}

// Observers is a limiter.Observer that tells each of its observers in
// turn: the daemon's Recorder and RejectLog behind the one observer a
// Limiter takes. A nil element is skipped.
type Observers []limiter.Observer

// Observe tells every observer of o.
func (os Observers) Observe(o *limiter.Observation) {
	for _, x := range os {
		if x != nil {
			x.Observe(o)
		}
	}
}
