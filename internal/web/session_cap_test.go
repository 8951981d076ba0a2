package web

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
)

// TestSessionsCappedPerToken: one token's logins past maxSessionsPerToken
// end that token's oldest sessions, never another token's: the holder of
// a read token cannot log the admins out by logging in again and again.
func TestSessionsCappedPerToken(t *testing.T) {
	c := limitertest.NewClock(limitertest.T0)
	s, err := newSessions(context.Background(), c.Now, nil, slog.New(slog.DiscardHandler), "")
	if err != nil {
		t.Fatal(err)
	}
	admin := Token{Secret: "admin-secret-0123456789", Scope: ScopeAdmin}
	reader := Token{Name: "ro", Secret: "read-secret-0123456789", Scope: ScopeRead}
	adminID, _ := s.create(context.Background(), admin)
	var first string
	for i := range maxSessions + 10 {
		c.Add(time.Millisecond)
		id, _ := s.create(context.Background(), reader)
		if i == 0 {
			first = id
		}
	}
	if _, ok := s.get(adminID); !ok {
		t.Fatal("a read token's logins ended the admin's session")
	}
	if _, ok := s.get(first); ok {
		t.Fatal("the read token's oldest session should have ended")
	}
	n := 0
	for _, v := range s.byKey {
		if v.token == fingerprint(reader.Secret) {
			n++
		}
	}
	if n != maxSessionsPerToken {
		t.Fatalf("%d sessions of the read token, want %d", n, maxSessionsPerToken)
	}
}
