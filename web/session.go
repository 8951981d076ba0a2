package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The dashboard's session cookie and its lifetime.
const (
	sessionCookie = "limiterd_session"
	sessionTTL    = 12 * time.Hour
	// maxSessions bounds the session map; the oldest is dropped beyond it.
	maxSessions = 1000
)

// Failed logins allowed per client IP per loginWindow before 429.
const (
	loginFailures = 5
	loginWindow   = time.Minute
	// maxLoginClients bounds the failed-login counters.
	maxLoginClients = 10000
)

// session is one logged-in browser.
type session struct {
	csrf    string
	actor   string
	expires time.Time
}

// sessions keeps the dashboard's logins in memory (a restart logs everyone
// out) and counts failed logins per client IP. It is safe for concurrent
// use; expired entries are dropped when it is next touched, so it owns no
// goroutine.
type sessions struct {
	mu       sync.Mutex
	now      func() time.Time
	byID     map[string]*session
	failures map[string]*loginCounter
}

// loginCounter counts one client's failed logins in a fixed window.
type loginCounter struct {
	start time.Time
	n     int
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, byID: map[string]*session{}, failures: map[string]*loginCounter{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// actorOf is the audit actor of a session: "session:" and the first 8 hex
// digits of the SHA-256 of its id (the id itself is a secret).
func actorOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "session:" + hex.EncodeToString(sum[:])[:8]
}

// create starts a session and returns its id.
func (s *sessions) create() (string, *session) {
	id := randomHex(32)
	now := s.now()
	ss := &session{csrf: randomHex(32), actor: actorOf(id), expires: now.Add(sessionTTL)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if len(s.byID) >= maxSessions {
		var oldest string
		for k, v := range s.byID {
			if oldest == "" || v.expires.Before(s.byID[oldest].expires) {
				oldest = k
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[id] = ss
	return id, ss
}

func (s *sessions) sweepLocked(now time.Time) {
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
}

// get returns the live session with id.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	if !s.now().Before(ss.expires) {
		delete(s.byID, id)
		return nil, false
	}
	return ss, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// loginBlocked reports whether ip used up its failed logins.
func (s *sessions) loginBlocked(ip string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.failures[ip]
	return ok && s.now().Sub(c.start) < loginWindow && c.n >= loginFailures
}

// loginFailed counts a failed login of ip.
func (s *sessions) loginFailed(ip string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.failures[ip]
	if !ok || now.Sub(c.start) >= loginWindow {
		if len(s.failures) >= maxLoginClients {
			for k, v := range s.failures {
				if now.Sub(v.start) >= loginWindow {
					delete(s.failures, k)
				}
			}
			if len(s.failures) >= maxLoginClients {
				// Still full: every entry is recent. Forget them all
				// rather than grow without bound.
				clear(s.failures)
			}
		}
		c = &loginCounter{start: now}
		s.failures[ip] = c
	}
	c.n++
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tokenOK reports whether got is the admin token, in constant time.
func tokenOK(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}

// securityHeaders sets the headers every dashboard response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}
