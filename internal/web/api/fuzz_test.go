package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/web"
	"github.com/limiterd/limiterd/internal/webtest"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// fuzzAdmin is the admin handler of a Server on a real bbolt store, the
// shipped Arweave groups and a fixed clock, built once per fuzz target.
type fuzzAdmin struct {
	h       http.Handler
	initial map[string][]byte // GET /api/v1/groups/{g} before any edit
}

func newFuzzAdmin(tb testing.TB) *fuzzAdmin {
	tb.Helper()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	rec := insight.NewRecorder(insight.ArrivalsPerShard)
	lim, err := limiter.New(memory.New(), now, cfg, limiter.WithObserver(rec))
	if err != nil {
		tb.Fatal(err)
	}
	lv, err := live.New(context.Background(), lim, webtest.OpenStore(tb), cfg, clock)
	if err != nil {
		tb.Fatal(err)
	}
	s := webtest.MustNewServer(tb, lim, lv, web.Options{Token: webtest.Token, Now: clock, Recorder: rec,
		DataPlane: proxy.New(lim, proxy.Options{Now: clock})})
	a := &fuzzAdmin{h: s.AdminHandler(), initial: map[string][]byte{}}
	for _, g := range fuzzGroups {
		if st, b := a.call("GET", "/api/v1/groups/"+g, ""); st == http.StatusOK {
			a.initial[g] = b
		}
	}
	return a
}

// fuzzGroups are the groups the fuzzer edits: real ones and one that is not.
var fuzzGroups = []string{"general", "chunk", "data_sync_record", "nosuch"}

// call sends one authorized admin API request.
func (a *fuzzAdmin) call(method, path, body string) (int, []byte) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+webtest.Token)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// answer checks the shape of an answer (docs/api.md, "Errors"): a JSON object; for an
// error, a 4xx of the API's with a non-empty "error". It returns the
// object.
func answer(t *testing.T, what string, status int, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %d, not a JSON object: %q", what, status, b)
	}
	if status < 400 {
		return v
	}
	if !slices.Contains([]int{400, 403, 404, 409, 413, 422, 429}, status) {
		t.Fatalf("%s: status %d: %s", what, status, b)
	}
	if msg, _ := v["error"].(string); msg == "" && status != 403 && status != 429 {
		t.Fatalf("%s: %d without an error: %s", what, status, b)
	}
	return v
}

