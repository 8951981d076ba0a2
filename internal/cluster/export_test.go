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
	b.keeper.syncRelease = true
	return b, nil
}

// SyncAll runs one local_first push of every key at now.
func (b *Backend) SyncAll(now int64) {
	if l, ok := b.eng.(*localFirst); ok {
		l.syncAll(context.Background(), now)
	}
}

// Renew renews the leases of the slots this instance holds.
func (b *Backend) Renew() { b.keeper.renew(context.Background()) }

// Probe runs one probe and reports its kind of failure.
func (b *Backend) Probe() (string, error) { return b.probe(context.Background()) }

// TagOf is tagOf.
var TagOf = tagOf

// Reads returns the full reads of the shared live state r made, and its
// peeks at the state's version and number of records.
func (r *Replicator) Reads() (full, peeks int64) { return r.reads.Load(), r.peeks.Load() }
