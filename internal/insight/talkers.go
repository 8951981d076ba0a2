package insight

import (
	"cmp"
	"sync"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Sizes of the top talkers' record.
const (
	// TalkersWindow is the stretch the top talkers cover.
	TalkersWindow = 5 * time.Minute
	// TalkersBucket is the stretch one bucket of counts covers.
	TalkersBucket  = 10 * time.Second
	talkersBuckets = int(TalkersWindow / TalkersBucket)
	// talkersKeep is how many (peer, group)s a closed bucket keeps by
	// requests, and as many by rejections.
	talkersKeep = 256
	// talkersOpen bounds the (peer, group)s the current bucket counts;
	// beyond, new ones are counted in Untracked only.
	talkersOpen = 50000
)

type talkerKey struct {
	peer  peer.Key
	group limiter.GroupID
}

// Talker is one (peer, group)'s traffic over the last minutes.
type Talker struct {
	Peer  peer.Key
	Group limiter.GroupID
	// Requests and Rejected are counts over Seconds (estimates when the
	// limiter samples its decisions: a recorded one stands for 2^n).
	Requests, Rejected uint64
	Seconds            float64
}

// RequestRate returns Requests per second.
func (t Talker) RequestRate() float64 { return float64(t.Requests) / max(t.Seconds, 1) }

// RejectRate returns Rejected per second.
func (t Talker) RejectRate() float64 { return float64(t.Rejected) / max(t.Seconds, 1) }

type talkerCount struct{ requests, rejected uint64 }

type talkerBucket struct {
	at   int64 // bucket index (unix time / TalkersBucket)
	rows []talkerRow
}

type talkerRow struct {
	k talkerKey
	c talkerCount
}

// Talkers counts each (peer, group)'s requests and rejections over the
// last TalkersWindow, in buckets of TalkersBucket, from the limiter's
// sampled decisions (those with Arrival.Nth, each standing for
// 2^NthShift). A closed bucket keeps only its top talkersKeep (peer,
// group)s by requests and by rejections, so the top lists stay exact for
// heavy talkers and memory stays bounded. It is safe for concurrent use.
type Talkers struct {
	mu        sync.Mutex
	start     time.Time // when counting began
	cur       map[talkerKey]*talkerCount
	curAt     int64
	closed    []talkerBucket // oldest first, at most talkersBuckets
	untracked uint64
}

// NewTalkers returns Talkers counting from now.
func NewTalkers(now time.Time) *Talkers {
	return &Talkers{start: now, cur: map[talkerKey]*talkerCount{}, curAt: bucketOf(now)}
}

func bucketOf(t time.Time) int64 { return t.Unix() / int64(TalkersBucket/time.Second) }

// Add counts the sampled arrivals of as in the bucket of now.
func (t *Talkers) Add(now time.Time, as []Arrival) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.roll(bucketOf(now))
	for i := range as {
		a := &as[i]
		if !a.Nth {
			continue
		}
		w := uint64(1) << a.NthShift
		k := talkerKey{a.Peer, a.Group}
		c := t.cur[k]
		if c == nil {
			if len(t.cur) >= talkersOpen {
				t.untracked += w
				continue
			}
			c = &talkerCount{}
			t.cur[k] = c
		}
		c.requests += w
		if a.Reason != limiter.ReasonNone {
			c.rejected += w
		}
	}
}

// roll closes the current bucket when b is a later one. t.mu must be held.
func (t *Talkers) roll(b int64) {
	if b <= t.curAt {
		return
	}
	if len(t.cur) > 0 {
		t.closed = append(t.closed, talkerBucket{at: t.curAt, rows: keepTop(t.cur)})
	}
	for len(t.closed) > 0 && t.closed[0].at <= b-int64(talkersBuckets) {
		t.closed = t.closed[1:]
	}
	t.cur, t.curAt = map[talkerKey]*talkerCount{}, b
}

// keepTop returns the talkersKeep rows of m with the most requests and
// those with the most rejections.
func keepTop(m map[talkerKey]*talkerCount) []talkerRow {
	rows := make([]talkerRow, 0, len(m))
	for k, c := range m {
		rows = append(rows, talkerRow{k, *c})
	}
	if len(rows) <= 2*talkersKeep {
		return rows
	}
	byReq := NewTopK(talkersKeep, func(r *talkerRow) int64 { return int64(r.c.requests) }, rowTie)
	byRej := NewTopK(talkersKeep, func(r *talkerRow) int64 { return int64(r.c.rejected) }, rowTie)
	for i := range rows {
		byReq.Offer(&rows[i])
		byRej.Offer(&rows[i])
	}
	kept := map[talkerKey]bool{}
	var out []talkerRow
	for _, r := range append(byReq.Drain(), byRej.Drain()...) {
		if !kept[r.k] {
			kept[r.k] = true
			out = append(out, r)
		}
	}
	return out
}

