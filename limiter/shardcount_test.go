package limiter

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestAcquireNeverOverAdmits: goroutines racing for the slots of one
// shard never hold more than the limit at once, every slot taken is
// given back, and the count ends at 0.
func TestAcquireNeverOverAdmits(t *testing.T) {
	const limit, workers, rounds = 3, 8, 2000
	c := newShardCounters(5)
	var held, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				n := c.Acquire(2, limit)
				if n == nil {
					continue
				}
				admitted.Add(1)
				h := held.Add(1)
				for {
					m := most.Load()
					if h <= m || most.CompareAndSwap(m, h) {
						break
					}
				}
				held.Add(-1)
				n.Add(-1)
			}
		}()
	}
	wg.Wait()
	if most.Load() > limit {
		t.Errorf("%d held at once, limit %d", most.Load(), limit)
	}
	if admitted.Load() == 0 {
		t.Error("nothing admitted")
	}
	for i := range c.Len() {
		if n := c.InFlight(i); n != 0 {
			t.Errorf("shard %d ends at %d", i, n)
		}
	}
}

// TestShardAndBounds: the shard is the byte mod the workers; the number
// of workers is clamped to 1 … MaxWorkers.
func TestShardAndBounds(t *testing.T) {
	c := newShardCounters(5)
	for b, want := range map[byte]int{0: 0, 1: 1, 4: 4, 5: 0, 6: 1, 255: 0} {
		if got := c.Shard(b); got != want {
			t.Errorf("Shard(%d) = %d, want %d", b, got, want)
		}
	}
	if n := newShardCounters(0).Len(); n != 1 {
		t.Errorf("New(0): %d shards", n)
	}
	if n := newShardCounters(1 << 20).Len(); n != MaxWorkers {
		t.Errorf("New(2^20): %d shards", n)
	}
	if c.Acquire(3, 0) != nil || c.InFlight(3) != 0 {
		t.Error("a limit of 0 admitted")
	}
}
