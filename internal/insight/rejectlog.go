package insight

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// RejectLogMode says which refusals a RejectLog writes ([log].rejections).
type RejectLogMode int32

// The modes of a RejectLog.
const (
	// RejectLogOff writes no refusal (upstream errors still, sampled).
	RejectLogOff RejectLogMode = iota
	// RejectLogSampled writes at most one line per (peer, group) per
	// period, with the counts since the last line.
	RejectLogSampled
	// RejectLogAll writes one line per refusal.
	RejectLogAll
)

// ParseRejectLogMode reads [log].rejections: "off", "sampled" or "all".
func ParseRejectLogMode(s string) (RejectLogMode, bool) {
	switch s {
	case "off":
		return RejectLogOff, true
	case "sampled":
		return RejectLogSampled, true
	case "all":
		return RejectLogAll, true
	}
	return 0, false
}

// Defaults of a RejectLog.
const (
	// DefaultRejectLogPeriod is the sampling period: one line per peer
	// and group a minute.
	DefaultRejectLogPeriod = time.Minute
	// DefaultRejectLogKeys bounds the (peer, group) pairs a sampled
	// RejectLog remembers; refusals of pairs beyond it are counted
	// together and logged as one line a period.
	DefaultRejectLogKeys = 16384
)

// The kinds of refusal a RejectLog counts, indexes into rejCounts.
const (
	kindRateLimit = iota
	kindConcurrency
	kindDenied
	nKinds
)

const rejShards = 16

// rejKey is one sampled (peer, group): comparable and flat, so that a
// lookup allocates nothing.
type rejKey struct {
	peer  peer.Key
	group limiter.GroupID
}

// rejEntry is what a sampled pair has been refused since its last line.
type rejEntry struct {
	last   int64 // unix ns of the last line
	counts [nKinds]uint32
}

type rejShard struct {
	mu sync.Mutex
	m  map[rejKey]*rejEntry
	_  [40]byte // keep shards' locks on their own cache lines
}

// upstreamSample is the sampling state of one kind of upstream error.
type upstreamSample struct {
	mu    sync.Mutex
	last  int64
	count uint64
	// err is the newest error and errAt when (unix ns), for the
	// dashboard's health (LastUpstreamError).
	err   error
	errAt int64
}

// RejectLogOptions configure a RejectLog; the zero value takes the
// defaults.
type RejectLogOptions struct {
	// Mode is the initial mode; SetMode changes it.
	Mode RejectLogMode
	// Period is the sampling period; 0 means DefaultRejectLogPeriod.
	Period time.Duration
	// MaxKeys bounds the pairs remembered; 0 means DefaultRejectLogKeys.
	MaxKeys int
	// GroupName names a group ID in the lines; nil writes the ID.
	GroupName func(limiter.GroupID) string
	// Now is the clock of Run's flushes; nil means time.Now.
	Now func() time.Time
}

// RejectLog writes the data plane's refusals — 429s by reason and the
// deny list's 403s — and the upstream's failures to a structured log, as
// [log].rejections says (docs/operations.md, "6. Logs"). Sampled, a (peer,
// group) gets at most one line a period: its first refusal at once, then, a
// period after its last line, one line with the counts since (at its next
// refusal, or from Run's flush if it stopped). The pairs it remembers are
// bounded (MaxKeys); past the bound, refusals are counted together. Upstream
// errors are always sampled, one warning per kind a period with the count and
// the last error. On the request path a sampled refusal is a map lookup under
// one of 16 locks and no allocation (but the line it may write). A nil
// *RejectLog does nothing. It is safe for concurrent use; Run owns its
// flushing.
type RejectLog struct {
	log      *slog.Logger
	mode     atomic.Int32
	period   int64
	maxShard int
	name     func(limiter.GroupID) string
	now      func() time.Time

	shards [rejShards]rejShard
	// overflow counts refusals of pairs the table had no room for.
	overflow atomic.Uint64
	upstream [2]upstreamSample // unreachable, timeout
}

