package insight

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/limiterd/limiterd/limiter"
)

// Sizes of the request log.
const (
	// RequestLogSize is how many requests the log holds: at 16 bytes each,
	// 16 MiB when full (allocated as it fills, logChunk at a time).
	RequestLogSize = 1 << 20
	logChunk       = 1 << 16
	// RequestLogSpan is how far back a what-if looks.
	RequestLogSpan = time.Hour
)

// logRec is one logged request in two words: the time, the group, the
// reason and the sample shift (bits 20–63, 12–19, 8–11, 0–7); the
// (peer, group)'s sampling tag and a hash of its peer key (bits 32–63,
// 0–31), which together name the (peer, group) within its group.
type logRec struct{ w0, w1 uint64 }

func (r *logRec) ms() int64              { return int64(r.w0 >> 20) }
func (r *logRec) group() limiter.GroupID { return limiter.GroupID(r.w0 >> 12) }
func (r *logRec) reason() limiter.Reason { return limiter.Reason(r.w0>>8) & 0xf }
func (r *logRec) shift() uint8           { return uint8(r.w0) }

// RequestLog is the bounded record of recent requests the what-if replays:
// every request of the (peer, group)s in the limiter's peer sample
// (Arrival.InSample), the newest RequestLogSize, oldest
// overwritten. Activity adds to it; Replay reads it. It is safe for
// concurrent use.
type RequestLog struct {
	seed maphash.Seed

	// start is when the log began to record (zero: unknown): a replay
	// says it covers no further back.
	start time.Time

	mu     sync.RWMutex
	chunks [][]logRec
	head   uint64 // records added ever
}

// NewRequestLog returns an empty log.
func NewRequestLog() *RequestLog { return &RequestLog{seed: maphash.MakeSeed()} }

// NewRequestLogAt returns an empty log that began to record at start: a
// replay asked for more than the log has been recording says it covers
// the time since start only (ReplayResult.Since).
func NewRequestLogAt(start time.Time) *RequestLog {
	l := NewRequestLog()
	l.start = start
	return l
}

// Add appends the arrivals of the peer sample among as. Arrivals outside
// the sample are skipped.
func (l *RequestLog) Add(as []Arrival) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range as {
		a := &as[i]
		if !a.InSample {
			continue
		}
		c, j := int(l.head%RequestLogSize/logChunk), int(l.head%logChunk)
		if c == len(l.chunks) {
			l.chunks = append(l.chunks, make([]logRec, logChunk))
		}
		id := uint32(maphash.Bytes(l.seed, a.Peer[:]))
		l.chunks[c][j] = logRec{
			w0: uint64(a.MS)<<20 | uint64(a.Group)<<12 | uint64(a.Reason&0xf)<<8 | uint64(a.PeerShift),
			w1: uint64(a.Tag)<<32 | uint64(id),
		}
		l.head++
	}
}

// RequestLogMaxBytes is the memory the log's records hold when it is full.
const RequestLogMaxBytes = RequestLogSize * int64(unsafe.Sizeof(logRec{}))

// Bytes returns the memory the log's records hold now: it grows a chunk at
// a time as the log fills, up to RequestLogMaxBytes, and never shrinks.
func (l *RequestLog) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return int64(len(l.chunks)) * logChunk * int64(unsafe.Sizeof(logRec{}))
}

// Len returns how many requests the log holds.
func (l *RequestLog) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return int(min(l.head, RequestLogSize))
}

// at returns record i (an index < head, ≥ head − RequestLogSize). The
// read lock must be held.
func (l *RequestLog) at(i uint64) *logRec {
	return &l.chunks[i%RequestLogSize/logChunk][i%logChunk]
}

// replayRec is a logged request as a replay reads it.
type replayRec struct {
	ms     int64
	id     uint64
	reason limiter.Reason
}

// collect returns the requests of group g at or after since, in the order
// they were logged, the strictest sample shift among them (older records
// of a looser sample are kept only if the stricter sample holds them too),
// whether the log had overwritten requests after since (it then covers
// less than asked), and then the time of its oldest record (ms).
func (l *RequestLog) collect(g limiter.GroupID, since int64, into []replayRec) ([]replayRec, uint8, bool, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	first := l.head - min(l.head, RequestLogSize)
	// Records are logged in drain order, a fraction of a second apart at
	// most: find the first at or after since (a little earlier is fine,
	// the filter below drops those) by binary search.
	lo, hi := first, l.head
	for lo < hi {
		m := lo + (hi-lo)/2
		if l.at(m).ms() < since-time.Second.Milliseconds() {
			lo = m + 1
		} else {
			hi = m
		}
	}
	truncated := first > 0 && lo == first
	var oldest int64
	if truncated {
		oldest = l.at(first).ms()
	}
	var shift uint8
	start := len(into)
	into = slices.Grow(into, int(l.head-lo))
	for i := lo; i < l.head; i++ {
		r := l.at(i)
		if r.group() != g || r.ms() < since {
			continue
		}
		shift = max(shift, r.shift())
		into = append(into, replayRec{ms: r.ms(), id: r.w1, reason: r.reason()})
	}
	if shift > 0 {
		// Keep the (peer, group)s the strictest sample holds.
		kept := into[:start]
		for _, r := range into[start:] {
			if uint32(r.id>>32)>>(32-shift) == 0 {
				kept = append(kept, r)
			}
		}
		into = kept
	}
	return into, shift, truncated, oldest
}
