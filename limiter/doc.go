// Package limiter is limiterd's pure core: route groups and their
// settings, path patterns and the route table, peer identity (package
// peerid), the decision policy (deny list, exemption, modes, the global
// switch: Limiter.Decide), the Arweave hybrid rule as a pure step function
// (concurrency, then sliding window, then leaky-bucket tokens: StepHybrid)
// with its leaky and cleanup ticks, the Backend interface where the state
// of every (peer, group) lives and the local backend that keeps it in
// memory, the counters behind the metrics, and snapshots of all state as
// plain Go values.
//
// The package imports the standard library and its own pure sub-packages
// only (algo, peerid, peerkey, prefixset, ratelimit, schedule; a test
// enforces it) and never reads the clock: every operation that depends on
// time takes it as an argument, so the daemon, the tests and the
// benchmarks drive the same code on real or fake timelines.
package limiter
