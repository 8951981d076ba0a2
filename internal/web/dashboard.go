package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/static"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
)

// dashboard serves the operator pages on the admin listener: login,
// overview, peers and a peer's page, groups, exemptions, the outbound
// throttle and the audit log. It is safe for
// concurrent use and owns no goroutine.
type dashboard struct {
	s    *Server
	sess *sessions
	// activity follows the limiter's record of decisions: top talkers,
	// the request log of the what-if, the offenses to save (fed by run).
	activity *insight.Activity
}

func newDashboard(s *Server, sess *sessions) *dashboard {
	return &dashboard{s: s, sess: sess, activity: insight.NewActivity(s.lim, s.recorder(), s.now)}
}

// mount adds the dashboard's routes to the admin router.
func (d *dashboard) mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(securityHeaders, d.limitForm)
		r.Handle("/static/*", d.staticHandler())
		r.Get("/login", d.handleLoginForm)
		r.Post("/login", d.handleLogin)
		r.Group(func(r chi.Router) {
			r.Use(d.requireViewer)
			r.Post("/logout", d.handleLogout)
			r.Get("/", d.handleOverview)
			r.Get("/stats", d.handleStats)
			r.Get("/stats/history", d.handleHistory)
			r.Get("/stats/rejections", d.handleRejections)
			r.Post("/switch", d.handleSwitch)
			r.Get("/groups", d.handleGroups)
			r.Get("/groups/{group}", d.handleGroup)
			r.Post("/groups/{group}", d.handleSaveGroup)
			r.Get("/groups/{group}/whatif", d.handleWhatIfField)
			r.Post("/groups/{group}/whatif", d.handleWhatIf)
			r.Post("/groups/{group}/reset", d.handleResetGroup)
			r.Get("/offenders", d.handleOffenders)
			r.Get("/exemptions", d.handleExemptions)
			r.Post("/exemptions", d.handleAddExemption)
			r.Post("/exemptions/delete", d.handleRemoveExemption)
			r.Get("/audit", d.handleAudit)
			r.Get("/peers", d.handlePeers)
			r.Get("/peer", d.handlePeer)
			r.Get("/peer/history", d.handlePeerHistory)
			r.Post("/peer/reduce", d.handleReducePeer)
			r.Post("/peer/forget", d.handleForgetPeer)
			r.Get("/outbound", d.handleOutbound)
			r.Get("/outbound/stats", d.handleOutboundStats)
		})
	})
}

// staticHandler serves the embedded assets with a year-long cache: their
// URLs carry static.Version, which changes with their content.
func (d *dashboard) staticHandler() http.Handler {
	fs := http.StripPrefix("/static/", http.FileServerFS(static.FS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		fs.ServeHTTP(w, r)
	})
}

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

