package jsonbody

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Bounded refuses, before next runs, a request whose body is over MaxBody:
// one announced larger (Content-Length) is answered 413 unread; one of
// unknown length (chunked) is read first, at most MaxBody and a byte, and
// answered 413 beyond, 400 if it cannot be read; next gets it whole from
// memory. No route of the admin API takes more (Read's bound), so a client
// cannot make limiterd read, nor any handler take, a huge body, including
// the handlers that ignore theirs. A 413 closes the connection.
func Bounded(next http.Handler) http.Handler { return BoundedBy(MaxBody, nil)(next) }

// BoundedBy is Bounded with a bound of its own, limit, and tooLarge to
// answer the 413 (nil: the JSON error, naming the bound).
func BoundedBy(limit int64, tooLarge func(http.ResponseWriter, *http.Request)) func(http.Handler) http.Handler {
	refuse := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if tooLarge != nil {
			tooLarge(w, r)
			return
		}
		WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", limit), "")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.ContentLength > limit:
				refuse(w, r)
				return
			case r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody:
				b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
				var mb *http.MaxBytesError
				switch {
				case int64(len(b)) > limit || errors.As(err, &mb):
					refuse(w, r)
					return
				case err != nil:
					w.Header().Set("Connection", "close")
					WriteError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err), "")
					return
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
			next.ServeHTTP(w, r)
		})
	}
}
