package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// passedListener returns the listening TCP socket at descriptor fd, passed
// by socket activation, and takes it from fd: the descriptor is closed
// (the listener has its own) and no child would inherit it.
func passedListener(fd int) (net.Listener, error) {
	accepting, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	if err != nil {
		return nil, fmt.Errorf("not a socket: %w", err)
	}
	if accepting != 1 {
		return nil, errors.New("a socket that is not listening")
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "passed socket "+strconv.Itoa(fd))
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		ln.Close()
		return nil, fmt.Errorf("a %s socket, not TCP", ln.Addr().Network())
	}
	return ln, nil
}
