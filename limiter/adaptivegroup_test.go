package limiter

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A routine measurement of the unloaded latency (one its interval
// started) ends with every peer's fair pace brought up to the present,
// fairBurst − 1 admissions ahead (decision 226); the first one, and one
// the node's speed started, leave the paces as they are.
func TestAdaptiveRoutineMeasurementCatchesUp(t *testing.T) {
	const interval = 50_000 // µs: a quota of 20 a second
	a := newAdaptiveGroup(testAdaptive(), 0)
	pace := func(ms int64) { a.pace.Store(uint64(ms/1000)<<32 | paceBusy | interval) }
	// measure ends the measurement running since from with 10 answers at
	// ms and reports whether every pace but slot 7's stands at want (µs).
	measure := func(from, ms, want int64) bool {
		t.Helper()
		for range 10 {
			a.sample(ms, from, time.Duration(U)*time.Microsecond, false)
		}
		if a.ctl.probing {
			t.Fatalf("measuring after 10 answers at %d", ms)
		}
		for i := range a.tat {
			if i != 7 && a.tat[i].Load() != want {
				return false
			}
		}
		return true
	}
	start := func(ms int64, routine bool) {
		a.mu.Lock()
		a.ctl.startProbe(ms)
		a.ctl.routine = routine
		a.mu.Unlock()
		pace(ms)
	}
	const far = 9_999_000_000 // a peer far ahead of its pace stays there
	a.tat[7].Store(far)
	pace(500)
	if !measure(0, 500, 0) {
		t.Fatal("the first measurement moved the paces")
	}
	start(2000, false)
	if !measure(2000, 2100, 0) {
		t.Fatal("a measurement the node's speed started moved the paces")
	}
	start(3000, true)
	want := int64(3100)*1000 + (fairBurst-1)*interval
	if !measure(3000, 3100, want) {
		t.Fatalf("after a routine measurement: pace of slot 0 at %d, want %d", a.tat[0].Load(), want)
	}
	if a.tat[7].Load() != far {
		t.Fatal("the peer ahead was moved back")
	}
}

// Requests of peers sharing slots, shed and admitted at once on every
// core, leave nothing counted behind: a shed gives back its request and
// its peer by the slot's own transition, as a release does (a request
// sharing the slot may have come or gone between its count and its shed).
func TestAdaptiveShedGivesBackItsPeer(t *testing.T) {
	p := testAdaptive()
	p.AdaptiveMinLimit = 1
	a := newAdaptiveGroup(p, 0) // measuring: the ceiling is the minimum, 1
	// keys of two slots, several each
	var keys []Key
	for i := uint64(0); len(keys) < 8; i++ {
		k := Key{Lo: i}
		if s := slotOf(k); s == slotOf(Key{Lo: 0}) || s == slotOf(Key{Lo: 1}) {
			keys = append(keys, k)
		}
	}
	var wg sync.WaitGroup
	var sheds atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100_000 {
				if s, shed := a.acquire(keys[(i+w)%len(keys)], 0, false); !shed {
					a.release(s)
				} else {
					sheds.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n, peers := split(a.counts.Load()); n != 0 || peers != 0 || sheds.Load() == 0 {
		t.Fatalf("after every request gave back: %d in flight of %d peers (%d shed)", n, peers, sheds.Load())
	}
}
