package proxy

import (
	"net"
	"testing"
	"time"
)

// TestIdleDeadlinesNeverEarly: the deadlines moved lazily (not on every
// read or write, see moveDeadline) still leave a stall its whole timeout:
// after any read or write of the node's connection, the deadline is at
// least upstream_read_timeout away, whenever it came, and at most a
// quarter more; it moves at most once a quarter of the timeout.
func TestIdleDeadlinesNeverEarly(t *testing.T) {
	const timeout = 60 * time.Second
	// The node: one pipe it writes to endlessly, one it reads endlessly.
	a, b := net.Pipe()
	w, r := net.Pipe()
	defer func() { a.Close(); b.Close(); w.Close(); r.Close() }()
	go func() {
		for {
			if _, err := b.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}()
	h := &Handler{opts: Options{UpstreamReadTimeout: timeout, UpstreamHeaderTimeout: timeout}}
	c := &upConn{Conn: a, h: h}
	start := time.Now()
	moves, last := 0, time.Time{}
	// An answer read 7 s apart, for 20 minutes of the clock; then a
	// request written as slowly.
	for now := start; now.Before(start.Add(20 * time.Minute)); now = now.Add(7 * time.Second) {
		h.clock.ns.Store(now.UnixNano())
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if left := c.readDL.Sub(now); left < timeout || left > timeout*5/4+2*coarseTick {
			t.Fatalf("%v in: the read deadline is %v away, want between %v and %v", now.Sub(start), left, timeout, timeout*5/4)
		}
		if !c.readDL.Equal(last) {
			moves++
			last = c.readDL
		}
	}
	c = &upConn{Conn: w, h: h}
	for now := start; now.Before(start.Add(20 * time.Minute)); now = now.Add(7 * time.Second) {
		h.clock.ns.Store(now.UnixNano())
		if _, err := c.Write([]byte{'y'}); err != nil {
			t.Fatal(err)
		}
		if left := c.writeDL.Sub(now); left < timeout || left > timeout*5/4+2*coarseTick {
			t.Fatalf("%v in: the write deadline is %v away, want between %v and %v", now.Sub(start), left, timeout, timeout*5/4)
		}
	}
	// At most one move per quarter of the timeout (15 s: 80 in 20
	// minutes), at least one per quarter and a step (22 s: 54).
	if moves < 54 || moves > 81 {
		t.Errorf("the read deadline moved %d times in 20 minutes of reads every 7 s, want 54 to 81", moves)
	}
}
