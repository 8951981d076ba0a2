package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/internal/webtest"
)

// TestAPIOnTheFakeClock: the API reads and writes on the server's clock:
// an edit's audit entry is stamped with it, and a check decided at it
// carries the Retry-After of the group's next tick as of then.
func TestAPIOnTheFakeClock(t *testing.T) {
	d := webtest.NewDash(t)
	t0 := d.Clock.Now()
	d.Clock.Add(7 * time.Second)
	if status, v := d.API("PATCH", "/api/v1/groups/general", `{"leaky_limit": 4}`); status != http.StatusOK {
		t.Fatalf("PATCH: %d %v", status, v)
	}
	_, v := d.API("GET", "/api/v1/audit", "")
	entries, _ := v["entries"].([]any)
	if len(entries) == 0 {
		t.Fatalf("audit: %v", v)
	}
	e := entries[0].(map[string]any)
	if e["time"] != t0.Add(7*time.Second).UTC().Format(time.RFC3339) || e["action"] != "group.patch" {
		t.Errorf("audit entry %v, want group.patch at %s", e, t0.Add(7*time.Second).UTC().Format(time.RFC3339))
	}
	// Four admitted (leaky_limit 4 now), the fifth refused until the tick
	// at t0+30 s: 23 s away.
	for i := range 4 {
		if status, v := d.API("POST", "/api/v1/check", `{"peer": "192.0.2.9", "path": "/info"}`); status != http.StatusOK {
			t.Fatalf("check %d: %d %v", i+1, status, v)
		}
	}
	status, v := d.API("POST", "/api/v1/check", `{"peer": "192.0.2.9", "path": "/info"}`)
	if status != http.StatusTooManyRequests || v["retry_after"] != float64(23) || v["reason"] != "rate_limit" {
		t.Errorf("5th check: %d %v, want 429 with retry_after 23", status, v)
	}
}

