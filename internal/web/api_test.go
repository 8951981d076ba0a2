package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// api sends one admin API request with the token and a JSON body, and
// returns the status and the decoded JSON answer.
func (d *dash) api(method, path, body string) (int, map[string]any) {
	d.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+dashToken)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		d.t.Fatalf("%s %s: %d, not JSON: %q", method, path, w.Code, w.Body)
	}
	return w.Code, v
}

// TestAPIErrorMapping: every kind of error the admin API meets answers
// its status with the JSON body of SPEC §7, naming the field at fault.
func TestAPIErrorMapping(t *testing.T) {
	d := newDash(t)
	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"PATCH", "/api/v1/groups/general", `{"leaky_limit": -1}`, 422, "leaky_limit"},
		{"PATCH", "/api/v1/groups/general", `{"leaky_limt": 5}`, 422, "leaky_limt"},
		{"PATCH", "/api/v1/groups/general", `{"mode": "sometimes"}`, 422, "mode"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "leaky"}`, 422, "algorithm"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "gcra", "limit": 0, "period": 1000}`, 422, "limit"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "gcra", "limit": 10, "period": -1}`, 422, "period"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "gcra", "limit": 10, "period": 4611686018427387904}`, 422, "period"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "fixed_window", "limit": 10, "period": 1000, "burst": 2}`, 422, "burst"},
		{"PATCH", "/api/v1/groups/general", `{"algorithm": "sliding_log", "limit": 1000000, "period": 1000}`, 422, "limit"},
		{"PATCH", "/api/v1/groups/general", `not json`, 400, ""},
		{"PATCH", "/api/v1/groups/general", `[1, 2]`, 400, ""},
		{"PATCH", "/api/v1/groups/nosuch", `{"leaky_limit": 5}`, 404, ""},
		{"DELETE", "/api/v1/groups/nosuch/overrides", "", 404, ""},
		{"POST", "/api/v1/exemptions", `{"kind": "deny_peer", "value": "192.0.2.7", "colour": "red"}`, 422, "colour"},
		{"POST", "/api/v1/exemptions", `{"kind": "allow_peer", "value": "192.0.2.7"}`, 422, "kind"},
		{"POST", "/api/v1/exemptions", `{"kind": "deny_peer", "value": "not-an-ip"}`, 422, "value"},
		{"GET", "/api/v1/peers?sort=bogus", "", 422, "sort"},
		{"GET", "/api/v1/peers?group=nosuch", "", 422, "group"},
		{"GET", "/api/v1/peers?limit=0", "", 422, "limit"},
		{"POST", "/api/v1/check", `{"peer": "192.0.2.1", "path": "no-slash"}`, 422, "path"},
		{"POST", "/api/v1/check", `{"peer": "nobody", "path": "/info"}`, 422, "peer"},
		{"POST", "/api/v1/release", `{"id": "nosuchlease"}`, 404, ""},
		{"GET", "/api/v1/nosuch", "", 404, ""},
		{"PUT", "/api/v1/groups", "", 405, ""},
	} {
		status, v := d.api(c.method, c.path, c.body)
		if status != c.status || v["error"] == "" || v["error"] == nil {
			t.Errorf("%s %s %s: %d %v, want %d with an error", c.method, c.path, c.body, status, v, c.status)
			continue
		}
		if got, _ := v["field"].(string); got != c.field {
			t.Errorf("%s %s %s: field %q, want %q", c.method, c.path, c.body, got, c.field)
		}
	}
	// The same exemption twice: a conflict.
	body := `{"kind": "deny_peer", "value": "192.0.2.7", "note": "test"}`
	if status, _ := d.api("POST", "/api/v1/exemptions", body); status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("first exemption: %d", status)
	}
	if status, v := d.api("POST", "/api/v1/exemptions", body); status != http.StatusConflict {
		t.Errorf("the same exemption again: %d %v, want 409", status, v)
	}
	// No token: 401, with the challenge.
	r := httptest.NewRequest("GET", "/api/v1/groups", nil)
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d %v", w.Code, w.Header())
	}
}

// TestAPIOnTheFakeClock: the API reads and writes on the server's clock:
// an edit's audit entry is stamped with it, and a check decided at it
// carries the Retry-After of the group's next tick as of then.
func TestAPIOnTheFakeClock(t *testing.T) {
	d := newDash(t)
	t0 := d.clock.Now()
	d.clock.Add(7 * time.Second)
	if status, v := d.api("PATCH", "/api/v1/groups/general", `{"leaky_limit": 4}`); status != http.StatusOK {
		t.Fatalf("PATCH: %d %v", status, v)
	}
	_, v := d.api("GET", "/api/v1/audit", "")
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
		if status, v := d.api("POST", "/api/v1/check", `{"peer": "192.0.2.9", "path": "/info"}`); status != http.StatusOK {
			t.Fatalf("check %d: %d %v", i+1, status, v)
		}
	}
	status, v := d.api("POST", "/api/v1/check", `{"peer": "192.0.2.9", "path": "/info"}`)
	if status != http.StatusTooManyRequests || v["retry_after"] != float64(23) || v["reason"] != "rate_limit" {
		t.Errorf("5th check: %d %v, want 429 with retry_after 23", status, v)
	}
}
