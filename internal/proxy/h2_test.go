package proxy_test

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// h2Client returns an HTTP/2 prior-knowledge client (Go's own).
func h2Client(t *testing.T) *http.Client {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestHTTP2Served: a connection that opens with the HTTP/2 preface is
// served as HTTP/2, one beside it that does not as HTTP/1.1, on the same
// port; both reach the node over HTTP/1.1 with the forwarding fields.
func TestHTTP2Served(t *testing.T) {
	p := newPlane(t, nil, nil)
	resp, err := h2Client(t).Get(p.base + "/info?x=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "from the node" {
		t.Fatalf("HTTP/2: %s %s %q", resp.Proto, resp.Status, body)
	}
	s := p.seen()
	if s.uri != "/info?x=1" || s.header.Get("X-Forwarded-For") != "127.0.0.1" || s.header.Get("X-Forwarded-Proto") != "http" {
		t.Fatalf("the node got %+v", s)
	}
	resp, err = http.Get(p.base + "/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != 200 || p.hits.Load() != 2 {
		t.Fatalf("HTTP/1.1 beside it: %s %s, %d at the node", resp.Proto, resp.Status, p.hits.Load())
	}
	p.settled()
}
