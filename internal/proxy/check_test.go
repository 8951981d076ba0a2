package proxy

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

func TestLeasesExpireInOrder(t *testing.T) {
	l := newLeases()
	t0 := time.Unix(1000, 0)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, l.add(limiter.Decision{}, t0.Add(time.Duration(i)*time.Second)))
	}
	if !l.release(ids[1]) || l.release(ids[1]) {
		t.Fatal("a lease releases exactly once")
	}
	l.expire(t0.Add(2 * time.Second)) // ids 0 and 2 end; 1 was released
	if len(l.m) != 2 {
		t.Fatalf("%d leases left, want 2", len(l.m))
	}
	if _, ok := l.m[ids[3]]; !ok {
		t.Fatal("lease 3 ended early")
	}
	l.releaseAll()
	if len(l.m) != 0 || l.release(ids[4]) {
		t.Fatal("releaseAll left leases")
	}
}
