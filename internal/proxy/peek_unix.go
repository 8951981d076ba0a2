//go:build unix

package proxy

import "syscall"

// peerClosed reports whether the other end of a socket has closed it (or
// reset it), by peeking without waiting and without consuming.
func peerClosed(rc syscall.RawConn) bool {
	var b [1]byte
	closed := false
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || err == syscall.ECONNRESET
		return true
	})
	// An error: the socket is closed on this side (a drain that ran out).
	return err != nil || closed
}
