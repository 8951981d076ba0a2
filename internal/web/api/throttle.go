package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
)

// Throttle serves the outbound throttle (docs/throttle.md) over HTTP: POST
// /api/v1/throttle blocks until the call may go, GET answers at once,
// POST /api/v1/throttle/observe reports a reply to the adaptive mode. The caller mounts HandleWait,
// HandleCheck and HandleObserve behind a token of scope data. A Throttle
// is safe for concurrent use and runs nothing in the background. Each waiting call owns one timer
// and is evaluated once per retry interval, on a fixed schedule (see
// sleeper), never more often.
type Throttle struct {
	t     *throttle.Throttle
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	closed context.Context // done once Close was called
	close  context.CancelFunc
	epoch  time.Time // origin of the waiters' retry grid (see sleeper)
	// realNow is true when now is time.Now: the waiting loop's clock
	// readings then serve the timers' schedule too.
	realNow bool
}

// NewThrottle returns the API of t. now is the clock (nil:
// time.Now). sleep waits d or until ctx ends, returning ctx.Err() then; nil
// means a real timer, one per waiting call, reused between its retries.
// Tests inject both to run the waiting loop on a fake timeline.
func NewThrottle(t *throttle.Throttle, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Throttle {
	a := &Throttle{t: t, now: now, sleep: sleep, epoch: time.Now(), realNow: now == nil}
	if now == nil {
		a.now = time.Now
	}
	a.closed, a.close = context.WithCancel(context.Background())
	return a
}

// Close ends every wait in progress, and every later one at once, with
// 503 {"error":"throttle_unavailable"}, so that a graceful shutdown is not
// held up by callers waiting on a throttled peer. The Go client takes that
// answer as "limiterd is not running" and lets its caller go. Close is
// idempotent.
func (a *Throttle) Close() { a.close() }

// throttleWaitRequest is the body of POST /api/v1/throttle.
type throttleWaitRequest struct {
	Peer string `json:"peer"`
	Path string `json:"path"`
	// Timeout bounds the wait (a Go duration, "5s"); "" waits until
	// admitted or the client goes away.
	Timeout string `json:"timeout,omitempty"`
}

// throttleWaitResponse is the answer of POST /api/v1/throttle: 200 when
// the call may go, 408 (Error "throttle_timeout") when the timeout passed
// first.
type throttleWaitResponse struct {
	Error    string `json:"error,omitempty"`
	WaitedMS int64  `json:"waited_ms"`
	Type     string `json:"type"`
	Exempt   bool   `json:"exempt"`
	Off      bool   `json:"off,omitempty"`
	// Outcome is the adaptive mode's (throttle.Outcome…, or "gave_up"
	// after throttle.AdaptiveMaxWait).
	Outcome string `json:"outcome,omitempty"`
}

// throttleCheckResponse is the answer of GET /api/v1/throttle.
type throttleCheckResponse struct {
	// Outcome is the adaptive mode's (throttle.Outcome…).
	Outcome   string `json:"outcome,omitempty"`
	WouldWait bool   `json:"would_wait"`
	WaitMS    int64  `json:"wait_ms"`
	Type      string `json:"type"`
	Capacity  int    `json:"capacity"`
	Count     int    `json:"count"`
	Exempt    bool   `json:"exempt"`
	Off       bool   `json:"off,omitempty"`
}

// HandleWait serves POST /api/v1/throttle {"peer","path","timeout"}: it
// answers 200 {"waited_ms","type","exempt"} once the call may go. An
// exempt peer or path, or the throttle being off when the call arrives,
// answers at once. Otherwise the call waits, evaluated again every retry
// interval (switching the throttle off does not release it), until it is
// admitted; 408 {"error":"throttle_timeout"} when its timeout passes first;
// if the client goes away the wait just ends. A bad body is 400, a bad or
// missing field 422 naming it.
func (a *Throttle) HandleWait(w http.ResponseWriter, r *http.Request) {
	var req throttleWaitRequest
	err := jsonbody.Decode(r, &req)
	if err == nil {
		err = checkThrottleArgs(req.Peer, req.Path)
	}
	var timeout time.Duration
	if err == nil && req.Timeout != "" {
		timeout, err = time.ParseDuration(req.Timeout)
		if err != nil || timeout <= 0 {
			err = &limiter.FieldError{Field: "timeout", Problem: fmt.Sprintf("%q is not a positive duration such as \"5s\"", req.Timeout)}
		}
	}
	if err != nil {
		jsonbody.Fail(w, err)
		return
	}
	if a.closed.Err() != nil {
		jsonbody.WriteError(w, http.StatusServiceUnavailable, "throttle_unavailable", "")
		return
	}
	if a.t.Mode() == throttle.ModeAdaptive {
		a.waitAdaptive(w, r, req, timeout)
		return
	}

	start := a.now()
	res := a.t.Try(start, req.Peer, req.Path)
	if res.Admitted {
		jsonbody.Write(w, http.StatusOK, throttleWaitResponse{Type: res.Type, Exempt: res.Exempt, Off: res.Off})
		return
	}

	// The wait may outlast the admin listener's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.closed, cancel)()
	typ := res.Type
	a.t.AddWaiter(req.Peer, typ, 1)
	defer a.t.AddWaiter(req.Peer, typ, -1)

	var deadline time.Time
	if timeout > 0 {
		deadline = start.Add(timeout)
	}
	sl := a.newSleeper(ctx)
	defer sl.stop()
	for now := start; ; {
		wait, last := res.RetryIn, false
		if !deadline.IsZero() {
			if left := deadline.Sub(now); left < wait {
				wait, last = max(left, 0), true
			}
		}
		var err error
		if last {
			err = sl.sleep(wait)
		} else {
			err = sl.retry(now, wait)
		}
		if err != nil {
			if a.closed.Err() != nil {
				jsonbody.WriteError(w, http.StatusServiceUnavailable, "throttle_unavailable", "")
				return
			}
			// The client went away: nobody reads an answer.
			jsonbody.WriteError(w, http.StatusServiceUnavailable, "throttle_canceled", "")
			return
		}
		now = a.now()
		if last {
			jsonbody.Write(w, http.StatusRequestTimeout, throttleWaitResponse{
				Error: "throttle_timeout", WaitedMS: now.Sub(start).Milliseconds(), Type: typ,
			})
			return
		}
		res = a.t.Retry(now, req.Peer, req.Path)
		if res.Admitted {
			jsonbody.Write(w, http.StatusOK, throttleWaitResponse{WaitedMS: now.Sub(start).Milliseconds(), Type: res.Type})
			return
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			jsonbody.Write(w, http.StatusRequestTimeout, throttleWaitResponse{
				Error: "throttle_timeout", WaitedMS: now.Sub(start).Milliseconds(), Type: typ,
			})
			return
		}
	}
}

// HandleCheck serves GET /api/v1/throttle?peer=&path=: whether a call now
// would wait and for how long at least (until enough timestamps leave the
// window; 0 when it would go at once), its type, the type's capacity and
// the key's count in the window. It records nothing. A missing or unknown
// parameter is 422 naming it.
func (a *Throttle) HandleCheck(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		err = fmt.Errorf("%w: the query string: %v", jsonbody.ErrBadBody, err)
	}
	if err == nil {
		for k := range q {
			if k != "peer" && k != "path" {
				err = &limiter.FieldError{Field: k, Problem: "unknown parameter"}
				break
			}
		}
	}
	if err == nil {
		err = checkThrottleArgs(q.Get("peer"), q.Get("path"))
	}
	if err != nil {
		jsonbody.Fail(w, err)
		return
	}
	if a.t.Mode() == throttle.ModeAdaptive {
		res := a.t.PeekAdaptive(a.now(), q.Get("peer"), q.Get("path"))
		jsonbody.Write(w, http.StatusOK, throttleCheckResponse{WouldWait: !res.Admitted, WaitMS: ceilMillis(res.WaitIn),
			Type: res.Group, Exempt: res.Outcome == throttle.OutcomeExempt, Off: res.Outcome == throttle.OutcomeOff, Outcome: res.Outcome})
		return
	}
	res := a.t.Peek(a.now(), q.Get("peer"), q.Get("path"))
	jsonbody.Write(w, http.StatusOK, throttleCheckResponse{
		WouldWait: !res.Admitted,
		WaitMS:    ceilMillis(res.EarliestIn),
		Type:      res.Type,
		Capacity:  res.Capacity,
		Count:     res.Count,
		Exempt:    res.Exempt,
		Off:       res.Off,
	})
}

