package live_test

import (
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

// TestParseOverride: a live edit takes values of the keys' own JSON kinds
// only, and names the key of the first one that is not.
func TestParseOverride(t *testing.T) {
	for _, c := range []struct{ body, field, problem string }{
		{`{"is_manual_reduction_disabled": null}`, "is_manual_reduction_disabled", "must be true or false"},
		{`{"is_manual_reduction_disabled": "true"}`, "is_manual_reduction_disabled", "must be true or false"},
		{`{"is_manual_reduction_disabled": 1}`, "is_manual_reduction_disabled", "must be true or false"},
		{`{"leaky_limit": "5"}`, "leaky_limit", "must be an integer"},
		{`{"leaky_limit": null}`, "leaky_limit", "must be an integer"},
		{`{"leaky_limit": true}`, "leaky_limit", "must be an integer"},
		{`{"leaky_limit": 1.5}`, "leaky_limit", "must be an integer"},
		{`{"leaky_limit": [5]}`, "leaky_limit", "must be an integer"},
		{`{"mode": null}`, "mode", ""},
		{`{"mode": 1}`, "mode", "must be a string"},
		{`{"leaky_limt": 5}`, "leaky_limt", "unknown key"},
		{`{}`, "", "the body names no key to change"},
		// Found by FuzzParseOverride: the empty key was "unknown key",
		// naming nothing.
		{`{"": 5}`, "", `unknown key "" (a key with an empty name)`},
	} {
		_, err := live.ParseOverride([]byte(c.body))
		fe, ok := err.(*limiter.FieldError)
		if !ok || fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
			t.Errorf("%s: %v, want a FieldError of %q saying %q", c.body, err, c.field, c.problem)
		}
	}
	o, err := live.ParseOverride([]byte(`{"is_manual_reduction_disabled": false, "leaky_limit": -0, "concurrency_limit": 20, "mode": "dry_run"}`))
	if err != nil {
		t.Fatal(err)
	}
	if o["is_manual_reduction_disabled"] != false || o["leaky_limit"] != int64(0) || o["concurrency_limit"] != int64(20) || o["mode"] != "dry_run" {
		t.Errorf("override %v", o)
	}
	if s := o.Over(limiter.ArweaveGroups()["general"]); s.LeakyLimit != 0 || s.ConcurrencyLimit != 20 || s.Mode != limiter.ModeDryRun {
		t.Errorf("over general: %+v", s)
	}
}

// TestExemptionNoteLength: the note's limit is in characters, as its
// message says, not in bytes: 500 "é" (1000 bytes) fit. Found by
// FuzzExemptionNormalize.
func TestExemptionNoteLength(t *testing.T) {
	for _, c := range []struct {
		note string
		ok   bool
	}{
		{strings.Repeat("é", 500), true},
		{strings.Repeat("é", 501), false},
		{strings.Repeat("n", 500), true},
		{strings.Repeat("n", 501), false},
	} {
		_, err := live.Exemption{Kind: live.DenyPeer, Value: "192.0.2.7", Note: c.note}.Normalize()
		if (err == nil) != c.ok {
			t.Errorf("a note of %d characters (%d bytes): %v", len([]rune(c.note)), len(c.note), err)
		}
	}
}

// TestExemptionNotUTF8: a value or note that is not UTF-8 (a form or a
// query string can carry one; JSON bodies cannot) is refused, naming the
// field: the store keeps exemptions as JSON, where it would turn into
// U+FFFD, so an exempt path "/\xff" came back from a restart as "/\ufffd".
// Found by FuzzExemptionNormalize.
func TestExemptionNotUTF8(t *testing.T) {
	for _, c := range []struct {
		e     live.Exemption
		field string
	}{
		{live.Exemption{Kind: live.ExemptPath, Value: "/\xff"}, "value"},
		{live.Exemption{Kind: live.DenyPeer, Value: "192.0.2.7", Note: "\xc3"}, "note"},
	} {
		_, err := c.e.Normalize()
		if fe, ok := err.(*limiter.FieldError); !ok || fe.Field != c.field {
			t.Errorf("%+v: %v, want an error naming %s", c.e, err, c.field)
		}
	}
	if _, err := (live.Exemption{Kind: live.ExemptPath, Value: "/caf\u00e9", Note: "caf\u00e9"}).Normalize(); err != nil {
		t.Errorf("UTF-8: %v", err)
	}
}
