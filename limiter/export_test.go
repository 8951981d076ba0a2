package limiter

import "unsafe"

// EntrySize is the size of one tracked (peer, group) entry, for tests.
const EntrySize = unsafe.Sizeof(entry{})

// SetAfterScan makes SnapshotDelta call f between its scan and its drain
// of deletions.
func SetAfterScan(l *Limiter, f func()) { l.afterScan = f }
