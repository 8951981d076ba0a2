package store_test

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// benchN is the population of the benchmarks: limiterd's default
// peers.max_tracked.
const benchN = 1_000_000

// benchEntries returns n token-only entries of the general group (what a
// busy node's limiter mostly holds), random IPv4 peers, in random order as
// limiter.SnapshotDelta produces them.
func benchEntries(n int) []limiter.EntrySnapshot {
	rng := rand.New(rand.NewPCG(7, 7))
	seen := make(map[uint32]bool, n)
	out := make([]limiter.EntrySnapshot, 0, n)
	now := t0.Unix()
	for len(out) < n {
		ip := rng.Uint32()
		if seen[ip] {
			continue
		}
		seen[ip] = true
		p := peer.KeyFromAddr(netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), 64)
		out = append(out, limiter.EntrySnapshot{
			Peer: p, Group: "general", InTokens: true,
			Tokens: 1 + rng.Int64N(450), LeakyTick: 59_000 + rng.Int64N(2),
			Requests: uint64(1 + rng.IntN(5000)), LastSeen: now - rng.Int64N(3600),
		})
	}
	return out
}

// benchDB opens a new database (not checked at cleanup: the benchmarks
// close it themselves).
func benchDB(b *testing.B) (*store.DB, string) {
	path := filepath.Join(b.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return db, path
}

// BenchmarkSaveDeltaFull saves a full delta of a million entries: into an
// empty database (the first save), and over a stored million whose every
// value changed (the worst case of the full save after a restart).
func BenchmarkSaveDeltaFull(b *testing.B) {
	entries := benchEntries(benchN)
	b.Run("empty", func(b *testing.B) {
		var size, base int64
		for b.Loop() {
			b.StopTimer()
			db, path := benchDB(b)
			b.StartTimer()
			st, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Enabled: true, Groups: groups(), Changed: entries})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			size, base = db.Size(), st.BaseBytes
			db.Close()
			os.Remove(path)
			b.StartTimer()
		}
		b.ReportMetric(float64(size)/benchN, "bytes/entry")
		b.ReportMetric(float64(base)/benchN, "base-bytes/entry")
	})
	b.Run("rewrite", func(b *testing.B) {
		db, _ := benchDB(b)
		defer db.Close()
		d := limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Enabled: true, Groups: groups(), Changed: entries}
		if _, err := db.SaveDelta(ctx, d); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			for i := range entries {
				entries[i].LeakyTick++
			}
			b.StartTimer()
			st, err := db.SaveDelta(ctx, d)
			if err != nil {
				b.Fatal(err)
			}
			if st.Written != benchN {
				b.Fatalf("%d written", st.Written)
			}
		}
		b.ReportMetric(float64(db.Size())/benchN, "bytes/entry")
	})
}

// BenchmarkSaveDeltaChurn saves 1 % churn over a stored million: 10 000
// entries changed (of which 1 000 new) and 1 000 deleted per delta.
func BenchmarkSaveDeltaChurn(b *testing.B) {
	const changed, deleted = 10_000, 1_000
	all := benchEntries(benchN + deleted)
	stored := all[:benchN]
	spare := all[benchN:] // entries not stored, to create
	db, path := benchDB(b)
	defer MustCheckFile(b, path)
	defer db.Close()
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Groups: groups(), Changed: stored}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var st store.SaveStats
	for b.Loop() {
		b.StopTimer()
		d := churnDelta(rng, stored, spare, changed, deleted)
		b.StartTimer()
		var err error
		if st, err = db.SaveDelta(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Bytes)/benchN, "bytes/entry")
	b.ReportMetric(float64(st.LogBytes)/float64(st.LogRecords), "log-bytes/save")
}

// churnDelta returns a delta of changed entries of stored, of which
// deleted are deletions of stored entries replaced by new ones from spare
// (the entries deleted go to spare).
func churnDelta(rng *rand.Rand, stored, spare []limiter.EntrySnapshot, changed, deleted int) limiter.Delta {
	d := limiter.Delta{TakenAt: t0.UnixMilli(), Groups: groups()}
	// A slot is replaced at most once: a delta cannot say "create, then
	// delete" (its deletions apply first).
	replaced := make(map[int]bool, deleted)
	for range deleted {
		j := rng.IntN(len(stored))
		for replaced[j] {
			j = rng.IntN(len(stored))
		}
		replaced[j] = true
		k := rng.IntN(len(spare))
		d.Deleted = append(d.Deleted, limiter.EntryRef{Peer: stored[j].Peer, Group: stored[j].Group})
		stored[j], spare[k] = spare[k], stored[j]
		d.Changed = append(d.Changed, stored[j])
	}
	for range changed - deleted {
		e := &stored[rng.IntN(len(stored))]
		e.Tokens = 1 + rng.Int64N(450)
		e.Requests++
		d.Changed = append(d.Changed, *e)
	}
	return d
}

