package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTP2EndToEnd: the daemon's public listener speaks h2c with its
// configuration's limits, counts it in its metrics, and the admin listener
// does not: a preface there gets an HTTP/1.1 error and a closed
// connection, never an HTTP/2 answer.
func TestHTTP2EndToEnd(t *testing.T) {
	up, hits := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "node") })
	d := startDaemon(t, up.URL, "")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get(d.PublicURL() + "/info")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != "node" || hits.Load() != 1 ||
		resp.Header.Get("ratelimit-remaining") != "19" {
		t.Fatalf("%s %s %q, ratelimit-remaining %q", resp.Proto, resp.Status, b, resp.Header.Get("ratelimit-remaining"))
	}
	if got := d.metric("limiterd_http2_streams_total"); got != "1" {
		t.Fatalf("limiterd_http2_streams_total %q", got)
	}
	if got := d.metric("limiterd_http2_connections_total"); got != "1" {
		t.Fatalf("limiterd_http2_connections_total %q", got)
	}

	// The admin listener.
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.AdminURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.1 4") && !strings.HasPrefix(string(got), "HTTP/1.1 5") {
		t.Fatalf("the admin listener answered the preface %q", got)
	}
	if _, err := c.Get(d.AdminURL() + "/healthz"); err == nil {
		t.Fatal("an h2c client got an answer from the admin listener")
	}
}
