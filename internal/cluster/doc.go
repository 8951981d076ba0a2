// Package cluster is limiterd's cluster mode (docs/cluster.md): a
// limiter.Backend whose per-(peer, group) state lives in Redis (or Valkey),
// shared by every instance, so that a peer gets one limit however its requests
// are spread.
//
// Two modes. In strict mode each decision is one atomic Lua script call
// (loaded once, called by hash) holding the group's whole decision, with
// Redis's clock and the group's shared tick schedule; concurrent callers'
// calls are pipelined. In local_first mode an instance decides on its own
// view (the shared state as last read plus its own admissions not yet
// pushed) and pushes its admissions in batches, reading the shared state
// back in the same round trip.
//
// Redis is never trusted to answer in time: every call on a request's path
// ends within Options.Timeout, the calls in flight are capped, and a breaker
// stops calling Redis once it fails, answering as Options.OnFailure says
// (admit, reject with 503, or decide on this instance's own state) until a
// probe finds Redis healthy again. Replicator carries the operators' live
// edits between instances.
//
// The package imports limiter and the Redis client only; cmd/limiterd wires
// it (docs/cluster.md).
package cluster
