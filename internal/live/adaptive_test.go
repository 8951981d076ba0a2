package live_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// The adaptive keys through a live edit (docs/limiting.md, "Adaptive
// concurrency"): turned on and tuned, applied and audited, the view says
// where the limit stands; bad values refused naming the group and the
// key, nothing stored.
func TestPatchAdaptive(t *testing.T) {
	c, lim, st := newAlgoLive(t)
	ctx := context.Background()
	for _, tc := range []struct{ body, key, has string }{
		{`{"adaptive_concurrency": true, "adaptive_min_limit": 50, "adaptive_max_limit": 10}`, "adaptive_min_limit", "at most adaptive_max_limit (10), got 50"},
		{`{"adaptive_max_limit": 0}`, "adaptive_max_limit", "from 1 to"},
		{`{"adaptive_min_limit": -1}`, "adaptive_min_limit", "got -1"},
		{`{"adaptive_algorithm": "vegas"}`, "adaptive_algorithm", `"gradient"`},
		{`{"adaptive_buffer": 500}`, "adaptive_buffer", "from 0 to 100"},
		{`{"adaptive_window": 1}`, "adaptive_window", "from 10 to 60000"},
		{`{"adaptive_probe_samples": 0}`, "adaptive_probe_samples", "from 1 to 10000"},
		{`{"adaptive_concurrency": 1}`, "adaptive_concurrency", "true or false"},
	} {
		_, err := c.PatchGroup(ctx, "tester", "api", []byte(tc.body))
		var fe *limiter.FieldError
		// A value of the wrong type is named as the body's key, a value out
		// of range as the group's setting.
		if !errors.As(err, &fe) || fe.Field != limiter.GroupField("api", tc.key) && fe.Field != tc.key || !strings.Contains(fe.Problem, tc.has) {
			t.Errorf("%s: %v, want http_api.limiter.api.%s saying %q", tc.body, err, tc.key, tc.has)
		}
	}
	if a, _ := st.Audit(ctx, 10, 0); len(a) != 0 {
		t.Fatalf("refused edits were audited: %+v", a)
	}
	v, err := c.PatchGroup(ctx, "alice", "api", []byte(`{"adaptive_concurrency": true, "adaptive_min_limit": 5, "adaptive_max_limit": 80}`))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Effective.AdaptiveConcurrency || v.Effective.AdaptiveMaxLimit != 80 || v.Adaptive == nil || v.Adaptive.Limit != 5 || !v.Adaptive.Probing {
		t.Fatalf("after the edit: %+v, adaptive %+v", v.Effective.Adaptive, v.Adaptive)
	}
	if a, ok := lim.Adaptive(mustID(t, lim, "api")); !ok || a.Limit != 5 {
		t.Fatalf("the limiter: %+v %v", a, ok)
	}
	audit, _ := st.Audit(ctx, 10, 0)
	if len(audit) != 1 || audit[0].Action != "group.patch" || audit[0].Actor != "alice" || audit[0].Target != "api" {
		t.Fatalf("audit %+v", audit)
	}
	if nw, _ := audit[0].New.(map[string]any); nw["adaptive_concurrency"] != true || nw["adaptive_max_limit"] != 80.0 && nw["adaptive_max_limit"] != int64(80) {
		t.Fatalf("audit entry %+v", audit[0])
	}
}
