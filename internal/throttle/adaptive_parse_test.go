package throttle_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// limitValue is the suite's limit_value(G, T).
func limitValue(g, total string) string {
	return total + `, 10;policy="` + g + ` usage", 500;policy="` + g + ` concurrency" `
}

// headersOf is the suite's headers(G, T, R, S): Reset-Amount is T−R.
func headersOf(g string, total, remaining, reset string) map[string]string {
	t, r := atoi(total), atoi(remaining)
	return map[string]string{
		"RateLimit-Limit": limitValue(g, total), "RateLimit-Remaining": remaining,
		"RateLimit-Reset-Amount": itoa(t - r), "RateLimit-Reset": reset,
	}
}

func atoi(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// with returns h with name set to v.
func with(h map[string]string, name, v string) map[string]string {
	out := map[string]string{}
	for k, x := range h {
		out[k] = x
	}
	out[name] = v
	return out
}

// The parse cases of arweave_throttling_http_headers_SUITE (24dffbc6).
func TestParseQuotaSuite(t *testing.T) {
	ok := func(g string, total, remaining, amount, reset int64) throttle.Quota {
		return throttle.Quota{GroupID: g, Total: total, Remaining: remaining, ResetAmount: amount, ResetSeconds: reset}
	}
	bad := func(kind throttle.ParseErrorKind, header string) *throttle.ParseError {
		return &throttle.ParseError{Kind: kind, Header: header}
	}
	base := headersOf("general", "200", "42", "7")
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    throttle.Quota
		err     *throttle.ParseError
	}{
		{"parse_well_formed", base, ok("general", 200, 42, 158, 7), nil},
		{"parse_well_formed_list (lower-case names)", map[string]string{
			"ratelimit-limit": limitValue("general", "200"), "ratelimit-remaining": "42",
			"ratelimit-reset-amount": "158", "ratelimit-reset": "7"}, ok("general", 200, 42, 158, 7), nil},
		{"parse_alpha2_version", map[string]string{
			"ratelimit-limit": `460, 460;policy="usage", 500;policy="concurrency" `, "ratelimit-remaining": "449",
			"ratelimit-reset-amount": "1", "ratelimit-reset": "19"}, throttle.Quota{}, bad(throttle.MissingGroupID, "")},
		{"parse_malformed_policies 1", map[string]string{
			"ratelimit-limit":     `450, 0;w=1000;policy="", 450;w=1000;burst=450;policy="leaky bucket" 150;w=1;policy="concurrency"`,
			"ratelimit-remaining": "449", "ratelimit-reset-amount": "1", "ratelimit-reset": "19"}, throttle.Quota{}, bad(throttle.MalformedPolicy, "")},
		{"parse_malformed_policies 2", map[string]string{
			"ratelimit-limit":     `450, 0;w=1000;policy="something else", 450;w=1000;burst=450;policy="leaky bucket" 150;w=1;policy="concurrency"`,
			"ratelimit-remaining": "449", "ratelimit-reset-amount": "1", "ratelimit-reset": "19"}, throttle.Quota{}, bad(throttle.MalformedPolicy, "")},
		{"parse_malformed_policies 3", map[string]string{
			"ratelimit-limit":     `460, 460;policy="leaky bucket", 500;policy="concurrency" `,
			"ratelimit-remaining": "449", "ratelimit-reset-amount": "1", "ratelimit-reset": "19"}, throttle.Quota{}, bad(throttle.MalformedPolicy, "")},
		{"parse_case_insensitive_names", map[string]string{
			"RaTeLiMiT-LiMiT": limitValue("data_sync_record", "10"), "ratelimit-remaining": "3",
			"RateLimit-Reset-Amount": "7", "RATELIMIT-RESET": "1"}, ok("data_sync_record", 10, 3, 7, 1), nil},
		{"parse_accepts_map", headersOf("general", "100", "99", "0"), ok("general", 100, 99, 1, 0), nil},
		{"parse_missing_header", map[string]string{
			"ratelimit-limit": limitValue("general", "200"), "ratelimit-reset-amount": "158", "ratelimit-reset": "7"},
			throttle.Quota{}, bad(throttle.MissingHeader, "ratelimit-remaining")},
		{"parse_malformed_limit", map[string]string{
			"ratelimit-limit": "not a valid limit", "ratelimit-remaining": "3", "ratelimit-reset-amount": "7", "ratelimit-reset": "1"},
			throttle.Quota{}, bad(throttle.MalformedHeaders, "")},
		{"parse_rejects_zero_limit", map[string]string{
			"ratelimit-limit": limitValue("general", "0"), "ratelimit-remaining": "0", "ratelimit-reset-amount": "1", "ratelimit-reset": "1"},
			throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-limit")},
		{"parse_rejects_negative_limit", map[string]string{
			"ratelimit-limit": limitValue("general", "-5"), "ratelimit-remaining": "0", "ratelimit-reset-amount": "1", "ratelimit-reset": "1"},
			throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-limit")},
		{"remaining -1", with(base, "RateLimit-Remaining", "-1"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-remaining")},
		{"remaining 200", with(base, "RateLimit-Remaining", "200"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-remaining")},
		{"remaining 201", with(base, "RateLimit-Remaining", "201"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-remaining")},
		{"remaining 199", with(base, "RateLimit-Remaining", "199"), ok("general", 200, 199, 158, 7), nil},
		{"remaining 0", with(base, "RateLimit-Remaining", "0"), ok("general", 200, 0, 158, 7), nil},
		{"reset -1", with(base, "RateLimit-Reset", "-1"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-reset")},
		{"reset 86401", with(base, "RateLimit-Reset", "86401"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-reset")},
		{"reset 0", with(base, "RateLimit-Reset", "0"), ok("general", 200, 42, 158, 0), nil},
		{"reset 86400", with(base, "RateLimit-Reset", "86400"), ok("general", 200, 42, 158, 86400), nil},
		{"amount 0", with(base, "RateLimit-Reset-Amount", "0"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-reset-amount")},
		{"amount -3", with(base, "RateLimit-Reset-Amount", "-3"), throttle.Quota{}, bad(throttle.InvalidValue, "ratelimit-reset-amount")},
		{"amount 1", with(base, "RateLimit-Reset-Amount", "1"), ok("general", 200, 42, 1, 7), nil},
		{"parse_rejects_oversized_integer", with(base, "RateLimit-Remaining", strings.Repeat("9", 200)), throttle.Quota{}, bad(throttle.MalformedHeaders, "")},
		{"old_headers", map[string]string{"access-control-allow-origin": "*", "content-length": "12",
			"date": "Mon, 01 Jan 2024 00:00:00 GMT", "server": "Cowboy"}, throttle.Quota{}, bad(throttle.MissingHeader, "ratelimit-limit")},
		// limiterd's own hostile cases.
		{"no policy at all", with(base, "RateLimit-Limit", "200"), throttle.Quota{}, bad(throttle.MalformedHeaders, "")},
		{"group id of 129 bytes", with(base, "RateLimit-Limit", limitValue(strings.Repeat("g", 129), "200")), throttle.Quota{}, bad(throttle.GroupIDTooLong, "")},
		{"group id of 128 bytes", with(base, "RateLimit-Limit", limitValue(strings.Repeat("g", 128), "200")), ok(strings.Repeat("g", 128), 200, 42, 158, 7), nil},
		{"spaces around numbers", with(with(base, "RateLimit-Remaining", " 42 "), "RateLimit-Limit", ` 200 , 10;policy=" general  usage "`), ok("general", 200, 42, 158, 7), nil},
		{"a fraction", with(base, "RateLimit-Reset", "1.5"), throttle.Quota{}, bad(throttle.MalformedHeaders, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := throttle.ParseQuota(tc.headers)
			if tc.err == nil {
				if err != nil || q != tc.want {
					t.Errorf("got %+v, %v; want %+v", q, err, tc.want)
				}
				return
			}
			pe, ok := err.(*throttle.ParseError)
			if !ok || *pe != *tc.err {
				t.Errorf("got %+v, %v; want error %v", q, err, tc.err)
			}
		})
	}
}

// What limiterd sends parses back to what it computed.
func TestParseQuotaOfRatelimitFields(t *testing.T) {
	f := ratelimit.Fields{Expiring: 453, Usage: 453, Concurrency: 150, Remaining: 449, Reset: 1, ResetAmount: 450}
	h := map[string]string{}
	ratelimit.Write(ratelimit.SetBoth, "general", []ratelimit.IETFItem{{Name: "general", Quota: 450, Window: 30}}, &f, nil,
		func(name string, v []byte) { h[name] = string(v) })
	q, err := throttle.ParseQuota(h)
	if want := (throttle.Quota{GroupID: "general", Total: 453, Remaining: 449, ResetAmount: 450, ResetSeconds: 1}); err != nil || q != want {
		t.Errorf("got %+v, %v; want %+v", q, err, want)
	}
}
