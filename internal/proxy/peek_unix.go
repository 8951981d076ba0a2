//go:build unix

package proxy

import (
	"errors"
	"syscall"
)

// peek reads what the socket holds without consuming it, waiting (within
// the read deadline) for a first byte. ok is false when the wait failed
// (the deadline passed, the socket failed); n is 0 when the client closed
// the connection, or reset it.
func peek(rc syscall.RawConn, b []byte) (n int, ok bool) {
	var perr error
	err := rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK)
		return !errors.Is(perr, syscall.EAGAIN)
	})
	switch {
	case err != nil:
		return 0, false
	case errors.Is(perr, syscall.ECONNRESET):
		return 0, true
	case perr != nil:
		return 0, false
	}
	return n, true
}
