package cluster

import "context"

// OpenWithClock is Open with clock as Redis's clock and this instance's
// (scripts are given it instead of reading TIME), releases sent at once
// rather than batched, and no background pushes: the tests call SyncAll.
func OpenWithClock(o Options, clock func() int64) (*Backend, error) {
	if o.SyncInterval == 0 {
		o.SyncInterval = 1 << 40 // never
	}
	b, err := open(o, clock)
	if err != nil {
		return nil, err
	}
	if s, ok := b.eng.(*strict); ok {
		s.syncRelease = true
	}
	return b, nil
}

// SyncAll runs one local_first push of every key at now.
func (b *Backend) SyncAll(now int64) {
	if l, ok := b.eng.(*localFirst); ok {
		l.syncAll(context.Background(), now)
	}
}

// Renew renews the leases of the slots a strict backend holds.
func (b *Backend) Renew() {
	if s, ok := b.eng.(*strict); ok {
		s.renew(context.Background())
	}
}

// Probe runs one probe and reports its kind of failure.
func (b *Backend) Probe() (string, error) { return b.probe(context.Background()) }

// TagOf is tagOf.
var TagOf = tagOf
