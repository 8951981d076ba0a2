//go:build !unix

package proxy

import "syscall"

// peek cannot look without consuming on this system: every connection is
// served as HTTP/1.1.
func peek(syscall.RawConn, []byte) (int, bool) { return 0, false }
