package live

import (
	"context"
	"slices"
	"time"
)

// ActorExpiry is the audit actor of what limiterd does by itself: the
// removal of expired exemptions.
const ActorExpiry = "limiterd"

// Expire removes the live exemptions and deny entries whose expiry is at
// or before now, each durably and audited as exemption.expire by
// ActorExpiry (with its note), and returns how many it removed. The
// daemon calls it every second; it does nothing, and takes the lock only
// briefly, while nothing has expired. An entry that cannot be removed (the
// store fails) stays, and the next call tries again.
func (c *Live) Expire(ctx context.Context, now time.Time) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for {
		i := slices.IndexFunc(c.state.Exemptions, func(e Exemption) bool {
			return !e.Expires.IsZero() && !now.Before(e.Expires)
		})
		if i < 0 {
			return n, nil
		}
		e := c.state.Exemptions[i]
		next := c.clone()
		next.Exemptions = slices.Delete(next.Exemptions, i, i+1)
		a := c.audit(ActorExpiry, "exemption.expire", string(e.Kind), e.Value, nil)
		a.Note, a.Expires = e.Note, e.Expires
		if err := c.commit(ctx, ActorExpiry, next, func() error { return c.store.RemoveExemption(ctx, e, a) }); err != nil {
			return n, err
		}
		n++
	}
}
