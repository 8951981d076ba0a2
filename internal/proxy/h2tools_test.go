package proxy_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// h2Tool returns the path of a client nobody here wrote: curl or
// nghttp2-client's nghttp and h2load. Without it the test is skipped on a
// developer machine, and fails when the CI environment variable is set:
// CI installs them.
func h2Tool(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if _, ci := os.LookupEnv("CI"); ci {
			t.Fatalf("%s is not installed (CI is set: install curl and nghttp2-client)", name)
		}
		t.Skipf("%s is not installed (apt-get install curl nghttp2-client)", name)
	}
	return bin
}

// run runs a tool and returns its output.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestHTTP2Curl: curl --http2-prior-knowledge is answered over HTTP/2, a
// 429 included, its rate-limit fields lower-case and without trailing
// whitespace.
func TestHTTP2Curl(t *testing.T) {
	curl := h2Tool(t, "curl")
	p := newPlane(t, nil, nil, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction = 1, 1
		c.Groups["general"] = g
	})
	out := run(t, curl, "-sS", "--http2-prior-knowledge", "-D", "-", p.base+"/info")
	if !strings.HasPrefix(out, "HTTP/2 200") || !strings.HasSuffix(out, "from the node") {
		t.Fatalf("first: %q", out)
	}
	out = run(t, curl, "-sS", "--http2-prior-knowledge", "-D", "-", p.base+"/info")
	if !strings.HasPrefix(out, "HTTP/2 429") || !strings.Contains(out, "\r\nretry-after: ") ||
		!regexp.MustCompile(`\r\nratelimit-limit: [^\r]*"\r\n`).MatchString(out) || !strings.Contains(out, "\r\nratelimit-remaining: 0\r\n") {
		t.Fatalf("second: %q", out)
	}
	p.settled()
}

// TestHTTP2Nghttp: nghttp gets answers over HTTP/2, several streams of one
// connection at once.
func TestHTTP2Nghttp(t *testing.T) {
	nghttp := h2Tool(t, "nghttp")
	p := newPlane(t, nil, nil)
	out := run(t, nghttp, "-nv", "-m", "20", p.base+"/info")
	if n := strings.Count(out, ":status: 200"); n != 20 {
		t.Fatalf("%d of 20 answered 200:\n%s", n, out)
	}
	if p.hits.Load() != 20 {
		t.Fatalf("the node got %d", p.hits.Load())
	}
	p.settled()
}

// TestHTTP2H2load: h2load, 4 connections of 16 streams, every request
// answered 200 and back to idle after.
func TestHTTP2H2load(t *testing.T) {
	h2load := h2Tool(t, "h2load")
	p := newPlane(t, nil, nil, func(c *limiter.Config) {
		g := c.Groups["general"]
		g.LeakyLimit, g.LeakyTickReduction = 1_000_000, 1_000_000
		c.Groups["general"] = g
	})
	out := run(t, h2load, "-n", "2000", "-c", "4", "-m", "16", p.base+"/info")
	if !strings.Contains(out, "2000 succeeded") || !bytes.Contains([]byte(out), []byte("status codes: 2000 2xx")) {
		t.Fatalf("h2load:\n%s", out)
	}
	if p.hits.Load() != 2000 {
		t.Fatalf("the node got %d", p.hits.Load())
	}
	p.idle()
}
