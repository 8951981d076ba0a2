package web

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/api"
)

// statusOf maps an error to the status the admin API and the dashboard
// answer it with, and the request field at fault when one is named: the
// one place that does (docs/api.md, "Errors"). A bad request is answered as package
// jsonbody's StatusOf says (422 naming the field, 400), a setting of a
// group naming the key as the live edit's body does; an error it does not
// know is a 500.
func statusOf(err error) (status int, field string) {
	if status, field, ok := jsonbody.StatusOf(err); ok {
		return status, jsonbody.BodyField(field)
	}
	switch {
	case errors.Is(err, api.ErrBadRequest):
		return http.StatusBadRequest, ""
	case errors.Is(err, live.ErrNotFound):
		return http.StatusNotFound, ""
	case errors.Is(err, api.ErrBusy):
		return http.StatusServiceUnavailable, ""
	case errors.Is(err, live.ErrExists):
		return http.StatusConflict, ""
	}
	return http.StatusInternalServerError, ""
}

// recoverPanic logs a panic of an admin handler at ERROR with its route
// and stack (net/http alone would log it through ErrorLog, at debug level,
// unseen) and answers 500 (appended to the answer, if it had begun).
// http.ErrAbortHandler passes through: it is how a handler cuts a
// connection on purpose.
func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("admin listener: internal error", "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal error: a bug in limiterd; its log has it", "")
		}()
		next.ServeHTTP(w, r)
	})
}

// wantsHTML reports whether r is a browser's: its Accept names text/html.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// notFound answers an unknown address: an HTML page in the layout for a
// browser (outside /api/), the JSON error for everyone else.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) && !strings.HasPrefix(r.URL.Path, "/api/") {
		s.ui.NotFound(w, r)
		return
	}
	writeError(w, http.StatusNotFound, "no such endpoint", "")
}

// methodNotAllowed is notFound's twin for a known address.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) && !strings.HasPrefix(r.URL.Path, "/api/") {
		s.ui.MethodNotAllowed(w, r)
		return
	}
	writeError(w, http.StatusMethodNotAllowed, "method not allowed", "")
}
