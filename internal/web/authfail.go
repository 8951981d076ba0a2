package web

import (
	"sync"
	"time"
)

// Failed logins (a wrong token in the login form) allowed per client IP per
// authWindow before 429.
const (
	authFailures = 5
	authWindow   = time.Minute
	// maxAuthClients bounds the failure counters.
	maxAuthClients = 10000
)

// authFails counts failed logins per client IP in fixed windows: failed
// logins are themselves rate limited (docs/api.md, "Authentication and
// scopes"). It blocks the login form only: bearer tokens are for machines,
// whose address a block would take from the data plane too (decision 22).
// Safe for concurrent use.
type authFails struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*failCounter
}

// failCounter counts one client's failures in a fixed window.
type failCounter struct {
	start time.Time
	n     int
}

func newAuthFails(now func() time.Time) *authFails {
	return &authFails{now: now, m: map[string]*failCounter{}}
}

// blocked reports whether ip used up its failures.
func (f *authFails) blocked(ip string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[ip]
	return ok && f.now().Sub(c.start) < authWindow && c.n >= authFailures
}

// failed counts a failure of ip.
func (f *authFails) failed(ip string) {
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
}
