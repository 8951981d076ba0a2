package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAdminPanicLogged: a panic in an admin handler (here the snapshot it
// calls) is logged at ERROR with the route and the stack, where the
// default log level shows it, not only at net/http's debug line; the
// connection is cut and the listener goes on serving.
func TestAdminPanicLogged(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, s := webtest.NewDashWith(t, nil, func(o *web.Options) {
		o.Logger = log
		o.Snapshot = func(context.Context) error { panic("a bug in the snapshot") }
	})
	hs := s.HTTPServer()
	srv := httptest.NewUnstartedServer(hs.Handler)
	srv.Config.ErrorLog = hs.ErrorLog
	srv.Start()
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+webtest.Token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("a panicking handler answered %d", resp.StatusCode)
		}
	}
	got := logs.String()
	if !strings.Contains(got, `"level":"ERROR"`) || !strings.Contains(got, "a bug in the snapshot") ||
		!strings.Contains(got, "/api/v1/snapshot") || !strings.Contains(got, "goroutine") {
		t.Errorf("the panic's log: %s, want an ERROR line with the value, the path and the stack", got)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the panic: %v %v", resp, err)
	}
	resp.Body.Close()
}
