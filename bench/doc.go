// Package bench holds limiterd's comparative benchmarks: the limiter core
// against the baseline a Go developer would otherwise write (x/time/rate
// limiters in a keyed map), measured in the same run. It is not imported by
// the daemon; it lives outside limiter/ so the core stays standard-library
// only.
package bench