func rowTie(a, b *talkerRow) int { return compareTalkerKeys(&a.k, &b.k) }

func compareTalkerKeys(a, b *talkerKey) int {
	if c := compareKeys(&a.peer, &b.peer); c != 0 {
		return c
	}
	return cmp.Compare(a.group, b.group)
}

// Talker orders.
const (
	ByRequests   = "requests"
	ByRejections = "rejections"
)

// TalkerSet is the talkers' counts over the window as of one moment.
type TalkerSet struct {
	m    map[talkerKey]talkerCount
	secs float64
}

// Snapshot sums the buckets of the last TalkersWindow as of now.
func (t *Talkers) Snapshot(now time.Time) TalkerSet {
	return t.over(now, talkersBuckets, min(now.Sub(t.start), TalkersWindow).Seconds())
}

// Recent sums the buckets that began in the last window before now: whole
// buckets of TalkersBucket, the current one included, so a window of 30 s
// holds 20 to 30 s of counts. The set's Seconds is exactly the stretch
// they cover (since counting began, when later), so that its rates are
// right. A window beyond TalkersWindow is TalkersWindow.
func (t *Talkers) Recent(now time.Time, window time.Duration) TalkerSet {
	n, secs := t.recent(now, window)
	return t.over(now, n, secs)
}

// RecentSeconds returns the seconds Recent(now, window) would cover,
// without summing anything.
func (t *Talkers) RecentSeconds(now time.Time, window time.Duration) float64 {
	_, secs := t.recent(now, window)
	return secs
}

// recent returns the buckets a window holds as of now and the seconds
// they cover.
func (t *Talkers) recent(now time.Time, window time.Duration) (int, float64) {
	n := max(1, min(int(window/TalkersBucket), talkersBuckets))
	from := time.Unix((bucketOf(now)-int64(n)+1)*int64(TalkersBucket/time.Second), 0)
	t.mu.Lock()
	start := t.start
	t.mu.Unlock()
	if start.After(from) {
		from = start
	}
	return n, max(now.Sub(from), 0).Seconds()
}

// over sums the last n buckets as of now into a set covering secs.
func (t *Talkers) over(now time.Time, n int, secs float64) TalkerSet {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := TalkerSet{m: map[talkerKey]talkerCount{}, secs: secs}
	add := func(k talkerKey, c talkerCount) {
		s := set.m[k]
		s.requests += c.requests
		s.rejected += c.rejected
		set.m[k] = s
	}
	b := bucketOf(now)
	for _, cb := range t.closed {
		if cb.at > b-int64(n) {
			for _, r := range cb.rows {
				add(r.k, r.c)
			}
		}
	}
	if t.curAt > b-int64(n) {
		for k, c := range t.cur {
			add(k, *c)
		}
	}
	return set
}

// Top returns the n (peer, group)s with the most requests (by ByRequests)
// or rejections (ByRejections, those with any), most first; group, when
// not 0, keeps that group's only. Seconds is the stretch covered: the
// window, or less since counting began.
func (s TalkerSet) Top(by string, n int, group limiter.GroupID) []Talker {
	key := func(c talkerCount) uint64 { return c.requests }
	if by == ByRejections {
		key = func(c talkerCount) uint64 { return c.rejected }
	}
	top := NewTopK(n, func(x *Talker) int64 { return int64(key(talkerCount{x.Requests, x.Rejected})) }, func(a, b *Talker) int {
		return compareTalkerKeys(&talkerKey{a.Peer, a.Group}, &talkerKey{b.Peer, b.Group})
	})
	for k, c := range s.m {
		if key(c) > 0 && (group == 0 || k.group == group) {
			top.Offer(&Talker{Peer: k.peer, Group: k.group, Requests: c.requests, Rejected: c.rejected, Seconds: s.secs})
		}
	}
	return top.Drain()
}

// Get returns one (peer, group)'s counts (zero when the record kept none).
func (s TalkerSet) Get(peer peer.Key, group limiter.GroupID) Talker {
	c := s.m[talkerKey{peer, group}]
	return Talker{Peer: peer, Group: group, Requests: c.requests, Rejected: c.rejected, Seconds: s.secs}
}

// Top is Snapshot(now).Top(by, n, group).
func (t *Talkers) Top(now time.Time, by string, n int, group limiter.GroupID) []Talker {
	return t.Snapshot(now).Top(by, n, group)
}

// Untracked returns the requests counted while the current bucket was
// full (attributed to no peer), since the start.
func (t *Talkers) Untracked() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.untracked
}

// Seconds returns the stretch the set covers.
func (s TalkerSet) Seconds() float64 { return s.secs }
