package store_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter/peer"
)

func offense(addr string, group string, n uint64, first, last time.Time) live.Offense {
	return live.Offense{Peer: peer.KeyFromAddr(netip.MustParseAddr(addr), 64), Group: group, Rejections: n, First: first, Last: last}
}

// TestOffenses: the record sums a (peer, group)'s rejections over the last
// 24 hours, keeps its first and last rejection, survives a reopen, and
// forgets it a day after its last rejection.
func TestOffenses(t *testing.T) {
	path := t.TempDir() + "/limiterd.db"
	db := MustOpenDBAt(t, path, store.Options{})
	a, b := "203.0.113.9", "2001:db8::7"
	if err := db.AddOffenses(ctx, t0, []live.Offense{
		offense(a, "general", 10, t0.Add(-50*time.Second), t0.Add(-40*time.Second)),
		offense(a, "chunk", 3, t0.Add(-30*time.Second), t0.Add(-20*time.Second)),
		offense(b, "general", 7, t0.Add(-10*time.Second), t0),
		offense(b, "bad\x00group", 7, t0, t0), // not a group name: skipped
		offense(b, "metrics", 0, t0, t0),      // nothing: skipped
	}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(3 * time.Hour)
	if err := db.AddOffenses(ctx, t1, []live.Offense{offense(a, "general", 5, t1.Add(-time.Second), t1)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = MustOpenDBAt(t, path, store.Options{})
	got, err := db.Offenses(ctx, t1, peer.KeyFromAddr(netip.MustParseAddr(a), 64))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Group != "chunk" || got[0].Rejections != 3 || got[1].Group != "general" || got[1].Rejections != 15 ||
		!got[1].First.Equal(t0.Add(-50*time.Second)) || !got[1].Last.Equal(t1) {
		t.Fatalf("a's record: %+v", got)
	}
	recent, total, err := db.RecentOffenses(ctx, t1, 2)
	if err != nil || total != 3 || len(recent) != 2 || recent[0].Group != "general" || !recent[0].Last.Equal(t1) || recent[1].Rejections != 7 {
		t.Fatalf("recent: %+v %d %v", recent, total, err)
	}
	// 24 hours after t0 the first batch no longer counts: a's general
	// keeps the 5 of t1, b is gone from the reads, and from the file at
	// the next write.
	t2 := t0.Add(24*time.Hour + time.Minute)
	got, _ = db.Offenses(ctx, t2, peer.KeyFromAddr(netip.MustParseAddr(a), 64))
	if len(got) != 1 || got[0].Rejections != 5 {
		t.Fatalf("a after a day: %+v", got)
	}
	if got, _ := db.Offenses(ctx, t2, peer.KeyFromAddr(netip.MustParseAddr(b), 64)); len(got) != 0 {
		t.Fatalf("b after a day: %+v", got)
	}
	if err := db.AddOffenses(ctx, t2, []live.Offense{offense(b, "general", 1, t2, t2)}); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Offenses(ctx, t2, peer.KeyFromAddr(netip.MustParseAddr(b), 64))
	if len(got) != 1 || got[0].Rejections != 1 || !got[0].First.Equal(t2) {
		t.Fatalf("b again, its first rejection forgotten: %+v", got)
	}
	if _, total, _ := db.RecentOffenses(ctx, t2, 10); total != 2 {
		t.Fatalf("after the prune: %d records", total)
	}
}

// TestOffensesCapped: beyond store.MaxOffenders the (peer, group)s
// rejected longest ago are dropped.
func TestOffensesCapped(t *testing.T) {
	db := MustOpenDB(t)
	var batch []live.Offense
	for i := range store.MaxOffenders + 50 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch, offense(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "general", 1, at, at))
	}
	if err := db.AddOffenses(ctx, t0.Add(time.Minute), batch); err != nil {
		t.Fatal(err)
	}
	recent, total, err := db.RecentOffenses(ctx, t0.Add(time.Minute), store.MaxOffenders+100)
	if err != nil || total != store.MaxOffenders {
		t.Fatalf("%d kept, %v", total, err)
	}
	if oldest := recent[len(recent)-1]; !oldest.Last.Equal(t0.Add(50 * time.Millisecond)) {
		t.Fatalf("oldest kept %v", oldest.Last)
	}
}
