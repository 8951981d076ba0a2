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
// memory. No route of the admin listener takes more (Read's bound), so a
// client cannot make limiterd read, nor any handler take, a huge body,
// including the handlers that ignore theirs. A 413 closes the connection.
func Bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ContentLength > MaxBody:
			tooLarge(w)
			return
		case r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody:
			b, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
			var mb *http.MaxBytesError
			switch {
			case len(b) > MaxBody || errors.As(err, &mb):
				tooLarge(w)
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

func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBody), "")
}
