package bench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// BenchmarkDecideDuringSnapshot measures Decide's p99 at rest and while a
// full snapshot of 1 000 000 entries is taken and written to bbolt, in one
// run (target: p99 during ≤ 2× p99 at rest).
func BenchmarkDecideDuringSnapshot(b *testing.B) {
	const n = 1_000_000
	ps := peers(n)
	for i := 0; i < b.N; i++ {
		l, g := arweave(b)
		for j, p := range ps {
			d := l.Decide(clock(j), p, g)
			d.Release()
		}
		db, err := store.Open(filepath.Join(b.TempDir(), "limiterd.db"), store.Options{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		measure := func(stop func() bool) []time.Duration {
			lat := make([]time.Duration, 0, 1<<22) // no allocation (and GC) while measuring
			for j := 0; !stop(); j++ {
				s := time.Now()
				d := l.Decide(clock(n+j), ps[(j*7919)%n], g)
				lat = append(lat, time.Since(s))
				d.Release()
			}
			slices.Sort(lat)
			return lat
		}
		// At rest: as many decisions as the snapshot will see, about.
		restEnd := time.Now().Add(500 * time.Millisecond)
		rest := measure(func() bool { return time.Now().After(restEnd) })

		var done atomic.Bool
		start := time.Now()
		var saveErr error
		go func() {
			_, saveErr = db.SaveDelta(context.Background(), l.SnapshotDelta(time.Now(), true))
			done.Store(true)
		}()
		during := measure(done.Load)
		took := time.Since(start)
		if saveErr != nil {
			b.Fatal(saveErr)
		}
		db.Close()
		p99 := func(l []time.Duration) float64 { return float64(l[len(l)*99/100].Nanoseconds()) }
		b.ReportMetric(p99(rest), "p99-rest-ns")
		b.ReportMetric(p99(during), "p99-snapshot-ns")
		b.ReportMetric(p99(during)/p99(rest), "p99-ratio")
		b.ReportMetric(float64(during[len(during)-1].Microseconds()), "max-snapshot-µs")
		b.ReportMetric(float64(len(during)), "decides-during")
		b.ReportMetric(float64(took.Milliseconds()), "snapshot-ms")
	}
}

// BenchmarkRestore1M measures a restart's restore of 1 000 000 entries:
// reading the snapshot from bbolt and installing it in a new limiter with
// Restore (target ≤ 1 s), a second after it was taken (before the next
// leaky tick, which would drain these one-token entries); then the first
// save, which the daemon makes in the background once it serves: an
// incremental delta of every restored entry and, as the store then asks, a
// compaction.
func BenchmarkRestore1M(b *testing.B) {
	const n = 1_000_000
	ps := peers(n)
	l, g := arweave(b)
	for j, p := range ps {
		d := l.Decide(clock(j), p, g)
		d.Release()
	}
	path := filepath.Join(b.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.SaveDelta(ctx, l.SnapshotDelta(clock(n), true)); err != nil {
		b.Fatal(err)
	}
	db.Close()
	var load, restore, save time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		db, err := store.Open(path, store.Options{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		snap, _, err := db.LoadSnapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		load += time.Since(start)
		r, _ := arweave(b)
		s := time.Now()
		if _, err := r.Restore(clock(n).Add(time.Second), snap); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(s)
		if r.Tracked() != n {
			b.Fatalf("restored %d entries, want %d", r.Tracked(), n)
		}
		s = time.Now()
		st, err := db.SaveDelta(ctx, r.SnapshotDelta(clock(n).Add(time.Second), false))
		if err == nil && st.Compact {
			_, err = db.Compact(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		save += time.Since(s)
		db.Close()
	}
	b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "open+load-ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(float64(save.Milliseconds())/float64(b.N), "first-save-ms")
}

// BenchmarkRestoreWindow restores one peer whose window holds n
// timestamps, in order and newest first (a snapshot from anywhere may
// list them so): the restore sorts before it fills the ring, so both
// take O(n log n) at worst, where inserting each in turn made the newest-
// first window quadratic (200 000 timestamps: 38 s). ns/op is per restore.
func BenchmarkRestoreWindow(b *testing.B) {
	for _, n := range []int{50_000, 200_000} {
		for _, order := range []string{"ascending", "descending"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, order), func(b *testing.B) {
				g := limiter.ArweaveGroups()[limiter.GroupGeneral]
				g.SlidingWindowLimit, g.SlidingWindowDuration, g.CleanupExpiry = int64(n), 3_600_000, 7_200_000
				cfg := limiter.Config{Groups: map[string]limiter.GroupSettings{limiter.GroupGeneral: g}}
				ts := make([]int64, n)
				for i := range ts {
					ts[i] = t0.UnixMilli() + int64(i)
				}
				if order == "descending" {
					slices.Reverse(ts)
				}
				p := peers(1)[0]
				now := t0.Add(time.Duration(n) * time.Millisecond)
				window := make([]int64, n)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					l, err := limiter.New(memory.New(), now, cfg)
					if err != nil {
						b.Fatal(err)
					}
					copy(window, ts) // the restore may sort its input
					snap := l.Snapshot(now)
					snap.Entries = []limiter.EntrySnapshot{{Peer: p.Key, Group: limiter.GroupGeneral, Window: window, LastSeen: now.Unix()}}
					b.StartTimer()
					if rep, err := l.Restore(now, snap); err != nil || rep.Loaded != 1 {
						b.Fatalf("restore: %+v %v", rep, err)
					}
				}
			})
		}
	}
}
