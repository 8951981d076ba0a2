package web_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/webtest"
)

// memSessions is a SessionStore in a map, as the database would keep it.
type memSessions struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSessions) PutSession(_ context.Context, k, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(k)] = append([]byte(nil), v...)
	return nil
}

func (s *memSessions) DeleteSession(_ context.Context, k []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, string(k))
	return nil
}

func (s *memSessions) Sessions(context.Context) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.m {
		out[k] = v
	}
	return out, nil
}

func (s *memSessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// TestSessionsSurviveRestart: a login outlives the Server that made it
// when a store keeps it (with its CSRF token: a form posts after the
// restart), logout deletes it, expired and undecodable ones are dropped
// at start, and the store never holds the session id itself.
func TestSessionsSurviveRestart(t *testing.T) {
	store := &memSessions{m: map[string][]byte{}}
	first := webtest.NewDash(t).Restart(store)
	cookie, csrf := first.Login()
	if store.len() != 1 {
		t.Fatalf("%d sessions stored after a login, want 1", store.len())
	}
	id := cookie[len("limiterd_session="):]
	for k, v := range store.m {
		if k == id || string(v) == id || len(k) != 32 {
			t.Fatalf("the store holds the session id or a key that is not its SHA-256: %q → %q", k, v)
		}
	}

	second := first.Restart(store)
	second.Page("/", cookie)
	resp := second.Do("POST", "/switch", url.Values{"on": {"false"}, "csrf": {csrf}}, "Cookie", cookie)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a form with the CSRF token from before the restart: %d", resp.StatusCode)
	}
	if second.Lim.Enabled() {
		t.Fatal("the switch did not change")
	}

	// Logout deletes it from the store: the next start does not know it.
	second.Do("POST", "/logout", url.Values{"csrf": {csrf}}, "Cookie", cookie)
	if store.len() != 0 {
		t.Fatalf("%d sessions stored after logout", store.len())
	}
	if resp := second.Restart(store).Do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a logged-out session after a restart: %d, want a redirect to /login", resp.StatusCode)
	}

	// Expired while the daemon was down, or undecodable: dropped at start.
	third := second.Restart(store)
	cookie, _ = third.Login()
	store.PutSession(context.Background(), []byte("not a sha-256 key"), []byte("{"))
	third.Clock.Add(13 * time.Hour)
	fourth := third.Restart(store)
	if resp := fourth.Do("GET", "/", nil, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an expired session after a restart: %d, want a redirect to /login", resp.StatusCode)
	}
	if store.len() != 0 {
		t.Fatalf("%d sessions left in the store, want the expired and the bad one deleted", store.len())
	}
}
