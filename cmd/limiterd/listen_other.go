//go:build !linux

package main

import (
	"errors"
	"net"
)

// passedListener: socket activation is systemd's, Linux's only.
func passedListener(int) (net.Listener, error) {
	return nil, errors.New("socket activation is supported on Linux only")
}
