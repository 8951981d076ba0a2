package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"go.etcd.io/bbolt"
)

// storedSlot is one value of a saved database, as bbolt holds it.
type storedSlot struct {
	bucket, key, value []byte
}

// fuzzDB is a real database holding a limiter's snapshot (a base and a
// log), live settings of every kind and a throttle state, with the list of
// its values; fsync is off, for speed.
type fuzzDB struct {
	db    *DB
	now   time.Time
	cfg   limiter.Config
	slots []storedSlot
	logs  bytes.Buffer // what the loads log
}

func newFuzzDB(tb testing.TB) *fuzzDB {
	tb.Helper()
	ctx := context.Background()
	f := &fuzzDB{}
	db, err := Open(filepath.Join(tb.TempDir(), "limiterd.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	db.bolt.NoSync = true
	db.log = slog.New(slog.NewTextHandler(&f.logs, nil))
	now := time.Unix(1_700_000_000, 0)
	cfg := limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}
	lim, err := limiter.New(memory.New(), now, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	// Traffic in several groups and algorithms' state, saved in full (the
	// base), then more of it saved as a delta (the log).
	decide := func(at time.Time, n int) {
		for i := range n {
			p, _ := lim.ParsePeer(fmt.Sprintf("192.0.2.%d", i%7))
			if i%3 == 0 {
				p, _ = lim.ParsePeer(fmt.Sprintf("2001:db8:%x::1", i))
			}
			d := lim.Check(at, limiter.Request{Method: "GET", Path: []string{"/info", "/chunk/1", "/data_sync_record/1/2", "/tx/abc"}[i%4], Peer: p})
			if i%2 == 0 {
				d.Release()
			}
		}
	}
	decide(now, 40)
	if _, err := db.SaveDelta(ctx, lim.SnapshotDelta(now, true)); err != nil {
		tb.Fatal(err)
	}
	later := now.Add(1500 * time.Millisecond)
	decide(later, 25)
	if _, err := db.SaveDelta(ctx, lim.SnapshotDelta(later, false)); err != nil {
		tb.Fatal(err)
	}
	a := live.AuditEntry{Time: now, Actor: "fuzz", Action: "test"}
	if err := db.SetOverride(ctx, "general", live.Override{"leaky_limit": int64(5), "mode": "dry_run"}, a); err != nil {
		tb.Fatal(err)
	}
	if err := db.SetOverride(ctx, "chunk", live.Override{"algorithm": "gcra", "limit": int64(10), "period": int64(1000)}, a); err != nil {
		tb.Fatal(err)
	}
	for _, e := range []live.Exemption{
		{Kind: live.DenyPeer, Value: "192.0.2.66", Note: "scraper", Expires: now.Add(time.Hour).UTC()},
		{Kind: live.ExemptPeer, Value: "2001:db8::/48"},
		{Kind: live.ExemptPath, Value: "re:^/peers$"},
	} {
		if err := db.AddExemption(ctx, e, a); err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.SetDisabled(ctx, true, a); err != nil {
		tb.Fatal(err)
	}
	th := newFuzzThrottle(tb, now)
	th.Observe(now, "1.2.3.4:1984", "/info", map[string]string{"ratelimit-limit": `10;policy="general usage"`,
		"ratelimit-remaining": "3", "ratelimit-reset": "2", "ratelimit-reset-amount": "5"})
	th.TryAdaptive(now, "1.2.3.4:1984", "/info")
	ts, _ := th.MarshalSnapshot(now)
	if err := db.SaveThrottle(ctx, ts); err != nil {
		tb.Fatal(err)
	}

	f.db, f.now, f.cfg = db, later.Add(time.Second), cfg
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketSnapshot, bucketGroups, bucketBase, bucketLog, bucketOverrides, bucketExemptions, bucketLive} {
			err := tx.Bucket(b).ForEach(func(k, v []byte) error {
				f.slots = append(f.slots, storedSlot{bucket: b, key: bytes.Clone(k), value: bytes.Clone(v)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func newFuzzThrottle(tb testing.TB, now time.Time) *throttle.Throttle {
	cfg := throttle.ArweaveConfig()
	cfg.Compile = limiter.ThrottleMatcher
	cfg.Mode = throttle.ModeAdaptive
	th, err := throttle.New(now, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return th
}

// put stores v (nil: deletes the key) in slot s.
func (f *fuzzDB) put(tb testing.TB, s storedSlot, v []byte) {
	err := f.db.bolt.Update(func(tx *bbolt.Tx) error {
		if v == nil {
			return tx.Bucket(s.bucket).Delete(s.key)
		}
		return tx.Bucket(s.bucket).Put(s.key, v)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// FuzzStoredValue: every value of a real database (the snapshot's header,
// its groups' tick schedules, the base and log blobs of peer entries, the
// live overrides, exemptions and switch, the throttle's state) replaced by
// fuzzed bytes, or removed, then read back as the daemon does at start.
// Nothing panics. LoadSnapshot either refuses naming what is wrong or
// skips what does not decode (counting it), and what it returns restores
// into a limiter, whose own snapshot restores again. LoadLive refuses a
// value that does not decode naming its group or key; what it returns
// either applies (live.New) or is refused with a reason. The throttle
// either restores the state or names what is wrong.
func FuzzStoredValue(f *testing.F) {
	fdb := newFuzzDB(f)
	for i, s := range fdb.slots {
		f.Add(uint8(i), false, s.value)
		if len(s.value) > 4 {
			f.Add(uint8(i), false, s.value[:len(s.value)/2])
			flipped := bytes.Clone(s.value)
			flipped[len(flipped)/3] ^= 0x80
			f.Add(uint8(i), false, flipped)
		}
	}
	f.Add(uint8(0), true, []byte(nil))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, sel uint8, remove bool, v []byte) {
		s := fdb.slots[int(sel)%len(fdb.slots)]
		if remove {
			v = nil
		} else if v == nil {
			v = []byte{}
		}
		fdb.put(t, s, v)
		defer fdb.put(t, s, s.value)
		where := fmt.Sprintf("%s/%q = %q", s.bucket, s.key, v)
		fdb.logs.Reset()

		snap, rep, err := fdb.db.LoadSnapshot(ctx)
		switch {
		case err != nil:
			if !bytes.Equal(s.bucket, bucketSnapshot) || !strings.Contains(err.Error(), "snapshot/header") {
				t.Fatalf("%s: LoadSnapshot: %v (names the wrong thing, or a skippable value stopped the load)", where, err)
			}
		case rep.Entries != len(snap.Entries) || rep.Skipped < 0:
			t.Fatalf("%s: report %+v for %d entries", where, rep, len(snap.Entries))
		case rep.Skipped > 0 && !strings.Contains(fdb.logs.String(), hex.EncodeToString(s.key)):
			// What is skipped is logged, naming the blob.
			t.Fatalf("%s: %d records skipped, the log does not name the blob: %s", where, rep.Skipped, fdb.logs.String())
		default:
			lim, err := limiter.New(memory.New(), fdb.now, fdb.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lim.Restore(fdb.now, snap); err != nil {
				if !strings.Contains(err.Error(), "snapshot") {
					t.Fatalf("%s: Restore: %v names nothing", where, err)
				}
				break
			}
			lim2, _ := limiter.New(memory.New(), fdb.now, fdb.cfg)
			if _, err := lim2.Restore(fdb.now, lim.Snapshot(fdb.now)); err != nil {
				t.Fatalf("%s: the restored limiter's own snapshot does not restore: %v", where, err)
			}
		}

		st, err := fdb.db.LoadLive(ctx)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "override of group") && !strings.Contains(msg, "exemption ") && !strings.Contains(msg, "live/disabled") {
				t.Fatalf("%s: LoadLive: %v names nothing", where, err)
			}
		} else {
			lim, _ := limiter.New(memory.New(), fdb.now, fdb.cfg)
			if _, err := live.New(ctx, lim, fdb.db, fdb.cfg, func() time.Time { return fdb.now }); err != nil && err.Error() == "" {
				t.Fatalf("%s: live.New: an empty error for %+v", where, st)
			}
		}

		b, ok, err := fdb.db.LoadThrottle(ctx)
		if err != nil {
			t.Fatalf("%s: LoadThrottle: %v", where, err)
		}
		if ok {
			if err := newFuzzThrottle(t, fdb.now).RestoreSnapshot(fdb.now, b); err != nil && !strings.HasPrefix(err.Error(), "throttle") {
				t.Fatalf("%s: throttle: %v names nothing", where, err)
			}
		}
	})
}
