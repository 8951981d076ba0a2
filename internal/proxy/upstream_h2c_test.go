package proxy_test

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// TestUpstreamH2C: with server.upstream_protocol = "h2c" the node gets
// HTTP/1.1 requests and HTTP/2 streams alike over HTTP/2, bodies stream
// both ways, its answers come back whole, and its stalls have the same
// bounds as over HTTP/1.1.
func TestUpstreamH2C(t *testing.T) {
	var protoMajor atomic.Int32
	var hits atomic.Int64
	node := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		protoMajor.Store(int32(r.ProtoMajor))
		switch r.URL.Path {
		case "/echo":
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			io.WriteString(w, strconv.FormatInt(n, 10)+" "+string(h.Sum(nil)[:4]))
		case "/big":
			w.Header().Set("X-From", "node")
			io.Copy(w, &pattern{n: 3 << 20})
		case "/stall":
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			time.Sleep(3 * time.Second) // past upstream_read_timeout and its quarter
		case "/slow":
			time.Sleep(2 * time.Second)
		default:
			w.Header().Set("ratelimit-remaining", "999") // the node's own, replaced
			io.WriteString(w, "from the node "+r.Host+" "+r.Header.Get("X-Forwarded-For"))
		}
	}))
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	node.Config.Protocols = &protos
	node.Start()
	t.Cleanup(node.Close)
	u, _ := url.Parse(node.URL)
	lim, err := limiter.New(memory.New(), time.Now(), limiter.Config{Groups: limiter.ArweaveGroups(), Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64})
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.New(lim, proxy.Options{Upstream: u, UpstreamH2C: true, UpstreamReadTimeout: time.Second,
		UpstreamHeaderTimeout: 500 * time.Millisecond})
	base := serve(t, h)
	inflight := func() int64 { return lim.Stats()["general"].ItemsConcurrency }

	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"HTTP/1.1", &http.Client{Transport: &http.Transport{}}}, {"HTTP/2", h2Client(t)}} {
		resp, err := c.client.Get(base + "/info")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "from the node ") || !strings.HasSuffix(string(b), " 127.0.0.1") || protoMajor.Load() != 2 {
			t.Fatalf("%s: %s %q, the node got HTTP/%d", c.name, resp.Status, b, protoMajor.Load())
		}
		if got := resp.Header.Values("Ratelimit-Remaining"); len(got) != 1 || got[0] == "999" {
			t.Fatalf("%s: ratelimit-remaining %q: the node's was not replaced", c.name, got)
		}
		// A large body each way, streamed.
		body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		resp, err = c.client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(body)
		if want := strconv.Itoa(len(body)) + " " + string(sum[:4]); string(b) != want {
			t.Fatalf("%s: upload echoed %q", c.name, b)
		}
		resp, err = c.client.Get(base + "/big")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != 3<<20 || resp.Header.Get("X-From") != "node" {
			t.Fatalf("%s: download of %d bytes: %s %v", c.name, n, resp.Status, resp.Header)
		}
		// A node that stalls mid-answer is cut off; one that does not answer
		// in time gets 504. Either way the slot is back.
		resp, err = c.client.Get(base + "/stall")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatalf("%s: a stalled answer came whole", c.name)
		}
		resp, err = c.client.Get(base + "/slow")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("%s: a slow node: %s", c.name, resp.Status)
		}
		eventually(t, "in-flight back to 0", func() bool { return inflight() == 0 })
	}
}
