package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/live"
	"github.com/limiterd/limiterd/static"
	"github.com/limiterd/limiterd/templates"
)

// dashboard serves the operator pages on the admin listener: login,
// overview, peers and a peer's page, groups, exemptions, the outbound
// throttle and the audit log. It is safe for
// concurrent use and owns no goroutine.
type dashboard struct {
	s    *Server
	sess *sessions
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
			r.Post("/switch", d.handleSwitch)
			r.Get("/groups", d.handleGroups)
			r.Post("/groups/{group}", d.handleSaveGroup)
			r.Post("/groups/{group}/reset", d.handleResetGroup)
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
// with the bearer token (which needs no CSRF token).
type viewer struct {
	id      string
	session *session
}

func (v viewer) actor() string {
	if v.session != nil {
		return v.session.actor
	}
	return actorToken
}

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
		if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if !tokenOK(got, d.s.opts.Token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="limiterd"`)
				d.renderError(w, r, http.StatusUnauthorized, "The bearer token is not the admin token.")
				return
			}
		} else {
			c, err := r.Cookie(sessionCookie)
			var ss *session
			ok := err == nil
			if ok {
				ss, ok = d.sess.get(c.Value)
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
			v = viewer{id: c.Value, session: ss}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				if !tokenOK(r.PostFormValue("csrf"), ss.csrf) {
					d.renderError(w, r, http.StatusForbidden, "The form's CSRF token is missing or stale: reload the page and try again.")
					return
				}
			}
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
	v := viewerOf(r)
	return templates.Page{
		Title: title, Nav: nav, CSRF: v.csrf(), Asset: static.Version,
		Flash: flashes[r.URL.Query().Get("done")], Session: v.session != nil,
	}
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

// fail shows err as a page with the status the admin API would use.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := statusOf(err)
	if status == http.StatusInternalServerError {
		d.s.log.Error("dashboard", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	d.renderError(w, r, status, err.Error())
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
	if !tokenOK(r.PostFormValue("token"), d.s.opts.Token) {
		d.s.fails.failed(ip)
		render(w, r, http.StatusUnauthorized, templates.LoginPage(p, templates.Login{Error: "That is not the admin token."}))
		return
	}
	id, _ := d.sess.create(r.Context())
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

// Overview.

func (d *dashboard) overview() templates.Overview {
	now := d.s.now()
	stats := d.s.lim.Stats()
	modes := map[string]string{}
	for _, g := range d.s.live.Groups() {
		modes[g.Name] = g.Mode
	}
	o := templates.Overview{Enabled: d.s.lim.Enabled(), Now: now.UTC().Format(time.RFC3339)}
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		mode := modes[name]
		if mode == "" {
			mode = "—"
		}
		o.Groups = append(o.Groups, templates.GroupRow{Name: name, Mode: mode, Stats: stats[name]})
	}
	pg := d.s.peers.Query(insight.PeerQuery{Sort: "rejections", Limit: 10})
	top, total := pg.Rows, pg.Total
	o.Tracked = total
	for _, v := range top {
		o.TopPeers = append(o.TopPeers, templates.PeerRow{
			Peer: v.Peer.String(), Group: v.Group, Requests: v.Requests,
			RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
			Inflight: v.Inflight, Tokens: v.Tokens, LastSeen: v.LastSeen.UTC().Format(time.RFC3339),
		})
	}
	return o
}

func (d *dashboard) handleOverview(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.OverviewPage(d.page(r, "Overview", "/"), d.overview(), d.charts()))
}

func (d *dashboard) handleStats(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.Stats(d.overview()))
}

func (d *dashboard) handleSwitch(w http.ResponseWriter, r *http.Request) {
	on, err := strconv.ParseBool(r.PostFormValue("on"))
	if err != nil {
		d.fail(w, r, &live.FieldError{Field: "on", Problem: "must be true or false"})
		return
	}
	if err := d.s.live.SetEnabled(r.Context(), viewerOf(r).actor(), on); err != nil {
		d.fail(w, r, err)
		return
	}
	done := "off"
	if on {
		done = "on"
	}
	redirect(w, r, "/?done="+done)
}

// Groups.

func keyKind(k string) string {
	switch k {
	case limiter.KeyManualReductionOff:
		return "bool"
	case limiter.KeyMode:
		return "mode"
	case limiter.KeyAlgorithm:
		return "algorithm"
	}
	return "int"
}

// usedBy reports whether the group's algorithm reads key: the hybrid
// ignores limit, period and burst; the others ignore the hybrid's keys
// (but concurrency, the mode and manual reduction); burst is the token
// bucket's and GCRA's only.
func usedBy(k algo.Kind, key string) bool {
	switch key {
	case limiter.KeyConcurrencyLimit, limiter.KeyManualReductionOff, limiter.KeyMode, limiter.KeyAlgorithm:
		return true
	case limiter.KeyLimit, limiter.KeyPeriod:
		return k != algo.Hybrid
	case limiter.KeyBurst:
		return k.HasBurst()
	}
	return k == algo.Hybrid
}

// groupSummary says what a group admits, in its algorithm's terms.
func groupSummary(s limiter.GroupSettings) string {
	per := fmt.Sprintf("%d per %s", s.Limit, time.Duration(s.Period)*time.Millisecond)
	switch s.Algorithm {
	case algo.Hybrid:
		return fmt.Sprintf("hybrid (Arweave): %d per %d ms sliding window, then %d tokens leaking %d every %d ms; %d in flight",
			s.SlidingWindowLimit, s.SlidingWindowDuration, s.LeakyLimit, s.LeakyTickReduction, s.LeakyTickInterval, s.ConcurrencyLimit)
	case algo.TokenBucket, algo.GCRA:
		p := s.Params()
		return fmt.Sprintf("%s: %s, bursts of up to %d (one every %s after); %d in flight", s.Algorithm, per, p.Burst,
			time.Duration(p.Period*int64(time.Millisecond)/p.Limit), s.ConcurrencyLimit)
	case algo.FixedWindow:
		return fmt.Sprintf("fixed_window: %s, windows aligned on the clock; %d in flight", per, s.ConcurrencyLimit)
	case algo.SlidingLog:
		return fmt.Sprintf("sliding_log: %s, in any window of that length; %d in flight", per, s.ConcurrencyLimit)
	}
	return fmt.Sprintf("sliding_window: about %s, estimated from this and the previous window; %d in flight", per, s.ConcurrencyLimit)
}

// groupForm is the form of v, showing submitted values (if any) in place
// of the effective ones and err next to its key.
func groupForm(v live.GroupView, submitted map[string]string, err error) templates.GroupForm {
	f := templates.GroupForm{Name: v.Name, HasOverride: len(v.Override) > 0, Summary: groupSummary(v.Effective)}
	eff := live.Values(v.Effective)
	field, msg := "", ""
	if err != nil {
		msg = err.Error()
		var fe *live.FieldError
		var se *limiter.SettingError
		switch {
		case errors.As(err, &fe):
			field, msg = fe.Field, fe.Problem
		case errors.As(err, &se):
			field, msg = se.Key, se.Problem
		}
		if !slices.Contains(limiter.GroupKeys, field) {
			f.Error, field = err.Error(), ""
		}
	}
	for _, k := range limiter.GroupKeys {
		_, over := v.Override[k]
		fl := templates.Field{Key: k, Kind: keyKind(k), Value: fmt.Sprint(eff[k]), File: fmt.Sprint(v.File[k]), Overridden: over,
			Unused: !usedBy(v.Effective.Algorithm, k)}
		if fl.Kind == "algorithm" {
			fl.Choices = algo.Names()
		}
		if s, ok := submitted[k]; ok {
			fl.Value = s
		}
		if k == field {
			fl.Error = msg
		}
		f.Fields = append(f.Fields, fl)
	}
	return f
}

func (d *dashboard) handleGroups(w http.ResponseWriter, r *http.Request) {
	var forms []templates.GroupForm
	for _, v := range d.s.live.Groups() {
		forms = append(forms, groupForm(v, nil, nil))
	}
	render(w, r, http.StatusOK, templates.GroupsPage(d.page(r, "Groups", "/groups"), forms))
}

// groupPatch turns the posted form into a live edit of the keys whose
// value differs from the effective one.
func groupPatch(v live.GroupView, form map[string][]string) (map[string]string, map[string]any, error) {
	eff := live.Values(v.Effective)
	submitted := map[string]string{}
	patch := map[string]any{}
	var firstErr error
	for _, k := range limiter.GroupKeys {
		vals, ok := form[k]
		if !ok || len(vals) == 0 {
			continue
		}
		s := strings.TrimSpace(vals[0])
		submitted[k] = s
		if s == fmt.Sprint(eff[k]) {
			continue
		}
		switch keyKind(k) {
		case "bool":
			b, err := strconv.ParseBool(s)
			if err != nil && firstErr == nil {
				firstErr = &live.FieldError{Field: k, Problem: "must be true or false"}
			}
			patch[k] = b
		case "mode", "algorithm":
			patch[k] = s
		default:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil && firstErr == nil {
				firstErr = &live.FieldError{Field: k, Problem: fmt.Sprintf("must be an integer, got %q", s)}
			}
			patch[k] = n
		}
	}
	return submitted, patch, firstErr
}

func (d *dashboard) handleSaveGroup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "group")
	v, err := d.s.live.Group(name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	submitted, patch, err := groupPatch(v, r.PostForm)
	if err == nil && len(patch) == 0 {
		d.groupDone(w, r, v, "nochange")
		return
	}
	if err == nil {
		var body []byte
		body, err = json.Marshal(patch)
		if err == nil {
			v, err = d.s.live.PatchGroup(r.Context(), viewerOf(r).actor(), name, body)
		}
	}
	var fe *live.FieldError
	var se *limiter.SettingError
	if errors.As(err, &fe) || errors.As(err, &se) {
		// Nothing changed: show the form again with the message.
		cur, gerr := d.s.live.Group(name)
		if gerr != nil {
			d.fail(w, r, gerr)
			return
		}
		form := groupForm(cur, submitted, err)
		if isHTMX(r) {
			render(w, r, http.StatusUnprocessableEntity, templates.GroupFormCard(viewerOf(r).csrf(), form))
			return
		}
		var forms []templates.GroupForm
		for _, g := range d.s.live.Groups() {
			if g.Name == name {
				forms = append(forms, form)
			} else {
				forms = append(forms, groupForm(g, nil, nil))
			}
		}
		p := d.page(r, "Groups", "/groups")
		p.Flash, p.FlashBad = "Not saved: "+err.Error(), true
		render(w, r, http.StatusUnprocessableEntity, templates.GroupsPage(p, forms))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.groupDone(w, r, v, "saved")
}

// groupDone answers a successful save: the refreshed form for htmx, a
// redirect to the groups page otherwise.
func (d *dashboard) groupDone(w http.ResponseWriter, r *http.Request, v live.GroupView, done string) {
	if isHTMX(r) {
		form := groupForm(v, nil, nil)
		form.Notice = flashes[done]
		render(w, r, http.StatusOK, templates.GroupFormCard(viewerOf(r).csrf(), form))
		return
	}
	http.Redirect(w, r, "/groups?done="+done+"#group-"+v.Name, http.StatusSeeOther)
}

func (d *dashboard) handleResetGroup(w http.ResponseWriter, r *http.Request) {
	if _, err := d.s.live.DeleteOverrides(r.Context(), viewerOf(r).actor(), chi.URLParam(r, "group")); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, "/groups?done=reset")
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
		data.Kind, data.Value, data.Note, data.Error = string(e.Kind), e.Value, e.Note, err.Error()
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
		ID: a.ID, Time: a.Time.UTC().Format(time.RFC3339), Actor: a.Actor, Action: a.Action,
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
