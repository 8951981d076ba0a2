package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// drip opens n connections to addr that send a request's head one byte
// every step and never finish it, and returns, per connection, what came
// back and how long after the opening the connection was closed (-1 if
// it was still open after limit).
func drip(t *testing.T, addr string, n int, step, limit time.Duration) (answers []string, closedAfter []time.Duration) {
	t.Helper()
	answers, closedAfter = make([]string, n), make([]time.Duration, n)
	head := "GET /info HTTP/1.1\r\nHost: a\r\nUser-Agent: " + strings.Repeat("s", 4096)
	var wg sync.WaitGroup
	for i := range n {
		// The opening is taken before the dial: the server's clock starts
		// at its accept, after the handshake, so no earlier than this; a
		// dial that returns late on a loaded machine must not make the
		// server's timeout look short.
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		wg.Add(2)
		got := make(chan struct{})
		go func() { // the drip
			defer wg.Done()
			tick := time.NewTicker(step)
			defer tick.Stop()
			for j := 0; ; j++ {
				if _, err := c.Write([]byte{head[j%len(head)]}); err != nil {
					return
				}
				select {
				case <-got:
					return
				case <-tick.C:
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer close(got)
			defer c.Close()
			c.SetReadDeadline(start.Add(limit))
			b, err := io.ReadAll(c)
			answers[i] = string(b)
			closedAfter[i] = time.Since(start)
			var ne net.Error
			if errorsAsTimeout(err, &ne) {
				closedAfter[i] = -1
			}
		}()
	}
	wg.Wait()
	return answers, closedAfter
}

func errorsAsTimeout(err error, ne *net.Error) bool {
	if e, ok := err.(net.Error); ok && e.Timeout() {
		*ne = e
		return true
	}
	return false
}

// TestSlowlorisPublic: 200 connections dripping a head one byte every
// 100 ms are each answered 408 and closed once read_header_timeout (1 s)
// has passed from their opening (the drip does not extend it), counted as
// bad requests; a polite client is served meanwhile; afterwards the data
// plane's goroutines and the process's open files (process_open_fds, on
// the admin API) are back to what they were.
func TestSlowlorisPublic(t *testing.T) {
	n := newFaultNode(t, false)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(n.url(), dir) })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	base := d.baseline(t, client)
	fds := d.metrics()["process_open_fds"]
	bad := d.metrics()["limiterd_bad_requests_total"]

	const conns = 200
	polite := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // while the drips are open
		resp, err := client.Get(d.PublicURL() + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		polite <- err
	}()
	answers, after := drip(t, addrOf(d.PublicURL()), conns, 100*time.Millisecond, 8*time.Second)
	for i := range conns {
		if after[i] < 0 {
			t.Fatalf("connection %d still open 8 s after it opened (read_header_timeout is 1 s)", i)
		}
		if after[i] < 900*time.Millisecond {
			t.Errorf("connection %d closed after %v, before read_header_timeout", i, after[i])
		}
		if st := status(answers[i]); st != "HTTP/1.1 408 Request Timeout" {
			t.Errorf("connection %d: %q, want 408", i, st)
		}
	}
	if err := <-polite; err != nil {
		t.Errorf("a polite request during the drip: %v", err)
	}
	if v := d.metrics()["limiterd_bad_requests_total"] - bad; v != conns {
		t.Errorf("limiterd_bad_requests_total rose by %v, want %d", v, conns)
	}
	d.idle(t, "after the slowloris", base)
	eventually(t, "open files back", func() bool { return d.metrics()["process_open_fds"] <= fds })
	d.noPanic(t)
}

// TestSlowlorisAdmin: the admin listener closes connections dripping a
// head once its ReadHeaderTimeout (10 s) has passed from their opening,
// and answers meanwhile. It takes 10 s, in parallel with the package's
// other parallel tests.
func TestSlowlorisAdmin(t *testing.T) {
	t.Parallel()
	up, _ := countingUpstream(t, nil)
	d := startDaemon(t, up.URL, "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, after := drip(t, addrOf(d.AdminURL()), 50, 500*time.Millisecond, 20*time.Second)
		for i, a := range after {
			if a < 0 {
				t.Errorf("admin connection %d still open after 20 s", i)
				return
			}
			if a < 9*time.Second {
				t.Errorf("admin connection %d closed after %v, before the 10 s header timeout", i, a)
			}
		}
	}()
	time.Sleep(time.Second)
	if resp, err := adminClient.Get(d.AdminURL() + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz during the drip: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	<-done
	d.noPanic(t)
}

// TestHugeHeaders: a head over the limit is 431 and closed on the public
// listener (MaxHeaderBytes) and on the admin listener (64 KiB), whether
// one field is huge or there are thousands; nothing reaches the node.
func TestHugeHeaders(t *testing.T) {
	node := newRecordingNode(t)
	d := startDaemonWith(t, func(dir string) string { return faultConfig(node.URL, dir) })
	many := strings.Repeat("X-Many: "+strings.Repeat("m", 60)+"\r\n", 5000)
	for name, hdr := range map[string]string{
		"one huge field": "X-Big: " + strings.Repeat("b", 1<<20) + "\r\n",
		"5000 fields":    many,
		"huge target":    "",
	} {
		target := "/info"
		if hdr == "" {
			target = "/" + strings.Repeat("p", 1<<20)
		}
		req := "GET " + target + " HTTP/1.1\r\nHost: a\r\n" + hdr + "\r\n"
		for _, l := range []struct{ name, addr string }{{"public", addrOf(d.PublicURL())}, {"admin", addrOf(d.AdminURL())}} {
			got, closed := rawExchange(t, l.addr, req, 5*time.Second)
			if st := status(got); (st != "HTTP/1.1 431 Request Header Fields Too Large" && st != "HTTP/1.1 414 Request URI Too Long") || !closed {
				t.Errorf("%s, %s listener: %q (closed %v), want 431 (or 414) and closed", name, l.name, st, closed)
			}
		}
	}
	if s := node.last(); s != "" {
		t.Errorf("the node got %s", s)
	}
	d.noPanic(t)
}
