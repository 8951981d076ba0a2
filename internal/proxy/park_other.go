//go:build !linux

package proxy

import "time"

// parker is Linux's; elsewhere each idle connection parks alone.
type parker struct{}

func newParker(*Handler) *parker { return nil }

func (*parker) park(conn, time.Time) bool { return false }
func (*parker) closeAll()                 {}
func (*parker) stop()                     {}
