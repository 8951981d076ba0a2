package cluster

import "github.com/redis/go-redis/v9"

// Client returns the backend's Redis client, for what else limiterd keeps
// in the same Redis (the fleet's summaries, package fleet): its commands
// share the backend's servers, credentials and connections, and the
// bounds set on them (no retries, the pool's wait of cluster.timeout).
// Callers bound their own calls with a context.
func (b *Backend) Client() redis.UniversalClient { return b.rdb }