// requireViewer admits a valid session or the bearer token, and checks
// the CSRF token of a session's POST.
func (d *dashboard) requireViewer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v viewer
		if tok, present, ok := d.s.bearer(r); present {
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="limiterd"`)
				d.renderError(w, r, http.StatusUnauthorized, "The bearer token is not one of limiterd's tokens.")
				return
			}
			v.token = tok
		} else {
			c, err := r.Cookie(sessionCookie)
			var ss *session
			ok := err == nil
			if ok {
				ss, ok = d.sess.get(c.Value)
			}
			if ok {
				// The session lasts only while its token does.
				if v.token, ok = d.s.tokenOf(ss.token); !ok {
					d.sess.remove(r.Context(), c.Value)
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
				d.renderError(w, r, http.StatusUnauthorized, "Log in first.")
				return
			}
			v.id, v.session = c.Value, ss
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				if !tokenOK(r.PostFormValue("csrf"), ss.csrf) {
					d.renderError(w, r, http.StatusForbidden, "The form's CSRF token is missing or stale: reload the page and try again.")
					return
				}
			}
		}
		if !d.allowed(w, r, v) {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// flashes are the messages a redirect may ask for (?done=): a fixed set,
// so the query string cannot put text on the page.
var flashes = map[string]string{
	"saved":    "Saved.",
	"nochange": "Nothing changed.",
	"reset":    "Back to the file values.",
	"added":    "Added.",
	"removed":  "Removed.",
	"on":       "The limiter is on.",
	"off":      "The limiter is off.",
}

func (d *dashboard) page(r *http.Request, title, nav string) templates.Page {
	p := d.pageFor(r, title, viewerOf(r))
	p.Nav = nav
	return p
}

// pageFor is the layout's data for viewer v.
func (d *dashboard) pageFor(r *http.Request, title string, v viewer) templates.Page {
	p := templates.Page{
		Title: title, CSRF: v.csrf(), Asset: static.Version,
		Flash: flashes[r.URL.Query().Get("done")], Session: v.session != nil,
		ReadOnly: v.scope() == ScopeRead,
	}
	if v.session != nil || v.id != "" || r.Header.Get("Authorization") != "" {
		p.Banners = d.banners()
	}
	return p
}

func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = c.Render(r.Context(), w)
}

func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

func (d *dashboard) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := d.page(r, http.StatusText(status), "")
	p.Flash, p.FlashBad = msg, true
	render(w, r, status, templates.ErrorPage(p))
}

// fail shows err as a page with the status the admin API would use, in
// words: a validation message as it is, an error of limiterd's own as a
// pointer to its log (never Go's text).
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := statusOf(err)
	if status == http.StatusNotFound {
		d.renderNotFound(w, r)
		return
	}
	d.renderError(w, r, status, d.message(r, err))
}

// message says err in words for a page: the problem of a validation
// error, or (logging it) that something failed inside limiterd.
func (d *dashboard) message(r *http.Request, err error) string {
	var fe *live.FieldError
	var se *limiter.SettingError
	var qe *insight.QueryError
	switch {
	case errors.As(err, &fe):
		return plain(fe.Field + ": " + fe.Problem)
	case errors.As(err, &se):
		return plain(se.Key + ": " + se.Problem)
	case errors.As(err, &qe):
		return plain(qe.Problem)
	case errors.Is(err, live.ErrExists):
		return "That entry exists already."
	}
	at := d.s.now().UTC().Format("15:04:05")
	d.s.log.Error("dashboard", "method", r.Method, "path", r.URL.Path, "err", err)
	return "Something went wrong inside limiterd and nothing was changed; its log has the error (\"dashboard\", " + at + " UTC)."
}

// redirect ends a successful POST (POST-redirect-GET). htmx follows it
// with a full page load.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	if isHTMX(r) {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// maxFormBody bounds the body of every dashboard form: the largest, a
// group's edit form, is well under 2 KiB. A body is read no further, so an
// unauthenticated client posting megabytes to /login costs 8 KiB.
const maxFormBody = 8 << 10

// limitForm reads a state-changing request's form before anything else,
// at most maxFormBody bytes of it: a larger body is answered 413, one that
// does not parse 400.
func (d *dashboard) limitForm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
			if err := r.ParseForm(); err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					d.renderError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB.", maxFormBody>>10))
					return
				}
				d.renderError(w, r, http.StatusBadRequest, "The form could not be read.")
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
		s.dash.renderError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB.", maxFormBody>>10))
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

// goTails start the part of a message that is Go's own text (a parser's
// error wrapped by ours), which the pages leave out.
var goTails = []string{": ParseAddr(", ": netip.", ": strconv.", ": ParsePrefix("}

// plain returns msg without the Go error text a wrapped parser error adds
// ("\"x\": not an IP address or CIDR: ParseAddr(\"x\"): …" → "\"x\": not an IP
// address or CIDR").
func plain(msg string) string {
	for _, t := range goTails {
		if i := strings.Index(msg, t); i >= 0 {
			msg = msg[:i]
		}
	}
	return msg
}

// Login.

func (d *dashboard) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if _, ok := d.sess.get(c.Value); ok {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	render(w, r, http.StatusOK, templates.LoginPage(d.page(r, "Log in", ""), templates.Login{}))
}

func (d *dashboard) handleLogin(w http.ResponseWriter, r *http.Request) {
	ip := clientIP(r)
	p := d.page(r, "Log in", "")
	if d.s.fails.blocked(ip) {
		w.Header().Set("Retry-After", strconv.Itoa(int(authWindow/time.Second)))
		render(w, r, http.StatusTooManyRequests, templates.LoginPage(p, templates.Login{Error: "Too many failed logins from your address: wait a minute and try again."}))
		return
	}
	tok, ok := d.s.match(r.PostFormValue("token"))
	if !ok {
		d.s.fails.failed(ip)
		render(w, r, http.StatusUnauthorized, templates.LoginPage(p, templates.Login{Error: "That is not the admin token."}))
		return
	}
	if tok.Scope == ScopeData {
		render(w, r, http.StatusForbidden, templates.LoginPage(p, templates.Login{Error: "That is a data token: it may make the data-plane calls only. Log in with an admin or read token."}))
		return
	}
	id, _ := d.sess.create(r.Context(), tok)
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

func (d *dashboard) handleLogout(w http.ResponseWriter, r *http.Request) {
	if v := viewerOf(r); v.session != nil {
		d.sess.remove(r.Context(), v.id)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// Exemptions.

func (d *dashboard) handleExemptions(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.ExemptionsPage(d.page(r, "Exemptions", "/exemptions"), d.exemptions()))
}

func (d *dashboard) handleAddExemption(w http.ResponseWriter, r *http.Request) {
	e := live.Exemption{
		Kind:  live.ExemptionKind(r.PostFormValue("kind")),
		Value: strings.TrimSpace(r.PostFormValue("value")),
		Note:  strings.TrimSpace(r.PostFormValue("note")),
	}
	_, err := d.s.live.AddExemption(r.Context(), viewerOf(r).actor(), e)
	if err != nil {
		var fe *live.FieldError
		var se *limiter.SettingError
		status := http.StatusUnprocessableEntity
		switch {
		case errors.Is(err, live.ErrExists):
			status = http.StatusConflict
		case errors.As(err, &fe), errors.As(err, &se):
		default:
			d.fail(w, r, err)
			return
		}
		data := d.exemptions()
		data.Kind, data.Value, data.Note, data.Error = string(e.Kind), e.Value, e.Note, d.message(r, err)
		render(w, r, status, templates.ExemptionsPage(d.page(r, "Exemptions", "/exemptions"), data))
		return
	}
	redirect(w, r, "/exemptions?done=added")
}

func (d *dashboard) handleRemoveExemption(w http.ResponseWriter, r *http.Request) {
	e := live.Exemption{Kind: live.ExemptionKind(r.PostFormValue("kind")), Value: r.PostFormValue("value")}
	if err := d.s.live.RemoveExemption(r.Context(), viewerOf(r).actor(), e); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, "/exemptions?done=removed")
}

// Audit.

func auditValue(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func auditRow(a live.AuditEntry) templates.AuditRow {
	return templates.AuditRow{
		ID: a.ID, Time: stamp(a.Time), Actor: a.Actor, Action: a.Action,
		Target: a.Target, Old: auditValue(a.Old), New: auditValue(a.New),
	}
}

func (d *dashboard) handleAudit(w http.ResponseWriter, r *http.Request) {
	entries, err := d.s.live.Audit(r.Context(), 100, 0)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rows := make([]templates.AuditRow, 0, len(entries))
	for _, a := range entries {
		rows = append(rows, auditRow(a))
	}
	render(w, r, http.StatusOK, templates.AuditPage(d.page(r, "Audit log", "/audit"), rows))
}

// recorder returns Options.Recorder, or one that nothing feeds.
func (s *Server) recorder() *insight.Recorder {
	if s.opts.Recorder != nil {
		return s.opts.Recorder
	}
	return insight.NewRecorder(2)
}
