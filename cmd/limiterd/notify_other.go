//go:build !linux

package main

// monotonicUsec is Linux's (systemd's) only: elsewhere RELOADING=1 goes
// without MONOTONIC_USEC.
func monotonicUsec() (int64, bool) { return 0, false }
