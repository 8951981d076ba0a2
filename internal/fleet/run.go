package fleet

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Publisher writes an instance's summary to a Board every Every, and
// measures its clock against the board's as it does. It is safe for
// concurrent use; Run owns its loop.
type Publisher struct {
	board Board
	id    string
	build func(now time.Time) Summary
	log   *slog.Logger
	now   func() time.Time

	mu     sync.Mutex // one write at a time
	offset atomic.Int64
	writes atomic.Uint64
	fails  atomic.Uint64
	bytes  atomic.Int64
	failed atomic.Bool
}

// NewPublisher returns the Publisher of instance id's summaries, made by
// build, to board; now is the clock (nil: time.Now).
func NewPublisher(board Board, id string, build func(now time.Time) Summary, log *slog.Logger, now func() time.Time) *Publisher {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{board: board, id: id, build: build, log: log, now: now}
}

// Run publishes at once, then every Every, until ctx ends. A failed write
// is logged once until one succeeds again, and retried at the next tick
// only: never more than one write per Every.
func (p *Publisher) Run(ctx context.Context) {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		p.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Publisher) tick(ctx context.Context) {
	err := p.Publish(ctx)
	switch {
	case err != nil && ctx.Err() == nil && !p.failed.Swap(true):
		p.log.Warn("fleet: this instance's summary could not be written to Redis (other instances' dashboards miss it until it can)", "err", err)
	case err == nil && p.failed.Swap(false):
		p.log.Info("fleet: this instance's summary is written again")
	}
}

// Publish writes one summary now, within Every.
func (p *Publisher) Publish(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.build(p.now())
	s.Instance = p.id
	s.ClockOffset = p.offset.Load()
	b, err := Encode(s)
	if err != nil {
		p.fails.Add(1)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, Every)
	defer cancel()
	t0 := time.Now()
	boardNow, err := p.board.Put(ctx, p.id, b)
	t1 := time.Now()
	if err != nil {
		p.fails.Add(1)
		return err
	}
	p.writes.Add(1)
	p.bytes.Store(int64(len(b)))
	if !boardNow.IsZero() {
		// The board's clock read halfway through the round trip.
		mid := t0.Add(t1.Sub(t0) / 2)
		local := p.now().Add(mid.Sub(t1))
		p.offset.Store(local.Sub(boardNow).Milliseconds())
	}
	return nil
}

// PublisherStats are a Publisher's counters.
type PublisherStats struct {
	// Writes and Failures count the writes made and those that failed;
	// Bytes is the size of the last summary written.
	Writes, Failures uint64
	Bytes            int64
	// ClockOffset is this instance's clock minus the board's, in ms, as
	// last measured.
	ClockOffset int64
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{Writes: p.writes.Load(), Failures: p.fails.Load(), Bytes: p.bytes.Load(), ClockOffset: p.offset.Load()}
}

// ClockOffset returns this instance's clock minus the board's, in ms, as
// last measured (0 before).
func (p *Publisher) ClockOffset() int64 { return p.offset.Load() }

// Reader reads the fleet from a Board for the pages: at most once per
// Every however many ask (the last read serves in between), each read
// within ReadTimeout. A summary it skips is logged (once an hour per
// instance and reason) and counted. It is safe for concurrent use.
type Reader struct {
	board Board
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	readAt   time.Time // by the local clock; zero before the first read
	boardNow time.Time
	others   []Summary
	skipped  []SkipNote
	more     int
	err      string
	logged   map[[2]string]time.Time

	counts [len(SkipReasons)]atomic.Uint64
}

// ReadTimeout bounds one read of the board.
const ReadTimeout = 500 * time.Millisecond

// NewReader returns a Reader of board; now is the clock (nil: time.Now).
func NewReader(board Board, log *slog.Logger, now func() time.Time) *Reader {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{board: board, log: log, now: now, logged: map[[2]string]time.Time{}}
}

// View returns the fleet with self, this instance's summary as of now,
// reading the board when the last read is Every old or more. A nil
// Reader returns self's view alone (not cluster mode).
func (r *Reader) View(ctx context.Context, self Summary) View {
	if r == nil {
		return NewView(self, nil, time.Time{}, false)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.readAt.IsZero() || now.Sub(r.readAt) >= Every || now.Before(r.readAt) {
		r.read(ctx, now)
	}
	// The board's clock now: as read, plus the time since by ours.
	boardNow := r.boardNow
	if !boardNow.IsZero() {
		boardNow = boardNow.Add(max(0, now.Sub(r.readAt)))
	}
	v := NewView(self, r.others, boardNow, true)
	v.ReadAt, v.Error, v.Skipped, v.More = r.readAt, r.err, slices.Clone(r.skipped), r.more
	return v
}

// read reads the board; r.mu is held.
func (r *Reader) read(ctx context.Context, now time.Time) {
	r.readAt = now
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	boardNow, raw, more, err := r.board.List(ctx)
	if err != nil {
		// The last summaries read stay, aging.
		r.err = err.Error()
		return
	}
	r.err, r.boardNow, r.more = "", boardNow, more
	r.others, r.skipped = r.others[:0], r.skipped[:0]
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s, err := Decode(id, raw[id], boardNow)
		var sk *Skipped
		if errors.As(err, &sk) {
			r.skip(now, id, sk)
			continue
		}
		r.others = append(r.others, s)
	}
	for k, at := range r.logged {
		if now.Sub(at) > time.Hour {
			delete(r.logged, k)
		}
	}
}

// skip counts and, once an hour per instance and reason, logs a skipped
// summary; r.mu is held.
func (r *Reader) skip(now time.Time, id string, sk *Skipped) {
	id = clip(id, 64)
	r.skipped = append(r.skipped, SkipNote{Instance: id, Skipped: *sk})
	if i := slices.Index(SkipReasons[:], sk.Reason); i >= 0 {
		r.counts[i].Add(1)
	}
	k := [2]string{id, sk.Reason}
	if at, ok := r.logged[k]; ok && now.Sub(at) < time.Hour {
		return
	}
	r.logged[k] = now
	r.log.Warn("fleet: an instance's summary in Redis was skipped (another version of limiterd, or not a summary)",
		"instance", id, "reason", sk.Reason, "detail", sk.Detail)
}

// SkippedCounts returns the summaries skipped since the start, by reason
// (every reason of SkipReasons present).
func (r *Reader) SkippedCounts() map[string]uint64 {
	out := make(map[string]uint64, len(SkipReasons))
	for i, reason := range SkipReasons {
		if r != nil {
			out[reason] = r.counts[i].Load()
		} else {
			out[reason] = 0
		}
	}
	return out
}
