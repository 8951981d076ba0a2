package bench

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// KeyedRate is the baseline: one x/time/rate token bucket per client key in
// a map behind a mutex, as commonly written in Go middleware. It is safe
// for concurrent use.
type KeyedRate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

// NewKeyedRate returns a KeyedRate whose buckets refill at r per second and
// hold burst tokens.
func NewKeyedRate(r rate.Limit, burst int) *KeyedRate {
	return &KeyedRate{m: make(map[string]*rate.Limiter), limit: r, burst: burst}
}

// Allow takes one token of key's bucket at now, creating the bucket on
// first use.
func (k *KeyedRate) Allow(now time.Time, key string) bool {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = rate.NewLimiter(k.limit, k.burst)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.AllowN(now, 1)
}
