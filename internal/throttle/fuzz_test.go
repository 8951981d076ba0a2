package throttle_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/internal/throttle"
)

// formatQuota writes q as a 2.9.7 node's four ratelimit-* fields, in the
// node's shape (the usage and concurrency policies of one group).
func formatQuota(q throttle.Quota) map[string]string {
	return map[string]string{
		"ratelimit-limit":        fmt.Sprintf(`%d, %d;policy="%s usage", 150;policy="%s concurrency" `, q.Total, q.Total, q.GroupID, q.GroupID),
		"ratelimit-remaining":    fmt.Sprint(q.Remaining),
		"ratelimit-reset":        fmt.Sprint(q.ResetSeconds),
		"ratelimit-reset-amount": fmt.Sprint(q.ResetAmount),
	}
}

// checkQuotaBounds fails t unless q is within the 2.9.7 client's bounds.
func checkQuotaBounds(t *testing.T, q throttle.Quota, from any) {
	t.Helper()
	switch {
	case q.Total < 1:
		t.Fatalf("%v: total %d < 1", from, q.Total)
	case q.Remaining < 0 || q.Remaining > q.Total-1:
		t.Fatalf("%v: remaining %d outside 0…%d", from, q.Remaining, q.Total-1)
	case q.ResetSeconds < 0 || q.ResetSeconds > throttle.MaxResetSeconds:
		t.Fatalf("%v: reset %d outside 0…%d", from, q.ResetSeconds, throttle.MaxResetSeconds)
	case q.ResetAmount < 1:
		t.Fatalf("%v: reset amount %d < 1", from, q.ResetAmount)
	case q.GroupID == "" || len(q.GroupID) > throttle.MaxGroupIDBytes:
		t.Fatalf("%v: group id of %d bytes (1…%d)", from, len(q.GroupID), throttle.MaxGroupIDBytes)
	case strings.TrimSpace(q.GroupID) != q.GroupID || strings.Contains(q.GroupID, `"`):
		t.Fatalf("%v: group id %q not trimmed or holds a quote", from, q.GroupID)
	}
}

