//go:build unix

package main

import (
	"os"
	"syscall"
)

// keepOwner gives f the owner and group of the file fi describes, when the
// process may (root, replacing /etc/limiterd/config.toml of root:limiterd).
func keepOwner(f *os.File, fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
}
