package proxy

import (
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter/peer"
)

// TestUpstreamReapsIdle: the connections of a burst left in the pool are
// closed once idle for maxIdleTime, however little traffic follows (the
// pool is taken most recently used first, so nothing else would reach
// them), and only those.
func TestUpstreamReapsIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, c) // until limiterd closes it
				c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	h := &Handler{opts: Options{Upstream: &url.URL{Scheme: "http", Host: ln.Addr().String()},
		UpstreamConnectTimeout: time.Second, UpstreamMaxConns: 8}}
	u := h.newUpstream()
	var cs []*upConn
	for range 5 {
		c, _, err := u.acquire(peer.Key{})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		u.release(c)
	}
	u.mu.Lock()
	armed := u.reaper != nil
	u.mu.Unlock()
	if !armed {
		t.Fatal("no reaper armed with 5 connections pooled")
	}
	// Three of them were used again later: 2 are stale at the reaping.
	t0 := cs[4].lastUsed
	for i, c := range cs {
		c.lastUsed = t0.Add(time.Duration(i) * time.Second)
	}
	if n := u.reapIdle(t0.Add(maxIdleTime + time.Second)); n != 2 {
		t.Fatalf("reaped %d, want the 2 idle for maxIdleTime", n)
	}
	for range 2 {
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("a reaped connection was not closed")
		}
	}
	u.mu.Lock()
	idle, open, conns := len(u.idle), len(u.open), u.conns
	u.mu.Unlock()
	if idle != 3 || open != 3 || conns != 3 {
		t.Errorf("after the reaping: %d idle, %d open, %d counted; want 3 of each", idle, open, conns)
	}
	if n := u.reapIdle(t0.Add(maxIdleTime + time.Second)); n != 0 {
		t.Errorf("a second reaping at the same time closed %d", n)
	}
	u.closeIdle()
	u.mu.Lock()
	if u.reaper != nil {
		u.reaper.Stop()
	}
	u.mu.Unlock()
}