// NewRejectLog returns a RejectLog writing to log.
func NewRejectLog(log *slog.Logger, opts RejectLogOptions) *RejectLog {
	l := &RejectLog{log: log, name: opts.GroupName, now: opts.Now, period: int64(opts.Period)}
	if l.period <= 0 {
		l.period = int64(DefaultRejectLogPeriod)
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultRejectLogKeys
	}
	l.maxShard = max(1, opts.MaxKeys/rejShards)
	if l.now == nil {
		l.now = time.Now
	}
	for i := range l.shards {
		l.shards[i].m = map[rejKey]*rejEntry{}
	}
	l.SetMode(opts.Mode)
	return l
}

// SetMode changes the mode (a SIGHUP reload of [log].rejections).
func (l *RejectLog) SetMode(m RejectLogMode) {
	if l != nil {
		l.mode.Store(int32(m))
	}
}

// Rejected records a 429 of peer in group for reason (concurrency or
// rate_limit) at now.
func (l *RejectLog) Rejected(now time.Time, peer peer.Key, group limiter.GroupID, reason limiter.Reason) {
	kind := kindRateLimit
	if reason == limiter.ReasonConcurrency {
		kind = kindConcurrency
	}
	l.refused(now, peer, group, kind)
}

// Observe records o when it is a refusal: a 429 (concurrency or
// rate_limit) or a 403 of a denied peer; a dry_run group's would-be
// rejection is admitted, and not recorded (limiter.Observer).
func (l *RejectLog) Observe(o *limiter.Observation) {
	if o.Allowed || l == nil {
		return
	}
	switch o.Reason {
	case limiter.ReasonDenied:
		l.refused(time.UnixMilli(o.MS), o.Peer, o.Group, kindDenied)
	case limiter.ReasonConcurrency, limiter.ReasonRateLimit:
		l.Rejected(time.UnixMilli(o.MS), o.Peer, o.Group, o.Reason)
	}
}

// Denied records a 403 of peer (on the deny list) in group at now.
func (l *RejectLog) Denied(now time.Time, peer peer.Key, group limiter.GroupID) {
	l.refused(now, peer, group, kindDenied)
}

func (l *RejectLog) refused(now time.Time, peer peer.Key, group limiter.GroupID, kind int) {
	if l == nil {
		return
	}
	switch RejectLogMode(l.mode.Load()) {
	case RejectLogOff:
		return
	case RejectLogAll:
		var c [nKinds]uint32
		c[kind] = 1
		l.line(peer, group, c, 0)
		return
	}
	k := rejKey{peer: peer, group: group}
	sh := &l.shards[shardOf(&peer)]
	t := now.UnixNano()
	sh.mu.Lock()
	e, ok := sh.m[k]
	if !ok {
		if len(sh.m) >= l.maxShard {
			sh.mu.Unlock()
			l.overflow.Add(1)
			return
		}
		sh.m[k] = &rejEntry{last: t}
		sh.mu.Unlock()
		var c [nKinds]uint32
		c[kind] = 1
		l.line(peer, group, c, 0)
		return
	}
	e.counts[kind]++
	if t-e.last < l.period {
		sh.mu.Unlock()
		return
	}
	c, since := e.counts, time.Duration(t-e.last)
	e.counts, e.last = [nKinds]uint32{}, t
	sh.mu.Unlock()
	l.line(peer, group, c, since)
}

// shardOf spreads peers over the shards by their key's last bytes (the
// address's low bits).
func shardOf(p *peer.Key) int {
	return int(p[len(p)-1]^p[len(p)-2]^p[4]) % rejShards
}

// line writes one refusal line: the peer, the group, the counts by kind
// and, for a sampled line after the first, the time they cover.
func (l *RejectLog) line(peer peer.Key, group limiter.GroupID, c [nKinds]uint32, since time.Duration) {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("peer", peer.String()), slog.String("group", l.groupName(group)))
	if c[kindRateLimit] > 0 {
		attrs = append(attrs, slog.Uint64("rate_limit", uint64(c[kindRateLimit])))
	}
	if c[kindConcurrency] > 0 {
		attrs = append(attrs, slog.Uint64("concurrency", uint64(c[kindConcurrency])))
	}
	if c[kindDenied] > 0 {
		attrs = append(attrs, slog.Uint64("denied", uint64(c[kindDenied])))
	}
	if since > 0 {
		attrs = append(attrs, slog.Duration("over", since.Round(time.Second)))
	}
	msg := "rejected"
	if c[kindRateLimit] == 0 && c[kindConcurrency] == 0 {
		msg = "denied"
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
}

