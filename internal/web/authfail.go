package web

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Failed authentication (a wrong token in the login form, or a wrong
// bearer token) is slowed per client address: the first authFailures in
// an authWindow are answered at once, every further one after a delay that
// doubles from authDelay up to maxAuthDelay. A right token is never
// delayed nor refused, so operators who share an address (an SSH tunnel,
// a reverse proxy, a NAT) are never locked out by someone else's mistakes
// (decision 192).
const (
	authFailures = 5
	authWindow   = time.Minute
	authDelay    = 250 * time.Millisecond
	maxAuthDelay = 4 * time.Second
	// maxAuthClients bounds the failure counters.
	maxAuthClients = 10000
)

// authFails counts failed authentications per client IP in fixed windows
// and says how long to wait before answering the next one. Safe for
// concurrent use.
type authFails struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*failCounter

	// Counters for the metrics: failures of the login form and of bearer
	// tokens, and the failures answered after a delay.
	login, bearer, delayed atomic.Uint64
}

// failCounter counts one client's failures in a fixed window.
type failCounter struct {
	start time.Time
	n     int
}

func newAuthFails(now func() time.Time) *authFails {
	return &authFails{now: now, m: map[string]*failCounter{}}
}

// failed counts a failure of ip (of the login form, or of a bearer token)
// and returns how long to wait before answering it: 0 for the first
// authFailures in the window.
func (f *authFails) failed(ip string, bearer bool) time.Duration {
	if bearer {
		f.bearer.Add(1)
	} else {
		f.login.Add(1)
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[ip]
	if !ok || now.Sub(c.start) >= authWindow {
		if len(f.m) >= maxAuthClients {
			for k, v := range f.m {
				if now.Sub(v.start) >= authWindow {
					delete(f.m, k)
				}
			}
			if len(f.m) >= maxAuthClients {
				// Still full: every entry is recent. Forget them all
				// rather than grow without bound.
				clear(f.m)
			}
		}
		c = &failCounter{start: now}
		f.m[ip] = c
	}
	c.n++
	over := c.n - authFailures
	if over <= 0 {
		return 0
	}
	f.delayed.Add(1)
	return min(maxAuthDelay, authDelay<<min(over-1, 16))
}

// sleep waits d on a timer, or until ctx ends (the client went away).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// wait delays the answer to a wrong token by d (Options.Sleep).
func (s *Server) wait(ctx context.Context, d time.Duration) {
	if d > 0 {
		_ = s.sleep(ctx, d)
	}
}