func checkThrottleArgs(peer, path string) error {
	switch {
	case peer == "":
		return &limiter.FieldError{Field: "peer", Problem: "required"}
	case path == "":
		return &limiter.FieldError{Field: "path", Problem: "required"}
	}
	return nil
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// sleeper waits between the evaluations of one call: the injected sleep,
// or one real timer reused for every retry. It ends its waits when ctx
// ends; stop releases it.
//
// The real retries run on a fixed schedule, RetryIn apart, whose phase is
// rounded up to a grid shared by every waiter of the Throttle (a
// twentieth of the interval, at most 50 ms): the first retry comes up to one
// grid step late, the later ones exactly one interval after the previous
// scheduled one. Waiters thus wake in batches rather than one by one. A
// wait blocks on the timer's channel alone: the end of ctx fires the timer
// at once, which is cheaper than a select on both for every retry.
type sleeper struct {
	ctx     context.Context
	fn      func(ctx context.Context, d time.Duration) error
	realNow bool      // the now given to retry is time.Now's
	epoch   time.Time // the grid's origin
	timer   *time.Timer
	stopf   func() bool // unregisters the ctx hook
	next    time.Time   // the last scheduled wake-up; zero before the first
}

func (a *Throttle) newSleeper(ctx context.Context) *sleeper {
	s := &sleeper{ctx: ctx, fn: a.sleep, epoch: a.epoch, realNow: a.realNow}
	if s.fn == nil {
		s.timer = time.NewTimer(time.Hour)
		s.timer.Stop()
		s.stopf = context.AfterFunc(ctx, func() { s.timer.Reset(0) })
	}
	return s
}

// retry waits one retry interval d on the waiter's schedule; now is the
// time of the evaluation just made (the Throttle's clock).
func (s *sleeper) retry(now time.Time, d time.Duration) error {
	if s.fn != nil {
		return s.fn(s.ctx, d)
	}
	if !s.realNow {
		now = time.Now()
	}
	target := s.next.Add(d)
	if s.next.IsZero() || target.Before(now) {
		// First retry, or more than an interval late: a new phase.
		target = now.Add(d)
		if g := min(d/20, 50*time.Millisecond); g > 0 {
			off := target.Sub(s.epoch)
			target = s.epoch.Add((off + g - 1) / g * g)
		}
	}
	s.next = target
	return s.wait(target.Sub(now))
}

// sleep waits d, off the schedule (the rest of a timeout).
func (s *sleeper) sleep(d time.Duration) error {
	if s.fn != nil {
		return s.fn(s.ctx, d)
	}
	return s.wait(d)
}

func (s *sleeper) wait(d time.Duration) error {
	s.timer.Reset(d)
	// The hook resets the timer to 0 after ctx.Err() is set: if it ran
	// before the Reset above, this check sees the error.
	if err := s.ctx.Err(); err != nil {
		return err
	}
	<-s.timer.C
	return s.ctx.Err()
}

func (s *sleeper) stop() {
	if s.timer != nil {
		s.stopf()
		s.timer.Stop()
	}
}
