package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/limiterd/limiterd/internal/webtest"
)

// TestAPIErrorMapping: every kind of error the admin API meets answers
// its status with the JSON error body (docs/api.md, "Errors"), naming the
// field at fault.
func TestAPIErrorMapping(t *testing.T) {
	d := webtest.NewDash(t)
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
		status, v := d.API(c.method, c.path, c.body)
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
	if status, _ := d.API("POST", "/api/v1/exemptions", body); status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("first exemption: %d", status)
	}
	if status, v := d.API("POST", "/api/v1/exemptions", body); status != http.StatusConflict {
		t.Errorf("the same exemption again: %d %v, want 409", status, v)
	}
	// No token: 401, with the challenge.
	r := httptest.NewRequest("GET", "/api/v1/groups", nil)
	w := httptest.NewRecorder()
	d.H.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d %v", w.Code, w.Header())
	}
}
