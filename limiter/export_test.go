package limiter

import "unsafe"

// EntrySize is the size of one tracked (peer, group) entry, for tests.
const EntrySize = unsafe.Sizeof(entry{})
