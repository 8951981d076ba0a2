package limiter

// NewLocalBackend returns a Backend on this process's memory: the sharded
// slab a Limiter keeps by default, for a caller that wants one of its own
// (cluster mode decides on one while its shared store cannot be reached,
// SPEC §12 on_failure = "local"). It implements Sweeper, Snapshotter,
// Viewer and StatsReporter as well; it is safe for concurrent use.
// maxTracked caps its (peer, group) entries as peers.max_tracked does (0:
// no cap); a Limiter does not change it afterwards.
func NewLocalBackend(maxTracked int) Backend {
	b := newLocal()
	b.maxTracked.Store(int64(max(0, maxTracked)))
	return b
}