// FuzzParseQuota: the Arweave 2.9.7 client's parse of a reply's
// ratelimit-* fields. Whatever the four values (present or not, any case
// of the names), ParseQuota never panics; what it accepts is within the
// 2.9.7 bounds, re-formats to fields that parse to the same quota, and is
// what Observe learns; what it refuses is a *ParseError of a known kind,
// naming the field when the value is out of range.
func FuzzParseQuota(f *testing.F) {
	for _, s := range [][4]string{
		{`200, 10;policy="general usage", 500;policy="general concurrency" `, "42", "7", "158"},
		{`453, 453;policy="chunk usage", 150;policy="chunk concurrency"`, "0", "86400", "1"},
		{`460, 460;policy="usage", 500;policy="concurrency" `, "449", "1", "11"},
		{`1;policy="g usage"`, "0", "0", "1"},
		{`0;policy="g usage"`, "0", "0", "1"},
		{`10;policy="g usage"`, "10", "0", "1"},
		{`10;policy="g usage"`, "-1", "86401", "0"},
		{`10;policy="g"`, "1", "1", "1"},
		{`10;policy=" usage"`, "1", "1", "1"},
		{`10`, "1", "1", "1"},
		{`9223372036854775807;policy="g concurrency"`, "9223372036854775806", "86400", "9223372036854775807"},
		{`99999999999999999999;policy="g usage"`, "1", "1", "1"},
		{` 5 ;policy="  a b usage  "`, " 4 ", "\t3\t", " 2"},
		{`5;policy="` + strings.Repeat("x", 129) + ` usage"`, "1", "1", "1"},
		{`5;policy="` + strings.Repeat("x", 128) + ` usage"`, "1", "1", "1"},
		{`5;policy="usageusage"`, "1", "1", "1"},
		{`+5;policy="g usage"`, "+1", "0x1", "1e3"},
		{"5;policy=\"\xff\xfe usage\"", "1", "1", "1"},
	} {
		f.Add(s[0], s[1], s[2], s[3], uint8(0))
	}
	f.Add(`5;policy="g usage"`, "1", "1", "1", uint8(0x0f))
	f.Add(`5;policy="g usage"`, "1", "1", "1", uint8(0xf0))
	f.Fuzz(func(t *testing.T, limit, remaining, reset, amount string, flags uint8) {
		names := [4]string{"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-reset-amount"}
		vals := [4]string{limit, remaining, reset, amount}
		h := map[string]string{}
		for i, n := range names {
			if flags&(1<<i) != 0 {
				continue // the field is absent
			}
			if flags&(1<<(4+i)) != 0 {
				n = strings.ToUpper(n) // names compare case-insensitively
			}
			h[n] = vals[i]
		}
		q, err := throttle.ParseQuota(h)
		if err != nil {
			var pe *throttle.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%v: error %T %v is not a *ParseError", h, err, err)
			}
			if pe.Kind > throttle.GroupIDTooLong || pe.Kind.String() == "" {
				t.Fatalf("%v: unknown kind %d", h, pe.Kind)
			}
			if (pe.Kind == throttle.InvalidValue || pe.Kind == throttle.MissingHeader) && !slices.Contains(names[:], pe.Header) {
				t.Fatalf("%v: %v names no field", h, err)
			}
			if pe.Kind == throttle.MissingHeader && flags&0x0f == 0 {
				t.Fatalf("%v: every field present, yet %v", h, err)
			}
			return
		}
		if flags&0x0f != 0 {
			t.Fatalf("%v: a field is missing, yet parsed %+v", h, q)
		}
		checkQuotaBounds(t, q, h)

		// Re-formatted, it parses to the same quota.
		again, err := throttle.ParseQuota(formatQuota(q))
		if err != nil || again != q {
			t.Fatalf("%v parsed to %+v, whose fields %v parse to %+v, %v", h, q, formatQuota(q), again, err)
		}

		// Observe learns exactly that quota; a snapshot carries it over.
		th := newFuzzAdaptive(t)
		if o := th.Observe(fz0, "1.2.3.4:1984", "/info", h); o.Outcome != "learned" || o.Group != q.GroupID {
			t.Fatalf("%v parsed to %+v but Observe says %+v", h, q, o)
		}
		views := th.AdaptiveViews(fz0, 0)
		if len(views) != 1 || !views[0].Known || views[0].Group != q.GroupID || views[0].Total != q.Total ||
			views[0].ResetAmount != q.ResetAmount || views[0].Remaining < 0 || views[0].Remaining >= q.Total {
			t.Fatalf("%v parsed to %+v; the throttle holds %+v", h, q, views)
		}
		b, err := th.MarshalSnapshot(fz0)
		if err != nil {
			t.Fatal(err)
		}
		th2 := newFuzzAdaptive(t)
		if err := th2.RestoreSnapshot(fz0, b); err != nil {
			t.Fatalf("the snapshot of %+v does not restore: %v\n%s", q, err, b)
		}
		want := views
		if !utf8.ValidString(q.GroupID) {
			want = nil // left out of the snapshot, relearned from the next reply
		}
		if got := th2.AdaptiveViews(fz0, 0); !slices.Equal(got, want) {
			t.Fatalf("restored %+v, saved %+v", got, views)
		}
		if o := th2.Observe(fz0, "1.2.3.4:1984", "/info", h); o.Outcome != "learned" {
			t.Fatalf("%v: after a restore, Observe says %+v", h, o)
		}
	})
}

var fz0 = time.UnixMilli(1_700_000_000_000)

