package web_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/webtest"
)

// admin.pprof: off, /debug/pprof/ is 404 naming the key; on, a token of
// scope admin gets the runtime's profiles (a heap profile is a gzipped
// protobuf; the goroutine dump names this test's goroutines) and one of
// scope read is refused; off again, 404 at once.
func TestPprof(t *testing.T) {
	o := webtest.NewOps(t)
	if code, body := o.Call(webtest.Token, "GET", "/debug/pprof/heap", ""); code != 404 || !strings.Contains(body, "admin.pprof") {
		t.Fatalf("profiling off: %d %s", code, body)
	}
	o.S.SetProfiling(true)
	code, body := o.Call(webtest.Token, "GET", "/debug/pprof/heap?gc=1", "")
	if code != 200 {
		t.Fatalf("heap profile: %d %s", code, body)
	}
	zr, err := gzip.NewReader(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("heap profile is not gzipped: %v", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) < 100 {
		t.Fatalf("heap profile: %d bytes, %v", len(raw), err)
	}
	if code, body := o.Call(webtest.Token, "GET", "/debug/pprof/goroutine?debug=1", ""); code != 200 || !strings.Contains(body, "TestPprof") {
		t.Fatalf("goroutine dump: %d, names this test: %v", code, strings.Contains(body, "TestPprof"))
	}
	if code, body := o.Call(webtest.Token, "GET", "/debug/pprof/", ""); code != 200 || !strings.Contains(body, "heap") {
		t.Fatalf("index: %d", code)
	}
	if code, body := o.Call(webtest.Token, "GET", "/debug/pprof/no-such-profile", ""); code != 404 {
		t.Fatalf("an unknown profile: %d %s", code, body)
	}
	if code, body := o.Call(webtest.ReadToken, "GET", "/debug/pprof/heap", ""); code != 403 {
		t.Fatalf("a read token: %d %s", code, body)
	}
	if code, _ := o.Call("", "GET", "/debug/pprof/heap", ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	o.S.SetProfiling(false)
	if code, _ := o.Call(webtest.Token, "GET", "/debug/pprof/heap", ""); code != 404 {
		t.Fatalf("profiling off again: %d", code)
	}
}
