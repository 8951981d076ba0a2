package jsonbody

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// endless is a body that never ends, counting what is read of it.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestBounded: a body announced over MaxBody is refused unread, one of
// unknown length read no further than MaxBody and a byte, both 413 with
// the connection closed; one within the bound reaches the handler whole.
func TestBounded(t *testing.T) {
	var got string
	h := Bounded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
	}))
	for _, announced := range []bool{true, false} {
		body := &endless{}
		r := httptest.NewRequest("POST", "/api/v1/exemptions", body)
		r.ContentLength = -1
		if announced {
			r.ContentLength = 1 << 30
		}
		w := httptest.NewRecorder()
		got = "not called"
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `"the body is larger than 65536 bytes"`) ||
			w.Header().Get("Connection") != "close" {
			t.Errorf("announced %v: %d %q %v", announced, w.Code, w.Body, w.Header())
		}
		if got != "not called" {
			t.Errorf("announced %v: the handler ran", announced)
		}
		if limit := int64(MaxBody + 4096); body.n > limit || (announced && body.n != 0) {
			t.Errorf("announced %v: %d bytes read of the body", announced, body.n)
		}
	}
	r := httptest.NewRequest("POST", "/x", io.MultiReader(strings.NewReader(strings.Repeat("b", MaxBody))))
	r.ContentLength = -1
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || len(got) != MaxBody {
		t.Errorf("a body of MaxBody bytes: %d, the handler got %d bytes", w.Code, len(got))
	}
}

// TestBoundedBy: a bound of its own, answered by the caller's page.
func TestBoundedBy(t *testing.T) {
	h := BoundedBy(10, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, "the form is too large")
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	body := &endless{}
	r := httptest.NewRequest("POST", "/login", body)
	r.ContentLength = -1
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || w.Body.String() != "the form is too large" || w.Header().Get("Connection") != "close" {
		t.Errorf("%d %q %v", w.Code, w.Body, w.Header())
	}
	if body.n > 4096 {
		t.Errorf("%d bytes read of the body, bound 10", body.n)
	}
}