func newFuzzAdaptive(t *testing.T) *throttle.Throttle {
	t.Helper()
	cfg := arweaveThrottle()
	cfg.Mode = throttle.ModeAdaptive
	th, err := throttle.New(fz0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// FuzzCheckSnapshot: a throttle snapshot as read back from the store.
// CheckSnapshot never panics and names what is wrong ("throttle…");
// RestoreSnapshot refuses exactly what CheckSnapshot refuses; what
// restores holds only quotas within the 2.9.7 bounds, and its own
// snapshot checks and restores to the same state.
func FuzzCheckSnapshot(f *testing.F) {
	for _, s := range []string{
		`{"taken_at_ms":1700000000000,"enabled":true,"keys":[{"peer":"1.2.3.4:1984","type":"chunk","timestamps":[1699999999000,1699999999500]}]}`,
		`{"taken_at_ms":0,"enabled":false,"keys":null}`,
		`{"keys":[{"peer":"","type":"chunk","timestamps":[]}]}`,
		`{"keys":[{"peer":"p","type":"","timestamps":[]}]}`,
		`{"keys":[{"peer":"p","type":"t","timestamps":[3,2,1]}]}`,
		`{"keys":[{"peer":"p","type":"t","timestamps":"x"}]}`,
		`{"taken_at_ms":"soon"}`,
		`{"taken_at_ms":9223372036854775807,"keys":[{"peer":"p","type":"chunk","timestamps":[-9223372036854775808,9223372036854775807]}]}`,
		`{"enabled":true,"adaptive":{"peers":[{"peer":"1.2.3.4:1984","routes":{"/info":"general"},"quotas":[{"group":"general","total":10,"remaining":3,"reset_amount":5,"reset_seconds":2,"refill_at_ms":1700000001000,"updated_ms":1700000000000}]}]}}`,
		`{"adaptive":{"peers":[{"peer":"p","routes":{"/info":"g"},"quotas":[{"group":"g","total":10,"remaining":3,"reset_amount":0,"reset_seconds":2,"updated_ms":1}]}]}}`,
		`{"adaptive":{"peers":[{"peer":"p","routes":{"/info":"g"},"quotas":[{"group":"g","total":1,"remaining":1,"reset_amount":1,"reset_seconds":86401}]}]}}`,
		`{"adaptive":{"peers":[{"peer":"p","incompatible":true,"routes":{"/info":"g"}}]}}`,
		`{"adaptive":"garbage"}`,
		`{"adaptive":{"peers":[{"peer":"p","routes":{"/info":""}}]}}`,
		`[]`, `null`, ``, `{`, `{"keys":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkErr := throttle.CheckSnapshot(b)
		th := newFuzzAdaptive(t)
		err := th.RestoreSnapshot(fz0, b)
		if (err == nil) != (checkErr == nil) {
			t.Fatalf("%q: CheckSnapshot %v, RestoreSnapshot %v", b, checkErr, err)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "throttle") || err.Error() != checkErr.Error() {
				t.Fatalf("%q: error %q names nothing (or differs from CheckSnapshot's %q)", b, err, checkErr)
			}
			return
		}
		views := th.AdaptiveViews(fz0, 0)
		for _, v := range views {
			if !v.Known {
				continue
			}
			// A refill that fell due restores min(total, remaining+amount)
			// and leaves none pending (amount 0): remaining may then be the
			// whole total, as in 2.9.7's client.
			remaining, amount := v.Remaining, v.ResetAmount
			if remaining == v.Total {
				remaining--
			}
			if amount == 0 && v.RefillIn == 0 {
				amount = 1
			}
			checkQuotaBounds(t, throttle.Quota{GroupID: v.Group, Total: v.Total, Remaining: remaining,
				ResetAmount: amount, ResetSeconds: 0}, string(b))
		}
		again, err := th.MarshalSnapshot(fz0)
		if err != nil {
			t.Fatal(err)
		}
		if err := throttle.CheckSnapshot(again); err != nil {
			t.Fatalf("%q restored, but its own snapshot fails the check: %v\n%s", b, err, again)
		}
		th2 := newFuzzAdaptive(t)
		if err := th2.RestoreSnapshot(fz0, again); err != nil {
			t.Fatal(err)
		}
		if got := th2.AdaptiveViews(fz0, 0); !slices.Equal(got, views) {
			t.Fatalf("%q: restored %+v; its snapshot restores %+v", b, views, got)
		}
		s1, s2 := th.Snapshot(fz0), th2.Snapshot(fz0)
		sortKeys(s1.Keys)
		sortKeys(s2.Keys)
		if !slices.EqualFunc(s1.Keys, s2.Keys, func(a, b throttle.KeyRecord) bool {
			return a.Peer == b.Peer && a.Type == b.Type && slices.Equal(a.Timestamps, b.Timestamps)
		}) || s1.Enabled != s2.Enabled {
			t.Fatalf("%q: keys %+v re-restore as %+v", b, s1, s2)
		}
	})
}

func sortKeys(k []throttle.KeyRecord) {
	slices.SortFunc(k, func(a, b throttle.KeyRecord) int {
		if c := strings.Compare(a.Peer, b.Peer); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
}