// fullLog returns a database holding a million entries as a base and a
// log just past the point where SaveDelta asks for compaction (more than a
// third of the base): the largest log a daemon keeps, made of 1 % churn
// deltas (10 000 entries changed, of which 1 000 replaced).
func fullLog(b *testing.B) (*store.DB, []limiter.EntrySnapshot, store.SaveStats) {
	all := benchEntries(benchN + 100_000)
	stored, spare := all[:benchN], all[benchN:]
	db, _ := benchDB(b)
	st, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Groups: groups(), Changed: stored})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for !st.Compact {
		if st, err = db.SaveDelta(ctx, churnDelta(rng, stored, spare, 10_000, 1_000)); err != nil {
			b.Fatal(err)
		}
	}
	return db, stored, st
}

// BenchmarkSaveDeltaCompact is the full save a daemon makes when the log
// asks for compaction: a million entries over the base and the largest
// log.
func BenchmarkSaveDeltaCompact(b *testing.B) {
	db, stored, before := fullLog(b)
	defer db.Close()
	for b.Loop() {
		st, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Groups: groups(), Changed: stored})
		if err != nil || st.LogBytes != 0 || st.Written != benchN {
			b.Fatalf("%+v, %v", st, err)
		}
	}
	b.ReportMetric(float64(before.LogRecords), "log-records")
	b.ReportMetric(float64(before.LogBytes)/float64(before.BaseBytes), "log/base")
	b.ReportMetric(float64(db.Size())/benchN, "bytes/entry")
}

// BenchmarkCompact is what a daemon does when the log asks for it: fold
// the largest log into the base of a million entries, from the stored
// records alone. Each iteration compacts a fresh copy of that database.
func BenchmarkCompact(b *testing.B) {
	db, _, before := fullLog(b)
	src := db.Path()
	db.Close()
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	var heap uint64
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "copy.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		db, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		st, err := db.Compact(ctx)
		b.StopTimer()
		runtime.ReadMemStats(&m1)
		heap = m1.TotalAlloc - m0.TotalAlloc
		if err != nil || st.LogBytes != 0 || st.Written != benchN {
			b.Fatalf("%+v, %v", st, err)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(before.LogRecords), "log-records")
	b.ReportMetric(float64(heap)/1e6, "MB-allocated")
}

func BenchmarkLoadSnapshot(b *testing.B) {
	db, _ := benchDB(b)
	defer db.Close()
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Groups: groups(), Changed: benchEntries(benchN)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		snap, rep, err := db.LoadSnapshot(ctx)
		if err != nil || rep.Entries != benchN || len(snap.Entries) != benchN {
			b.Fatalf("%d entries, %+v, %v", len(snap.Entries), rep, err)
		}
	}
	b.ReportMetric(float64(db.Size())/benchN, "bytes/entry")
}

// BenchmarkLoadSnapshotLog loads a million entries from the base and the
// largest log (the worst case of a load).
func BenchmarkLoadSnapshotLog(b *testing.B) {
	db, _, st := fullLog(b)
	defer db.Close()
	for b.Loop() {
		snap, rep, err := db.LoadSnapshot(ctx)
		if err != nil || rep.Entries != benchN || rep.Skipped != 0 {
			b.Fatalf("%d entries, %+v, %v", len(snap.Entries), rep, err)
		}
	}
	b.ReportMetric(float64(st.LogRecords), "log-records")
	b.ReportMetric(float64(st.LogBytes)/float64(st.BaseBytes), "log/base")
	b.ReportMetric(float64(db.Size())/benchN, "bytes/entry")
}

// BenchmarkOpen is the cost of opening (and verifying) a stored million.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "limiterd.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.SaveDelta(ctx, limiter.Delta{Full: true, TakenAt: t0.UnixMilli(), Groups: groups(), Changed: benchEntries(benchN)}); err != nil {
		b.Fatal(err)
	}
	db.Close()
	for b.Loop() {
		db, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
}
