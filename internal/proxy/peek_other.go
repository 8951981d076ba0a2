//go:build !unix

package proxy

import "syscall"

// peerClosed cannot tell on this system: a client that went away is
// noticed when the answer is written.
func peerClosed(syscall.RawConn) bool { return false }

// peek cannot look without consuming on this system: every connection is
// served as HTTP/1.1.
func peek(syscall.RawConn, []byte) (int, bool) { return 0, false }
