package web

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/web/ui"
)

// viewer is who is looking at a page: a logged-in session, or a script
// with a bearer token (which needs no CSRF token).
type viewer struct {
	id      string
	session *session
	token   Token // the bearer token, without a session
}

func (v viewer) actor() string {
	if v.session != nil {
		return v.session.actor
	}
	return v.token.actor()
}

// scope is the viewer's token's scope as it is now (a session's token's
// too).
func (v viewer) scope() Scope { return v.token.Scope }

func (v viewer) csrf() string {
	if v.session != nil {
		return v.session.csrf
	}
	return ""
}

type viewerKey struct{}

func viewerOf(r *http.Request) viewer {
	v, _ := r.Context().Value(viewerKey{}).(viewer)
	return v
}

// withViewer returns r carrying v for viewerOf.
func withViewer(r *http.Request, v viewer) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), viewerKey{}, v))
}

// uiViewer is the dashboard's view of r's viewer (ui.Options.Viewer).
func uiViewer(r *http.Request) ui.Viewer { return uiViewerOf(viewerOf(r)) }

func uiViewerOf(v viewer) ui.Viewer {
	return ui.Viewer{Actor: v.actor(), CSRF: v.csrf(), Session: v.session != nil, ReadOnly: v.scope() == ScopeRead}
}

// requireViewer admits a valid session or the bearer token, and checks
// the CSRF token of a session's POST.
func (s *Server) requireViewer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v viewer
		if tok, present, ok := s.bearer(r); present {
			if !ok {
				s.wait(r.Context(), s.fails.failed(clientIP(r), true))
				w.Header().Set("WWW-Authenticate", `Bearer realm="limiterd"`)
				s.ui.Error(w, r, http.StatusUnauthorized, "The bearer token is not one of limiterd's tokens.")
				return
			}
			v.token = tok
		} else {
			c, err := r.Cookie(sessionCookie)
			var ss *session
			ok := err == nil
			if ok {
				ss, ok = s.sess.get(c.Value)
			}
			if ok {
				// The session lasts only while its token does.
				if v.token, ok = s.tokenOf(ss.token); !ok {
					s.sess.remove(r.Context(), c.Value)
				}
			}
			if !ok {
				if r.Header.Get("HX-Request") == "true" {
					w.Header().Set("HX-Redirect", "/login")
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					http.Redirect(w, r, "/login", http.StatusSeeOther)
					return
				}
				s.ui.Error(w, r, http.StatusUnauthorized, "Log in first.")
				return
			}
			v.id, v.session = c.Value, ss
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				if !tokenOK(r.PostFormValue("csrf"), ss.csrf) {
					s.ui.Error(w, r, http.StatusForbidden, "The form's CSRF token is missing or stale: reload the page and try again.")
					return
				}
			}
		}
		if !s.allowed(w, r, v) {
			return
		}
		next.ServeHTTP(w, withViewer(r, v))
	})
}

// sessionViewer is the dashboard's view of the session of r's cookie
// (ui.Options.LoggedIn).
func (s *Server) sessionViewer(r *http.Request) ui.Viewer {
	return uiViewerOf(s.cookieViewer(r))
}

// cookieViewer returns the session of r's cookie, if it is valid.
func (s *Server) cookieViewer(r *http.Request) viewer {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if ss, ok := s.sess.get(c.Value); ok {
			return viewer{id: c.Value, session: ss}
		}
	}
	return viewer{}
}

// Login.

func (s *Server) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if _, ok := s.sess.get(c.Value); ok {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	s.ui.Login(w, r, http.StatusOK, "")
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	tok, ok := s.match(r.PostFormValue("token"))
	if !ok {
		s.wait(r.Context(), s.fails.failed(clientIP(r), false))
		s.ui.Login(w, r, http.StatusUnauthorized, "That is not the admin token.")
		return
	}
	if tok.Scope == ScopeData {
		s.ui.Login(w, r, http.StatusForbidden, "That is a data token: it may make the data-plane calls only. Log in with an admin or read token.")
		return
	}
	id, _ := s.sess.create(r.Context(), tok)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: overHTTPS(r), MaxAge: int(sessionTTL / time.Second),
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// overHTTPS reports whether the browser reached the dashboard over HTTPS:
// directly, or through a reverse proxy that says so (X-Forwarded-Proto,
// as nginx, HAProxy and load balancers send it). Believing the header
// from anyone is safe: it can only make the cookie Secure.
func overHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if v := viewerOf(r); v.session != nil {
		s.sess.remove(r.Context(), v.id)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
