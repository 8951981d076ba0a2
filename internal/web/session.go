package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"log/slog"
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
	// maxSessions bounds the session map, maxSessionsPerToken the sessions
	// one token opened: beyond either, the oldest session of the same
	// token goes, so that the holder of one token (a read token) cannot
	// log another's sessions out by opening many (decision 192).
	maxSessions         = 1000
	maxSessionsPerToken = 100
)

// session is one logged-in browser.
type session struct {
	csrf    string
	actor   string
	expires time.Time
	// token is the fingerprint of the token the browser logged in with: a
	// session lasts only while that token does (a rotated or removed
	// token ends its sessions), with the token's scope of the moment.
	token string
}

// SessionStore keeps the dashboard's sessions across restarts. Keys are the
// SHA-256 of session ids (an id, the cookie's secret, is never stored);
// values are the dashboard's own encoding. The daemon passes its database;
// nil keeps sessions in memory only.
type SessionStore interface {
	PutSession(ctx context.Context, key, value []byte) error
	DeleteSession(ctx context.Context, key []byte) error
	Sessions(ctx context.Context) (map[string][]byte, error)
}

// storedSession is a session as SessionStore holds it.
type storedSession struct {
	CSRF    string `json:"csrf"`
	Actor   string `json:"actor"`
	Expires int64  `json:"expires_ms"`
	// Token is the login token's fingerprint; absent in sessions stored
	// before named tokens, which only the main admin token could open.
	Token string `json:"token,omitempty"`
}

// sessions keeps the dashboard's logins, in memory and (with a store) on
// disk. It is safe for concurrent
// use; expired entries are dropped when it is next touched, so it owns no
// goroutine. Looking a session up never touches the store.
type sessions struct {
	mu    sync.Mutex
	now   func() time.Time
	store SessionStore
	log   *slog.Logger
	byKey map[string]*session // by sessionKey(id)
}

// newSessions returns the sessions the store kept (expired ones and those
// that do not decode are deleted from it), or none without a store; a
// session stored without a token fingerprint is taken as opened with
// legacy (the main admin token's). An error says the store could not be
// read.
func newSessions(ctx context.Context, now func() time.Time, store SessionStore, log *slog.Logger, legacy string) (*sessions, error) {
	s := &sessions{now: now, store: store, log: log, byKey: map[string]*session{}}
	if store == nil {
		return s, nil
	}
	kept, err := store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	t := now()
	var drop []string
	for k, v := range kept {
		var st storedSession
		if err := json.Unmarshal(v, &st); err != nil || len(k) != sha256.Size || st.CSRF == "" {
			log.Warn("a stored dashboard session does not decode: deleted", "key", hex.EncodeToString([]byte(k)), "err", err)
			drop = append(drop, k)
			continue
		}
		ss := &session{csrf: st.CSRF, actor: st.Actor, expires: time.UnixMilli(st.Expires), token: st.Token}
		if ss.token == "" {
			ss.token = legacy
		}
		if !t.Before(ss.expires) || len(s.byKey) >= maxSessions {
			drop = append(drop, k)
			continue
		}
		s.byKey[k] = ss
	}
	s.forget(ctx, drop)
	return s, nil
}

// forget deletes keys from the store (failures are logged: an expired
// session left there is dropped at the next start).
func (s *sessions) forget(ctx context.Context, keys []string) {
	if s.store == nil {
		return
	}
	for _, k := range keys {
		if err := s.store.DeleteSession(ctx, []byte(k)); err != nil {
			s.log.Warn("delete a dashboard session", "err", err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// sessionKey is what a session is kept under: the SHA-256 of its id.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:])
}

// actorOf is the audit actor of a session: "session:" and the first 8 hex
// digits of the SHA-256 of its id (the id itself is a secret).
func actorOf(id string) string {
	return "session:" + hex.EncodeToString([]byte(sessionKey(id)))[:8]
}

// create starts a session of tok, stores it (a failure is logged: the
// session then lasts until a restart) and returns its id. Its audit actor
// is "session:<8 hex>", preceded by "token:<name>/" for a named token.
func (s *sessions) create(ctx context.Context, tok Token) (string, *session) {
	id := randomHex(32)
	key := sessionKey(id)
	now := s.now()
	actor := actorOf(id)
	if tok.Name != "" {
		actor = tok.actor() + "/" + actor
	}
	ss := &session{csrf: randomHex(32), actor: actor, expires: now.Add(sessionTTL), token: fingerprint(tok.Secret)}
	s.mu.Lock()
	drop := s.sweepLocked(now)
	var oldest, oldestOwn string
	own := 0
	for k, v := range s.byKey {
		if oldest == "" || v.expires.Before(s.byKey[oldest].expires) {
			oldest = k
		}
		if v.token == ss.token {
			own++
			if oldestOwn == "" || v.expires.Before(s.byKey[oldestOwn].expires) {
				oldestOwn = k
			}
		}
	}
	switch {
	case own >= maxSessionsPerToken || len(s.byKey) >= maxSessions && oldestOwn != "":
		delete(s.byKey, oldestOwn)
		drop = append(drop, oldestOwn)
	case len(s.byKey) >= maxSessions:
		// Only with more than maxSessions/maxSessionsPerToken tokens.
		delete(s.byKey, oldest)
		drop = append(drop, oldest)
	}
	s.byKey[key] = ss
	s.mu.Unlock()
	if s.store != nil {
		v, _ := json.Marshal(storedSession{CSRF: ss.csrf, Actor: ss.actor, Expires: ss.expires.UnixMilli(), Token: ss.token})
		if err := s.store.PutSession(ctx, []byte(key), v); err != nil {
			s.log.Warn("store a dashboard session: it will not survive a restart", "err", err)
		}
	}
	s.forget(ctx, drop)
	return id, ss
}

// sweepLocked drops the expired sessions and returns their keys.
func (s *sessions) sweepLocked(now time.Time) []string {
	var gone []string
	for k, v := range s.byKey {
		if !now.Before(v.expires) {
			delete(s.byKey, k)
			gone = append(gone, k)
		}
	}
	return gone
}

// get returns the live session with id.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	key := sessionKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byKey[key]
	if !ok {
		return nil, false
	}
	if !s.now().Before(ss.expires) {
		// The store's copy goes at the next login or start.
		delete(s.byKey, key)
		return nil, false
	}
	return ss, true
}

// remove ends the session with id (logout), in the store too.
func (s *sessions) remove(ctx context.Context, id string) {
	key := sessionKey(id)
	s.mu.Lock()
	delete(s.byKey, key)
	s.mu.Unlock()
	s.forget(ctx, []string{key})
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tokenOK reports whether got is want (a CSRF token), in constant time.
func tokenOK(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}
