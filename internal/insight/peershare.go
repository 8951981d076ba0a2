package insight

import (
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
)

// PeerShareWindow is the stretch PeerShare counts over, in whole minutes:
// the current minute and the four before it.
const PeerShareWindow = 5

// peerShareSlots is the minutes kept: the window and the one being
// cleared for reuse.
const peerShareSlots = PeerShareWindow + 1

// PeerShare estimates, per group, how many distinct peers the limiter
// decided about over the last PeerShareWindow minutes, and how many of
// them it rejected (429) at least once: the share of a group's peers it
// refuses, which one abusive peer cannot move however much it sends
// (docs/metrics.md, "The limiter"). A dry_run group's would-be rejections
// are not rejections (decision 7); undecided requests (exempt peers, a
// group off, the switch off) are not counted. Each minute has a
// HyperLogLog sketch of each count per group (1 024 registers, a standard
// error of about 3 %); an observation costs a hash and an atomic load or
// two, rarely a compare-and-swap. A minute's sketch is cleared as the
// minute begins: an observation racing that clearing may be lost. It is
// safe for concurrent use.
type PeerShare struct {
	groups [limiter.MaxGroups]atomic.Pointer[shareGroup]
}

type shareGroup struct {
	slots [peerShareSlots]shareSlot
}

type shareSlot struct {
	minute         atomic.Int64 // Unix minute the sketches count, -1 never used
	seen, rejected sketch
}

// sketch is a HyperLogLog of 2^sketchBits registers of 6 bits, four
// packed in a word.
type sketch [sketchRegisters / 4]atomic.Uint32

const (
	sketchBits      = 10
	sketchRegisters = 1 << sketchBits
)

// NewPeerShare returns an empty PeerShare.
func NewPeerShare() *PeerShare { return &PeerShare{} }

// Observe counts o's peer as seen by its group, and as rejected when it
// was. It is a limiter.Observer.
func (s *PeerShare) Observe(o *limiter.Observation) {
	if s == nil || !o.Decided || int(o.Group) >= limiter.MaxGroups {
		return
	}
	g := s.groups[o.Group].Load()
	if g == nil {
		g = &shareGroup{}
		for i := range g.slots {
			g.slots[i].minute.Store(-1)
		}
		if !s.groups[o.Group].CompareAndSwap(nil, g) {
			g = s.groups[o.Group].Load()
		}
	}
	minute := o.MS / 60_000
	slot := &g.slots[minute%peerShareSlots]
	if old := slot.minute.Load(); old != minute && old < minute && slot.minute.CompareAndSwap(old, minute) {
		slot.seen.clear()
		slot.rejected.clear()
	}
	if slot.minute.Load() != minute {
		return // a late observation of a minute already reused
	}
	h := hashKey(limiter.KeyOf(&o.Peer))
	slot.seen.add(h)
	if !o.Allowed {
		slot.rejected.add(h)
	}
}

// Counts returns, for group g at nowMS (Unix milliseconds), the estimated
// distinct peers decided about and rejected over the window; ok is false
// when the group has had no decision since the PeerShare began.
func (s *PeerShare) Counts(g limiter.GroupID, nowMS int64) (seen, rejected float64, ok bool) {
	if int(g) >= limiter.MaxGroups {
		return 0, 0, false
	}
	sg := s.groups[g].Load()
	if sg == nil {
		return 0, 0, false
	}
	var seenRegs, rejRegs [sketchRegisters]uint8
	now := nowMS / 60_000
	for i := range sg.slots {
		slot := &sg.slots[i]
		if m := slot.minute.Load(); m <= now-PeerShareWindow || m > now {
			continue
		}
		slot.seen.mergeInto(&seenRegs)
		slot.rejected.mergeInto(&rejRegs)
	}
	return estimate(&seenRegs), estimate(&rejRegs), true
}

// hashKey mixes a peer's key into 64 well-spread bits (the finalizer of
// SplitMix64 over its words).
func hashKey(k limiter.Key) uint64 {
	h := k.Lo ^ bits.RotateLeft64(k.Hi, 29) ^ uint64(k.Last)<<56
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// add records the hash h: its first sketchBits bits choose a register,
// which keeps the largest rank (leading zeros of the rest, plus one).
func (s *sketch) add(h uint64) {
	i := h >> (64 - sketchBits)
	rank := uint32(bits.LeadingZeros64(h<<sketchBits|1<<(sketchBits-1))) + 1
	w := &s[i/4]
	shift := (i % 4) * 8
	for {
		old := w.Load()
		if (old>>shift)&0xff >= rank {
			return
		}
		if w.CompareAndSwap(old, old&^(0xff<<shift)|rank<<shift) {
			return
		}
	}
}

func (s *sketch) clear() {
	for i := range s {
		s[i].Store(0)
	}
}

// mergeInto keeps in regs the larger of each register and s's.
func (s *sketch) mergeInto(regs *[sketchRegisters]uint8) {
	for i := range s {
		w := s[i].Load()
		for j := range 4 {
			if r := uint8(w >> (8 * j)); r > regs[4*i+j] {
				regs[4*i+j] = r
			}
		}
	}
}

// estimate is HyperLogLog's estimate of the distinct hashes the registers
// saw, with linear counting for small counts.
func estimate(regs *[sketchRegisters]uint8) float64 {
	const m = float64(sketchRegisters)
	sum, zeros := 0.0, 0
	for _, r := range regs {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros))
	}
	return e
}