func TestLimiterEndpoint(t *testing.T) {
	o := webtest.NewOps(t)
	status, body := o.Call(webtest.ReadToken, "GET", "/api/v1/limiter", "")
	var v struct {
		Enabled bool `json:"enabled"`
		Config  struct {
			File     string    `json:"file"`
			Embedded bool      `json:"embedded"`
			LoadedAt time.Time `json:"loaded_at"`
		} `json:"config"`
		Version       api.Build `json:"version"`
		UptimeSeconds int64     `json:"uptime_seconds"`
		Token         struct{ Name, Scope string }
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || status != 200 {
		t.Fatalf("%d %s: %v", status, body, err)
	}
	if !v.Enabled || v.Config.File != "/etc/limiterd/config.toml" || v.Config.Embedded || !v.Config.LoadedAt.Equal(o.Clock.Now().Add(-time.Hour)) ||
		v.Version.Version != "v1.2.3" || v.Version.Revision == "" || v.UptimeSeconds != 7200 || v.Token.Name != "grafana" || v.Token.Scope != "read" {
		t.Errorf("GET /api/v1/limiter: %s", body)
	}
	o.Call(webtest.Token, "POST", "/api/v1/limiter/off", "")
	if _, body := o.Call(webtest.Token, "GET", "/api/v1/limiter", ""); !strings.Contains(body, `"enabled":false`) || !strings.Contains(body, `"name":"admin","scope":"admin"`) {
		t.Errorf("after off: %s", body)
	}
}

func TestBackupEndpoint(t *testing.T) {
	o := webtest.NewOps(t)
	r := httptest.NewRequest("GET", "/api/v1/backup", nil)
	r.Header.Set("Authorization", "Bearer "+webtest.OpsToken)
	w := httptest.NewRecorder()
	o.H.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != webtest.BackupBody || w.Header().Get("Content-Length") != strconv.Itoa(len(webtest.BackupBody)) ||
		w.Header().Get("Content-Type") != "application/octet-stream" || w.Header().Get("X-Limiterd-Snapshot") != "written" ||
		!strings.HasPrefix(w.Header().Get("Content-Disposition"), `attachment; filename="limiterd-2023`) {
		t.Errorf("backup: %d %v %q", w.Code, w.Header(), w.Body)
	}
	if o.Snapshots != 1 {
		t.Errorf("%d snapshots before the backup, want 1", o.Snapshots)
	}
	if s, _ := o.Call(webtest.OpsToken, "GET", "/api/v1/backup?snapshot=false", ""); s != 200 || o.Snapshots != 1 {
		t.Errorf("snapshot=false: %d, %d snapshots", s, o.Snapshots)
	}
	if s, body := o.Call(webtest.OpsToken, "GET", "/api/v1/backup?snapshot=maybe", ""); s != 422 || !strings.Contains(body, `"field":"snapshot"`) {
		t.Errorf("snapshot=maybe: %d %s", s, body)
	}
	if s, _ := o.Call(webtest.ReadToken, "GET", "/api/v1/backup", ""); s != 403 {
		t.Errorf("backup with a read token: %d, want 403", s)
	}
}

func TestExemptionExpiry(t *testing.T) {
	o := webtest.NewOps(t)
	start := o.Clock.Now()
	status, v := o.API("POST", "/api/v1/exemptions", `{"kind": "deny_peer", "value": "203.0.113.66", "note": "scraper, ticket 42", "expires": "24h"}`)
	if status != 201 || v["expires"] != start.Add(24*time.Hour).UTC().Format(time.RFC3339) {
		t.Fatalf("deny for 24h: %d %v", status, v)
	}
	at := start.Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if status, v := o.API("POST", "/api/v1/exemptions", `{"kind": "exempt_peer", "value": "198.51.100.0/24", "expires": "`+at+`"}`); status != 201 || v["expires"] != at {
		t.Fatalf("exempt until %s: %d %v", at, status, v)
	}
	for body, field := range map[string]string{
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "tomorrow"}`:             "expires",
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "-5m"}`:                  "expires",
		`{"kind": "deny_peer", "value": "192.0.2.1", "expires": "2001-01-01T00:00:00Z"}`: "expires",
	} {
		if status, v := o.API("POST", "/api/v1/exemptions", body); status != 422 || v["field"] != field {
			t.Errorf("%s: %d %v", body, status, v)
		}
	}
	if d := o.Lim.Decide(o.Clock.Now(), o.Lim.PeerOf("203.0.113.66:1", nil), 1); d.Allowed {
		t.Fatal("the denied peer is let through")
	}

	// Nothing expires early; then each at its time, audited with its note.
	if n, err := o.Live.Expire(context.Background(), start.Add(2*time.Hour-time.Second)); n != 0 || err != nil {
		t.Fatalf("expired early: %d %v", n, err)
	}
	if n, err := o.Live.Expire(context.Background(), start.Add(2*time.Hour)); n != 1 || err != nil {
		t.Fatalf("at 2h: %d %v", n, err)
	}
	if n, err := o.Live.Expire(context.Background(), start.Add(25*time.Hour)); n != 1 || err != nil {
		t.Fatalf("at 25h: %d %v", n, err)
	}
	if _, v := o.API("GET", "/api/v1/exemptions", ""); len(v["exemptions"].([]any)) != 0 {
		t.Errorf("left after expiry: %v", v["exemptions"])
	}
	o.Clock.Add(25 * time.Hour)
	if d := o.Lim.Decide(o.Clock.Now(), o.Lim.PeerOf("203.0.113.66:1", nil), 1); !d.Allowed {
		t.Error("the deny entry expired but still applies")
	}

	// The audit keeps the note, and filters.
	_, v = o.API("GET", "/api/v1/audit?action=exemption&actor=limiterd", "")
	entries := v["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("expiries in the audit: %v", entries)
	}
	last := entries[0].(map[string]any)
	if last["action"] != "exemption.expire" || last["old"] != "203.0.113.66" || last["note"] != "scraper, ticket 42" || last["target"] != "deny_peer" {
		t.Errorf("expiry entry: %v", last)
	}
	_, v = o.API("GET", "/api/v1/audit?action=exemption.add", "")
	if e := v["entries"].([]any); len(e) != 2 || e[1].(map[string]any)["note"] != "scraper, ticket 42" || e[1].(map[string]any)["expires"] == nil {
		t.Errorf("additions: %v", e)
	}
	_, v = o.API("GET", "/api/v1/audit?since=1h", "")
	if e := v["entries"].([]any); len(e) != 0 {
		t.Errorf("since=1h (the expiries were audited on the clock of their call): %v", e)
	}
	_, v = o.API("GET", "/api/v1/audit?since="+start.Add(-time.Minute).UTC().Format(time.RFC3339)+"&limit=3", "")
	if e := v["entries"].([]any); len(e) != 3 || v["next"] == nil {
		t.Errorf("since the start, 3 a page: %v", v)
	}
	for q, field := range map[string]string{"since=yesterday": "since", "limit=0": "limit", "before=x": "before"} {
		if status, v := o.API("GET", "/api/v1/audit?"+q, ""); status != 422 || v["field"] != field {
			t.Errorf("audit?%s: %d %v", q, status, v)
		}
	}
}

// TestExemptionsPaged: GET /api/v1/exemptions answers a page at a time,
// in the order of addition, with the total and the cursor of the next.
func TestExemptionsPaged(t *testing.T) {
	o := webtest.NewOps(t)
	for i := range 7 {
		if status, v := o.API("POST", "/api/v1/exemptions", fmt.Sprintf(`{"kind": "deny_peer", "value": "203.0.113.%d"}`, i+1)); status != 201 {
			t.Fatalf("add %d: %d %v", i, status, v)
		}
	}
	var got []string
	cursor := ""
	for range 10 {
		path := "/api/v1/exemptions?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		status, v := o.API("GET", path, "")
		if status != 200 || v["total"] != float64(7) {
			t.Fatalf("%s: %d %v", path, status, v)
		}
		page := v["exemptions"].([]any)
		if len(page) > 3 {
			t.Fatalf("%s: %d entries, limit 3", path, len(page))
		}
		for _, e := range page {
			got = append(got, e.(map[string]any)["value"].(string))
		}
		next, more := v["next"].(string)
		if !more {
			break
		}
		cursor = next
	}
	want := []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "203.0.113.5", "203.0.113.6", "203.0.113.7"}
	if !slices.Equal(got, want) {
		t.Errorf("paged: %v, want %v", got, want)
	}
	for _, bad := range []string{"?limit=0", "?limit=10001", "?cursor=-1", "?cursor=x"} {
		if status, v := o.API("GET", "/api/v1/exemptions"+bad, ""); status != 422 {
			t.Errorf("%s: %d %v, want 422", bad, status, v)
		}
	}
}
