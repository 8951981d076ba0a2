package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/redistest"
)

var t0 = time.UnixMilli(1_800_000_000_000)

// summary is a summary of instance id at at, with a busy offender.
func summary(id string, at time.Time, rejected float64) fleet.Summary {
	return fleet.Summary{
		Schema: fleet.Schema, Instance: id, Version: "v1.2.0", Config: "cfg-a", At: at.UnixMilli(), Started: at.Add(-time.Hour).UnixMilli(),
		Window: 30,
		Groups: []fleet.Group{{Name: "general", Requests: 100 + rejected, Rejected: rejected}, {Name: "chunk", Requests: 10}},
		Top:    []fleet.Offender{{Peer: "203.0.113.7", Group: "general", Requests: rejected + 1, Rejected: rejected}},
		Node:   fleet.Node{Up: true, Requests: 100, P50: 2, P99: 9},
		Daemon: fleet.Daemon{Backend: "redis", BackendUp: true, DBBytes: 1 << 20},
	}
}

// TestEncodeBound: a summary with long offender lists is cut to fit
// MaxBytes, and decodes.
func TestEncodeBound(t *testing.T) {
	s := summary("a", t0, 5)
	s.Top = nil
	for i := range 500 {
		s.Top = append(s.Top, fleet.Offender{Peer: fmt.Sprintf("2001:db8:%x::/64", i) + strings.Repeat("x", 200), Group: "general", Rejected: float64(500 - i)})
	}
	b, err := fleet.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > fleet.MaxBytes {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := fleet.Decode("a", b, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Top) == 0 || len(got.Top) > fleet.MaxTop || got.Top[0].Rejected != 500 {
		t.Fatalf("top %d, first %+v", len(got.Top), got.Top[:1])
	}
	// Without a way to fit, an error.
	s.Groups = nil
	for i := range fleet.MaxGroups {
		s.Groups = append(s.Groups, fleet.Group{Name: strings.Repeat("g", 290) + fmt.Sprint(i)})
	}
	if _, err := fleet.Encode(s); err == nil {
		t.Fatal("a summary over the bound without offenders encoded")
	}
}

// TestDecodeHostile: another version's summary, wrong types, lists and
// texts beyond their bounds, negative rates, a far future time, a summary
// naming another instance: each skipped with its reason; a clock a few
// seconds off is kept (shown with a warning, TestViewClockAndDrift).
func TestDecodeHostile(t *testing.T) {
	good, _ := json.Marshal(summary("a", t0, 5))
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	many := make([]any, 10000)
	for i := range many {
		many[i] = map[string]any{"peer": "x", "group": "g"}
	}
	cases := []struct {
		name, reason string
		b            []byte
	}{
		{"too large", fleet.SkipSize, bytes.Repeat([]byte(" "), fleet.MaxBytes+1)},
		{"not JSON", fleet.SkipSchema, []byte("\x00\x01garbage")},
		{"an array", fleet.SkipSchema, []byte(`[1,2,3]`)},
		{"another version", fleet.SkipSchema, edit(func(m map[string]any) { m["schema"] = 2 })},
		{"no version", fleet.SkipSchema, edit(func(m map[string]any) { delete(m, "schema") })},
		{"a version as text", fleet.SkipSchema, edit(func(m map[string]any) { m["schema"] = "1" })},
		{"groups as text", fleet.SkipShape, edit(func(m map[string]any) { m["groups"] = "general" })},
		{"a rate as text", fleet.SkipShape, edit(func(m map[string]any) { m["groups"].([]any)[0].(map[string]any)["requests"] = "lots" })},
		{"a huge list", fleet.SkipShape, edit(func(m map[string]any) { m["top"] = many[:fleet.MaxTop+1] })},
		{"a long text", fleet.SkipShape, edit(func(m map[string]any) { m["version"] = strings.Repeat("v", fleet.MaxText+1) })},
		{"a negative rate", fleet.SkipShape, edit(func(m map[string]any) { m["node"].(map[string]any)["errors_5xx"] = -3 })},
		{"a time overflowing", fleet.SkipShape, edit(func(m map[string]any) { m["at"] = 1e30 })},
		{"no time", fleet.SkipTime, edit(func(m map[string]any) { m["at"] = 0 })},
		{"a far future", fleet.SkipTime, edit(func(m map[string]any) { m["at"] = t0.Add(48 * time.Hour).UnixMilli() })},
		{"another name", fleet.SkipName, edit(func(m map[string]any) { m["instance"] = "b" })},
	}
	for _, c := range cases {
		_, err := fleet.Decode("a", c.b, t0)
		var sk *fleet.Skipped
		if !errorsAs(err, &sk) || sk.Reason != c.reason {
			t.Errorf("%s: %v, want a skip for %s", c.name, err, c.reason)
		}
	}
	if _, err := fleet.Decode("a", edit(func(m map[string]any) { m["at"] = t0.Add(30 * time.Second).UnixMilli() }), t0); err != nil {
		t.Errorf("a clock 30 s ahead: %v", err)
	}
	if _, err := fleet.Decode("a", good, t0); err != nil {
		t.Errorf("good: %v", err)
	}
}

func errorsAs(err error, sk **fleet.Skipped) bool {
	s, ok := err.(*fleet.Skipped)
	*sk = s
	return ok
}

// TestView: the fleet's totals and top lists add the instances that are
// up; a silent one is listed, not counted; the viewer first.
func TestView(t *testing.T) {
	self := summary("b", t0, 10)
	others := []fleet.Summary{summary("a", t0.Add(-time.Second), 30), summary("c", t0.Add(-20*time.Second), 1000), summary("b", t0.Add(-time.Minute), 99)}
	v := fleet.NewView(self, others, t0, true)
	if len(v.Instances) != 3 || !v.Instances[0].Self || v.Instances[0].Instance != "b" || v.Instances[1].Instance != "a" || v.Instances[2].Instance != "c" {
		t.Fatalf("instances %+v", v.Instances)
	}
	if !v.Instances[1].Up || v.Instances[2].Up || v.Instances[2].Age != 20*time.Second {
		t.Fatalf("up %v %v, age %v", v.Instances[1].Up, v.Instances[2].Up, v.Instances[2].Age)
	}
	if len(v.Groups) != 2 || v.Groups[1].Name != "general" || v.Groups[1].Rejected != 40 || v.Groups[1].Requests != 240 {
		t.Fatalf("groups %+v", v.Groups)
	}
	if len(v.TopRejected) != 1 || v.TopRejected[0].Rejected != 40 || strings.Join(v.TopRejected[0].Instances, ",") != "b,a" {
		t.Fatalf("top %+v", v.TopRejected)
	}
	if got := v.Find("203.0.113.7"); len(got) != 1 || got[0].Rejected != 40 {
		t.Fatalf("find %+v", got)
	}
	ps := v.Problems(t0)
	if len(ps) != 1 || ps[0].Instance != "c" || ps[0].Title != "instance silent" {
		t.Fatalf("problems %+v", ps)
	}
}

// TestViewClockAndDrift: an instance whose clock is off, by its own
// measure or dated ahead, and one of another configuration, are shown
// with a warning.
func TestViewClockAndDrift(t *testing.T) {
	self := summary("a", t0, 0)
	off := summary("b", t0.Add(5*time.Second), 0) // made now, by a clock 5 s ahead
	off.ClockOffset = 5000
	jumped := summary("c", t0.Add(30*time.Second), 0) // ahead, not measured yet
	drift := summary("d", t0, 0)
	drift.Config = "cfg-b"
	v := fleet.NewView(self, []fleet.Summary{off, jumped, drift}, t0, true)
	if got := v.Instances[1]; got.ClockOff != 5*time.Second || !got.Up || got.Age != 0 {
		t.Fatalf("b: off %v, up %v, age %v", got.ClockOff, got.Up, got.Age)
	}
	if got := v.Instances[2]; got.ClockOff != 30*time.Second {
		t.Fatalf("c: off %v", got.ClockOff)
	}
	if !v.Instances[3].Drift || v.Instances[1].Drift {
		t.Fatal("drift")
	}
	var titles []string
	for _, p := range v.Problems(t0) {
		titles = append(titles, p.Instance+":"+p.Title)
	}
	if got := strings.Join(titles, ","); got != "b:clock off,c:clock off,d:configuration differs" {
		t.Fatalf("problems %s", got)
	}
}

// TestSummaryProblems: what an instance's own summary says is wrong.
func TestSummaryProblems(t *testing.T) {
	s := summary("a", t0, 0)
	s.Node = fleet.Node{Up: false, Error: "dial tcp: connection refused"}
	s.Daemon.ReloadAt, s.Daemon.ReloadError = t0.Add(-time.Minute).UnixMilli(), "config: bad key"
	s.Daemon.SnapshotAt, s.Daemon.SnapshotFailedAt, s.Daemon.SnapshotError = t0.Add(-time.Minute).UnixMilli(), t0.Add(-time.Second).UnixMilli(), "disk full"
	s.Daemon.BackendUp, s.Daemon.BackendSince, s.Daemon.BackendReason = false, t0.Add(-time.Hour).UnixMilli(), "connection: refused"
	var titles []string
	for _, p := range s.Problems(t0) {
		if !p.Bad {
			t.Errorf("%s not red", p.Title)
		}
		titles = append(titles, p.Title)
	}
	if got := strings.Join(titles, ","); got != "node down,reload refused,snapshot failing,Redis down" {
		t.Fatalf("problems %s", got)
	}
	s = summary("a", t0, 0)
	s.Node.Requests, s.Node.Errors5xx = 100, 6
	s.Daemon.SnapshotEvery, s.Daemon.SnapshotAt = 5000, t0.Add(-time.Minute).UnixMilli()
	titles = nil
	for _, p := range s.Problems(t0) {
		titles = append(titles, p.Title)
	}
	if got := strings.Join(titles, ","); got != "node errors,snapshot late" {
		t.Fatalf("problems %s", got)
	}
	// Its figures written as the pages write them.
	s = summary("a", t0, 0)
	s.Node.Requests, s.Node.Errors5xx = 4955, 4855
	if p := s.Problems(t0); len(p) != 1 || p[0].Text != "98 % of its answers are 5xx (4 855/s) over the last minute" {
		t.Fatalf("problems %+v", p)
	}
}

// TestRedisBoard: two instances publish to a real Redis and each reads
// the other; a stopped one leaves at TTL; a hostile summary written
// beside them is skipped, logged once and counted, and the view stands.
func TestRedisBoard(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	board := fleet.NewRedisBoard(rdb)
	ctx := context.Background()
	pa := fleet.NewPublisher(board, "a", func(now time.Time) fleet.Summary { return summary("", now, 7) }, nil, nil)
	pb := fleet.NewPublisher(board, "b", func(now time.Time) fleet.Summary { return summary("", now, 3) }, nil, nil)
	for _, p := range []*fleet.Publisher{pa, pb} {
		if err := p.Publish(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := pa.Stats(); st.Writes != 1 || st.Bytes <= 0 || st.Bytes > fleet.MaxBytes || st.ClockOffset < -1000 || st.ClockOffset > 1000 {
		t.Fatalf("publisher stats %+v", st)
	}
	var logs bytes.Buffer
	r := fleet.NewReader(board, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	v := r.View(ctx, summary("a", time.Now(), 7))
	if len(v.Instances) != 2 || v.Instances[1].Instance != "b" || !v.Instances[1].Up || v.Error != "" {
		t.Fatalf("view %+v", v)
	}
	if len(v.TopRejected) != 1 || v.TopRejected[0].Rejected != 10 {
		t.Fatalf("top %+v", v.TopRejected)
	}
	// A hostile summary under its own id: skipped, the others shown.
	if err := rdb.Set(ctx, "ld:{fleet}:i:evil", `{"schema":1,"instance":"evil","groups":"all of them"}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.SAdd(ctx, "ld:{fleet}:ids", "evil")
	r2 := fleet.NewReader(board, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	v = r2.View(ctx, summary("a", time.Now(), 7))
	if len(v.Instances) != 2 || len(v.Skipped) != 1 || v.Skipped[0].Instance != "evil" || v.Skipped[0].Reason != fleet.SkipShape {
		t.Fatalf("with a hostile summary: %d instances, skipped %+v", len(v.Instances), v.Skipped)
	}
	if n := r2.SkippedCounts()[fleet.SkipShape]; n != 1 {
		t.Fatalf("skipped %d", n)
	}
	if strings.Count(logs.String(), "summary in Redis was skipped") != 1 || !strings.Contains(logs.String(), "instance=evil") {
		t.Fatalf("log %q", logs.String())
	}
	// b stops: once its key expires it leaves the fleet, and the set.
	srv.Stop()
	srv = redistest.Start(t) // a fresh Redis: nothing survives
	rdb2 := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb2.Close()
	board2 := fleet.NewRedisBoard(rdb2)
	if _, err := board2.Put(ctx, "b", mustEncode(t, summary("b", time.Now(), 3))); err != nil {
		t.Fatal(err)
	}
	rdb2.PExpire(ctx, "ld:{fleet}:i:b", 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	_, got, _, err := board2.List(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("after b's TTL: %v %v", got, err)
	}
	if n := rdb2.SCard(ctx, "ld:{fleet}:ids").Val(); n != 0 {
		t.Fatalf("%d ids left", n)
	}
	// Redis gone: the reader says so, the view is the viewer's.
	srv.Stop()
	r3 := fleet.NewReader(board2, nil, nil)
	v = r3.View(ctx, summary("a", time.Now(), 7))
	if v.Error == "" || len(v.Instances) != 1 {
		t.Fatalf("Redis down: %+v", v)
	}
}

func mustEncode(t testing.TB, s fleet.Summary) []byte {
	t.Helper()
	b, err := fleet.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