func (l *RejectLog) groupName(g limiter.GroupID) string {
	if g == limiter.ExemptPathGroup {
		return "exempt_path"
	}
	if l.name != nil {
		if n := l.name(g); n != "" {
			return n
		}
	}
	return "group#" + strconv.Itoa(int(g))
}

// UpstreamError records a failed upstream exchange: timeout true for a
// timeout (504), else unreachable (502). One warning per kind a period,
// whatever the mode, with the count since the last and this error.
func (l *RejectLog) UpstreamError(now time.Time, timeout bool, err error) {
	if l == nil {
		return
	}
	i, kind := 0, "unreachable"
	if timeout {
		i, kind = 1, "timeout"
	}
	u := &l.upstream[i]
	t := now.UnixNano()
	u.mu.Lock()
	u.count++
	u.err, u.errAt = err, t
	if u.last != 0 && t-u.last < l.period {
		u.mu.Unlock()
		return
	}
	n, since := u.count, time.Duration(t-u.last)
	first := u.last == 0
	u.count, u.last = 0, t
	u.mu.Unlock()
	attrs := []any{"kind", kind, "count", n}
	if !first {
		attrs = append(attrs, "over", since.Round(time.Second))
	}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	l.log.Warn("upstream error", attrs...)
}

// UpstreamFailure is a failed upstream exchange.
type UpstreamFailure struct {
	At time.Time
	// Timeout is true for a timeout (504), false for an unreachable or
	// broken node (502).
	Timeout bool
	Err     string
}

// LastUpstreamError returns the newest upstream error UpstreamError was
// told of, whatever the mode; ok is false before the first.
func (l *RejectLog) LastUpstreamError() (f UpstreamFailure, ok bool) {
	if l == nil {
		return f, false
	}
	for i := range l.upstream {
		u := &l.upstream[i]
		u.mu.Lock()
		at, err := u.errAt, u.err
		u.mu.Unlock()
		if at == 0 || at <= f.At.UnixNano() && ok {
			continue
		}
		f, ok = UpstreamFailure{At: time.Unix(0, at), Timeout: i == 1}, true
		if err != nil {
			f.Err = err.Error()
		}
	}
	return f, ok
}

// Flush writes the counts a period old that no later refusal has written
// yet, forgets the pairs refused no more for a period, writes the
// overflow count, and the upstream errors counted since their last line.
func (l *RejectLog) Flush(now time.Time) {
	if l == nil {
		return
	}
	t := now.UnixNano()
	type due struct {
		k     rejKey
		c     [nKinds]uint32
		since time.Duration
	}
	var lines []due
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if t-e.last < l.period {
				continue
			}
			if e.counts == ([nKinds]uint32{}) {
				delete(sh.m, k)
				continue
			}
			lines = append(lines, due{k, e.counts, time.Duration(t - e.last)})
			e.counts, e.last = [nKinds]uint32{}, t
		}
		sh.mu.Unlock()
	}
	for _, d := range lines {
		l.line(d.k.peer, d.k.group, d.c, d.since)
	}
	if n := l.overflow.Swap(0); n > 0 {
		l.log.Info("rejected (peers beyond the log's table, not logged one by one)", "count", n)
	}
	for i := range l.upstream {
		u := &l.upstream[i]
		u.mu.Lock()
		n, since := u.count, time.Duration(t-u.last)
		if n == 0 || t-u.last < l.period {
			u.mu.Unlock()
			continue
		}
		u.count, u.last = 0, t
		u.mu.Unlock()
		kind := "unreachable"
		if i == 1 {
			kind = "timeout"
		}
		l.log.Warn("upstream error", "kind", kind, "count", n, "over", since.Round(time.Second))
	}
}

// Tracked returns how many (peer, group) pairs the sampler remembers.
func (l *RejectLog) Tracked() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].m)
		l.shards[i].mu.Unlock()
	}
	return n
}

// Run flushes every tenth of the period until ctx ends.
func (l *RejectLog) Run(ctx context.Context) {
	if l == nil {
		return
	}
	ticker.Every(ctx, time.Duration(l.period/10), func() { l.Flush(l.now()) })
}
