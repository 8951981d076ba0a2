package main

import (
	"syscall"
	"unsafe"
)

// monotonicUsec reads CLOCK_MONOTONIC in microseconds, the clock of
// sd_notify's MONOTONIC_USEC.
func monotonicUsec() (int64, bool) {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return ts.Nano() / 1000, true
}
