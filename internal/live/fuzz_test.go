package live_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

// FuzzParseOverride: the body of PATCH /api/v1/groups/{group} (a live
// edit of limits, modes, algorithms). ParseOverride never panics. A
// refusal names the key at fault (a *limiter.FieldError), or, for a body that
// is not a JSON object, wraps the JSON error. What it accepts is canonical:
// the Override re-encoded as JSON (as the store keeps it) parses to the
// same Override, and CheckOverride accepts it.
func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{
		`{"leaky_limit": 5}`,
		`{"leaky_limit": 5, "leaky_tick_interval": 1000, "leaky_tick_reduction": 5, "concurrency_limit": 10}`,
		`{"mode": "dry_run", "is_manual_reduction_disabled": true}`,
		`{"algorithm": "gcra", "limit": 10, "period": 1000, "burst": 2}`,
		`{"algorithm": "sliding_log", "limit": 1000000, "period": 1}`,
		`{"sliding_window_limit": 3, "sliding_window_duration": 60000, "cleanup_interval": 1, "cleanup_expiry": 2}`,
		`{"leaky_limit": -1}`, `{"leaky_limit": 1.5}`, `{"leaky_limit": 1e3}`, `{"leaky_limit": "5"}`,
		`{"leaky_limit": 9223372036854775808}`, `{"leaky_limit": -9223372036854775808}`,
		`{"leaky_limit": null}`, `{"mode": null}`, `{"mode": 1}`, `{"algorithm": "leaky"}`,
		`{"is_manual_reduction_disabled": "true"}`, `{"leaky_limt": 5}`, `{}`, `[]`, `null`, `5`, ``,
		`{"leaky_limit": 5, "leaky_limit": 6}`, `{"leaky_limit": 5}{"x": 1}`, `{"mode": "\u0000"}`,
		`{"leaky_limit": 0012}`, `{"leaky_limit": -0}`, `{"leaky_limit":` + strings.Repeat("9", 400) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := live.ParseOverride(body)
		if err != nil {
			var fe *limiter.FieldError
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			switch {
			case errors.As(err, &fe):
				if fe.Problem == "" || (fe.Field == "" && !strings.Contains(fe.Problem, "no key") && !strings.Contains(fe.Problem, `""`)) {
					t.Fatalf("%q: %#v names nothing", body, fe)
				}
			case errors.As(err, &syn), errors.As(err, &typ):
			default:
				t.Fatalf("%q: error %T %v is neither a FieldError nor a JSON error", body, err, err)
			}
			return
		}
		if len(o) == 0 {
			t.Fatalf("%q: accepted an edit of no key", body)
		}
		if err := live.CheckOverride(o); err != nil {
			t.Fatalf("%q: CheckOverride(%v): %v", body, o, err)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		o3, err := live.ParseOverride(b)
		if err != nil || !reflect.DeepEqual(o3, o) {
			t.Fatalf("%q parsed to %v; re-encoded %s parses to %v, %v", body, o, b, o3, err)
		}
		if keys := o.Keys(); len(keys) != len(o) || !slices.IsSorted(keys) && len(keys) < 2 {
			t.Fatalf("%q: Keys() = %v for %v", body, keys, o)
		}
	})
}

// FuzzExemptionNormalize: the body of POST and DELETE /api/v1/exemptions
// (live exemptions and the live deny list) as Live checks it. Normalize
// never panics; a refusal is a *limiter.FieldError naming kind, value or
// note. What it accepts is a fixed point (normalizing again changes
// nothing) and survives the JSON the store keeps it as.
func FuzzExemptionNormalize(f *testing.F) {
	for _, c := range [][3]string{
		{"deny_peer", "192.0.2.7", "abuse"},
		{"deny_peer", " 10.0.0.1/8 ", ""},
		{"exempt_peer", "::ffff:192.0.2.7", ""},
		{"exempt_peer", "2001:db8::1/64", ""},
		{"exempt_peer", "fe80::1%eth0", ""},
		{"exempt_path", "/info", ""},
		{"exempt_path", "re:^/peers$", ""},
		{"exempt_path", "/a/**/b", ""},
		{"exempt_path", "re:(", ""},
		{"allow_peer", "192.0.2.7", ""},
		{"deny_peer", "not-an-ip", ""},
		{"deny_peer", "0.0.0.0/0", strings.Repeat("n", 501)},
		{"", "", ""},
		{"deny_peer", "1.2.3.4\x00", "\xff"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, kind, value, note string) {
		in := live.Exemption{Kind: live.ExemptionKind(kind), Value: value, Note: note, Expires: time.Unix(1_800_000_000, 0).UTC()}
		e, err := in.Normalize()
		if err != nil {
			var fe *limiter.FieldError
			if !errors.As(err, &fe) || !slices.Contains([]string{"kind", "value", "note"}, fe.Field) || fe.Problem == "" {
				t.Fatalf("%+v: error %v names no field", in, err)
			}
			return
		}
		if e.Kind != in.Kind || e.Note != in.Note || !e.Expires.Equal(in.Expires) {
			t.Fatalf("%+v normalized to %+v: more than the value changed", in, e)
		}
		if again, err := e.Normalize(); err != nil || again != e {
			t.Fatalf("%+v normalized to %+v, which normalizes to %+v, %v", in, e, again, err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back live.Exemption
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if n, err := back.Normalize(); err != nil || n.Kind != e.Kind || n.Value != e.Value || !n.Expires.Equal(e.Expires) {
			t.Fatalf("%+v: through JSON %s it is %+v, %v", e, b, n, err)
		}
	})
}
