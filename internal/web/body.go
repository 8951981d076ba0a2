package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/limiterd/limiterd/internal/jsonbody"
)

// maxFormBody bounds the body of every dashboard form: the largest, a
// group's edit form, is well under 2 KiB. A body is read no further, so an
// unauthenticated client posting megabytes to /login costs 8 KiB.
const maxFormBody = 8 << 10

// limitForm reads a state-changing request's form before anything else,
// at most maxFormBody bytes of it: a larger body is answered 413, one that
// does not parse 400.
func (s *Server) limitForm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
			if err := r.ParseForm(); err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					s.ui.Error(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB.", maxFormBody>>10))
					return
				}
				s.ui.Error(w, r, http.StatusBadRequest, "The form could not be read.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// boundBody refuses a body over its route's bound before any handler
// runs, even one that ignores its body (jsonbody.BoundedBy): the API's,
// the metrics' and the health checks' at jsonbody.MaxBody, answered in
// JSON; the dashboard's (its forms, and its pages, which take none) at
// maxFormBody, answered with its page, so that an unauthenticated post
// to /login costs 8 KiB even chunked.
func (s *Server) boundBody(next http.Handler) http.Handler {
	api := jsonbody.Bounded(next)
	dash := jsonbody.BoundedBy(maxFormBody, func(w http.ResponseWriter, r *http.Request) {
		s.ui.Error(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB.", maxFormBody>>10))
	})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/api/"), p == "/metrics", p == "/healthz", p == "/readyz":
			api.ServeHTTP(w, r)
		default:
			dash.ServeHTTP(w, r)
		}
	})
}