// FuzzAdminAPI: the JSON bodies of the admin API's edits, sent through
// the real handler (authorization, routing, body limits, decoding,
// validation, the store): PATCH of a group's limits, DELETE of its
// overrides, POST and DELETE of exemptions and deny entries, the data
// plane's check and release. Whatever the body, the answer is never a
// 5xx and has the API's error shape; an edit that succeeds is what a GET then
// reads, and undoing it (DELETE overrides, DELETE the exemption) returns
// the state before it; a check's HTTP status is the one its body states,
// and its lease releases once.
func FuzzAdminAPI(f *testing.F) {
	for _, c := range []struct {
		op   uint8
		body string
	}{
		{0, `{"leaky_limit": 5}`},
		{0, `{"mode": "dry_run", "concurrency_limit": 3}`},
		{0, `{"algorithm": "gcra", "limit": 10, "period": 1000, "burst": 2}`},
		{0, `{"algorithm": "fixed_window", "limit": 10, "period": 1000, "burst": 2}`},
		{0, `{"leaky_limit": -1}`},
		{0, `{"leaky_tick_interval": 0}`},
		{0, `{"sliding_window_duration": 9223372036854775807}`},
		{0, `{"": 1}`},
		{0, `[1, 2]`},
		{0, `not json`},
		{0, ``},
		{1, `{"leaky_limit": 5}`}, // another group
		{3, `{"leaky_limit": 5}`}, // a group that does not exist
		{4, `{"kind": "deny_peer", "value": "192.0.2.7", "note": "scraper", "expires": "24h"}`},
		{4, `{"kind": "exempt_peer", "value": "2001:db8::/48"}`},
		{4, `{"kind": "exempt_path", "value": "re:^/peers$"}`},
		{4, `{"kind": "exempt_path", "value": "/a/**/b"}`},
		{4, `{"kind": "deny_peer", "value": "192.0.2.7", "expires": "2000-01-01T00:00:00Z"}`},
		{4, `{"kind": "deny_peer", "value": "192.0.2.7", "expires": "-1h"}`},
		{4, `{"kind": "allow_peer", "value": "192.0.2.7"}`},
		{4, `{"kind": "deny_peer", "value": "192.0.2.7", "colour": "red"}`},
		{5, `{"kind": "deny_peer", "value": "192.0.2.8"}`},
		{6, `{"peer": "192.0.2.1", "path": "/info"}`},
		{6, `{"peer": "192.0.2.1", "method": "POST", "path": "/tx"}`},
		{6, `{"peer": "[2001:db8::1]:80", "path": "/chunk/1?x"}`},
		{6, `{"peer": "nobody", "path": "/info"}`},
		{6, `{"peer": "192.0.2.1", "path": "no-slash"}`},
		{6, `{"peer": "192.0.2.1", "method": "G ET", "path": "/"}`},
		{7, `{"id": "nosuchlease"}`},
		{7, `{"id": ""}`},
		{8, `{}`},
	} {
		f.Add(c.op, c.body)
	}
	f.Add(uint8(0), `{"leaky_limit": 5, "pad": "`+strings.Repeat("x", 70<<10)+`"}`)
	a := newFuzzAdmin(f)
	f.Fuzz(func(t *testing.T, op uint8, body string) {
		switch op % 9 {
		case 0, 1, 2, 3: // PATCH a group, then undo it
			g := fuzzGroups[op%9]
			path := "/api/v1/groups/" + g
			st, b := a.call("PATCH", path, body)
			v := answer(t, "PATCH "+body, st, b)
			if st != http.StatusOK {
				if st == http.StatusUnprocessableEntity && v["field"] == nil && !strings.Contains(v["error"].(string), `""`) &&
					!strings.Contains(v["error"].(string), "no key") {
					t.Fatalf("PATCH %s: 422 naming no field: %s", body, b)
				}
				if gst, gb := a.call("GET", path, ""); g != "nosuch" && (gst != http.StatusOK || !bytes.Equal(gb, a.initial[g])) {
					t.Fatalf("PATCH %s refused (%d), yet the group changed: %s", body, st, gb)
				}
				return
			}
			if g == "nosuch" {
				t.Fatalf("PATCH of a group that does not exist: %s", b)
			}
			if gst, gb := a.call("GET", path, ""); gst != http.StatusOK || !bytes.Equal(gb, b) {
				t.Fatalf("PATCH %s answered %s; GET reads %d %s", body, b, gst, gb)
			}
			if dst, db := a.call("DELETE", path+"/overrides", ""); dst != http.StatusOK || !bytes.Equal(db, a.initial[g]) {
				t.Fatalf("DELETE overrides after PATCH %s: %d %s, want %s", body, dst, db, a.initial[g])
			}
		case 4, 5: // POST an exemption (or DELETE one that is not there), then undo it
			method := "POST"
			if op%9 == 5 {
				method = "DELETE"
			}
			st, b := a.call(method, "/api/v1/exemptions", body)
			v := answer(t, method+" exemption "+body, st, b)
			if st >= 400 {
				return
			}
			if method == "DELETE" {
				t.Fatalf("DELETE of an exemption never added succeeded: %s %s", body, b)
			}
			e := v
			if inner, ok := v["exemption"].(map[string]any); ok {
				e = inner
			}
			kind, _ := e["kind"].(string)
			value, _ := e["value"].(string)
			if !listed(t, a, kind, value) {
				t.Fatalf("POST %s answered %s, but the list lacks it", body, b)
			}
			undo, _ := json.Marshal(map[string]string{"kind": kind, "value": value})
			if st, b := a.call("DELETE", "/api/v1/exemptions", string(undo)); st != http.StatusOK {
				t.Fatalf("DELETE %s after POST %s: %d %s", undo, body, st, b)
			}
			if listed(t, a, kind, value) {
				t.Fatalf("DELETE %s left it listed", undo)
			}
		case 6, 8: // the data plane's check, and the release of its lease
			st, b := a.call("POST", "/api/v1/check", body)
			v := answer(t, "check "+body, st, b)
			if st == http.StatusBadRequest || st == http.StatusUnprocessableEntity || st == http.StatusRequestEntityTooLarge {
				return
			}
			if s, _ := v["status"].(float64); int(s) != st || (st == http.StatusOK) != (v["allowed"] == true) {
				t.Fatalf("check %s: HTTP %d, body %s", body, st, b)
			}
			if id, _ := v["id"].(string); id != "" {
				rel, _ := json.Marshal(map[string]string{"id": id})
				if st, b := a.call("POST", "/api/v1/release", string(rel)); st != http.StatusOK {
					t.Fatalf("release %s: %d %s", id, st, b)
				}
				if st, _ := a.call("POST", "/api/v1/release", string(rel)); st != http.StatusNotFound {
					t.Fatalf("release %s twice: %d", id, st)
				}
			}
		case 7:
			st, b := a.call("POST", "/api/v1/release", body)
			answer(t, "release "+body, st, b)
			if st == http.StatusOK {
				t.Fatalf("release %s of a lease never given: %s", body, b)
			}
		}
	})
}

// listed reports whether the live exemptions list (kind, value).
func listed(t *testing.T, a *fuzzAdmin, kind, value string) bool {
	t.Helper()
	st, b := a.call("GET", "/api/v1/exemptions", "")
	if st != http.StatusOK {
		t.Fatalf("GET exemptions: %d %s", st, b)
	}
	var v struct {
		Live []live.Exemption `json:"exemptions"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET exemptions: %v: %s", err, b)
	}
	return slices.ContainsFunc(v.Live, func(e live.Exemption) bool { return string(e.Kind) == kind && e.Value == value })
}
