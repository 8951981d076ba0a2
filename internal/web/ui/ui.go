// Package ui is the dashboard on the admin listener: its pages, the
// partials htmx swaps and the JSON its charts poll, and the forms that
// change the limiter (the templ components in ui/templates, the embedded
// assets in ui/static). Every page works without JavaScript. The admin
// listener (package web) mounts its routes behind its sessions and
// tokens, and gives it who looks at a page (Options.Viewer) and the
// status an error maps to (Options.Status); ui never imports web.
package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web/ui/static"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Options configure a Dashboard. History, Peers, PeerHistory and Activity
// are the records the admin listener keeps and feeds (its Run); Viewer,
// LoggedIn and Status are the listener's and must be set.
type Options struct {
	// History is the per-second history of the counters.
	History *insight.History
	// Peers answers the peer queries on large tables.
	Peers *insight.PeerIndex
	// PeerHistory is the history of the busiest and the viewed peers.
	PeerHistory *insight.PeerHistory
	// Activity follows the limiter's record of decisions: top talkers,
	// the request log of the what-if, the offenses not saved yet.
	Activity *insight.Activity
	// Offenses is the record of offenders (who the limiter rejected in the
	// last 24 hours); nil when none is kept.
	Offenses OffenseStore
	// Throttle is the outbound throttle the outbound page shows; nil when
	// there is none.
	Throttle *throttle.Throttle
	// KeyHelp is the one-line help of each group key (config.toml's), shown
	// on the groups' forms.
	KeyHelp map[string]string
	// Conditions reports states every page shows as a banner (cluster
	// mode: its store unreachable); nil reports none.
	Conditions func() []Condition
	// Cluster reports cluster mode's state for the overview's line on
	// where the limits live; nil when they are this instance's own.
	Cluster ClusterStatus
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// Viewer returns who looks at the page r asks for, as the admin
	// listener's authentication found them (the zero Viewer before it).
	Viewer func(r *http.Request) Viewer
	// LoggedIn returns the viewer of r's session cookie while the session
	// lasts (the zero Viewer otherwise), whether or not r passed the
	// listener's authentication: the not-found and not-allowed pages show
	// a logged-in browser its menu.
	LoggedIn func(r *http.Request) Viewer
	// Status returns the status the admin listener answers err with, and
	// the request field at fault when one is named.
	Status func(err error) (status int, field string)
	// Fleet returns the fleet as this instance sees it: its own summary
	// (health, and with full its groups' rates and top offenders over the
	// now window) and, in cluster mode, the other instances'. Must be set.
	Fleet func(ctx context.Context, full bool) fleet.View
	// NowWindow returns what "now" covers (admin.now_window); nil: 30 s.
	NowWindow func() time.Duration
	// TokenHint says on the login page where the admin token is ("" says
	// nothing).
	TokenHint string
}

// Viewer is who looks at a page.
type Viewer struct {
	// Actor is who the audit log says made a change.
	Actor string
	// CSRF is the session's token for state-changing forms; "" for a
	// bearer token (which needs none).
	CSRF string
	// Session is true when the viewer logged in through the form (and may
	// log out).
	Session bool
	// ReadOnly is true for a token of scope read: every page, no change.
	ReadOnly bool
}

// OffenseStore reads the record of offenders.
type OffenseStore interface {
	Offenses(ctx context.Context, now time.Time, peer peer.Key) ([]live.Offense, error)
	RecentOffenses(ctx context.Context, now time.Time, n int) ([]live.Offense, int, error)
}

// Dashboard serves the operator pages: overview, peers and a peer's page,
// groups, exemptions, the outbound throttle, offenders and the audit log,
// the login page and the error pages. It is safe for concurrent use and
// owns no goroutine.
type Dashboard struct {
	lim      *limiter.Limiter
	live     *live.Live
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	history  *insight.History
	peers    *insight.PeerIndex
	peerHist *insight.PeerHistory
	activity *insight.Activity
}

// New returns the dashboard reading lim and editing through lv.
func New(lim *limiter.Limiter, lv *live.Live, opts Options) *Dashboard {
	d := &Dashboard{lim: lim, live: lv, opts: opts, log: opts.Logger, now: opts.Now,
		history: opts.History, peers: opts.Peers, peerHist: opts.PeerHistory, activity: opts.Activity}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	return d
}

// Routes adds the pages, their forms and the endpoints their scripts poll
// to r, which the admin listener guards with its sessions and tokens.
func (d *Dashboard) Routes(r chi.Router) {
	r.Get("/", d.handleOverview)
	r.Get("/stats", d.handleStats)
	r.Get("/stats/history", d.handleHistory)
	r.Get("/stats/rejections", d.handleRejections)
	r.Get("/stats/health", d.handleHealth)
	r.Get("/stats/problems", d.handleProblems)
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
}

// StaticRoutes adds the embedded assets, at /static/, to r.
func StaticRoutes(r chi.Router) { r.Handle("/static/*", staticHandler()) }

// staticHandler serves the embedded assets with a year-long cache: their
// URLs carry static.Version, which changes with their content.
func staticHandler() http.Handler {
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

// SecurityHeaders sets the headers every dashboard response carries: a
// Content-Security-Policy that admits the embedded assets alone, no
// framing, no sniffing.
func SecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
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

// viewer is who looks at the page r asks for.
func (d *Dashboard) viewer(r *http.Request) Viewer { return d.opts.Viewer(r) }

func (d *Dashboard) page(r *http.Request, title, nav string) templates.Page {
	p := d.pageFor(r, title, d.viewer(r))
	p.Nav = nav
	return p
}

// pageFor is the layout's data for viewer v.
func (d *Dashboard) pageFor(r *http.Request, title string, v Viewer) templates.Page {
	p := templates.Page{
		Title: title, CSRF: v.CSRF, Asset: static.Version,
		Flash: flashes[r.URL.Query().Get("done")], Session: v.Session,
		ReadOnly: v.ReadOnly,
	}
	if v.Session || r.Header.Get("Authorization") != "" {
		p.Banners = d.banners()
		fv := d.opts.Fleet(r.Context(), false)
		p.Health = healthStrip(&fv, d.now())
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

// Error answers status with msg on a page of the dashboard's layout.
func (d *Dashboard) Error(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := d.page(r, http.StatusText(status), "")
	p.Flash, p.FlashBad = msg, true
	render(w, r, status, templates.ErrorPage(p))
}

// fail shows err as a page with the status the admin API would use, in
// words: a validation message as it is, an error of limiterd's own as a
// pointer to its log (never Go's text).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := d.opts.Status(err)
	if status == http.StatusNotFound {
		d.NotFound(w, r)
		return
	}
	d.Error(w, r, status, d.message(r, err))
}

// message says err in words for a page: the problem of a validation
// error, or (logging it) that something failed inside limiterd.
func (d *Dashboard) message(r *http.Request, err error) string {
	var fe *limiter.FieldError
	switch {
	case errors.As(err, &fe) && fe.Field == "":
		return plain(fe.Problem)
	case errors.As(err, &fe):
		return plain(jsonbody.BodyField(fe.Field) + ": " + fe.Problem)
	case errors.Is(err, live.ErrExists):
		return "That entry exists already."
	}
	at := d.now().UTC().Format("15:04:05")
	d.log.Error("dashboard", "method", r.Method, "path", r.URL.Path, "err", err)
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

// Login answers status with the login page, saying problem ("" for none).
func (d *Dashboard) Login(w http.ResponseWriter, r *http.Request, status int, problem string) {
	render(w, r, status, templates.LoginPage(d.page(r, "Log in", ""), templates.Login{Error: problem, TokenHint: d.opts.TokenHint}))
}

// Exemptions.

func (d *Dashboard) handleExemptions(w http.ResponseWriter, r *http.Request) {
	render(w, r, http.StatusOK, templates.ExemptionsPage(d.page(r, "Exemptions", "/exemptions"), d.exemptions(r.URL.Query())))
}

func (d *Dashboard) handleAddExemption(w http.ResponseWriter, r *http.Request) {
	e := live.Exemption{
		Kind:  live.ExemptionKind(r.PostFormValue("kind")),
		Value: strings.TrimSpace(r.PostFormValue("value")),
		Note:  strings.TrimSpace(r.PostFormValue("note")),
	}
	expires := strings.TrimSpace(r.PostFormValue("expires"))
	var err error
	if e.Expires, err = live.ParseExpiry(expires, d.now()); err == nil {
		_, err = d.live.AddExemption(r.Context(), d.viewer(r).Actor, e)
	}
	if err != nil {
		// A conflict or a value refused shows the form again.
		status, _ := d.opts.Status(err)
		if status != http.StatusConflict && status != http.StatusUnprocessableEntity {
			d.fail(w, r, err)
			return
		}
		data := d.exemptions(r.URL.Query())
		data.Kind, data.Value, data.Note, data.Expires, data.Error = string(e.Kind), e.Value, e.Note, expires, d.message(r, err)
		render(w, r, status, templates.ExemptionsPage(d.page(r, "Exemptions", "/exemptions"), data))
		return
	}
	redirect(w, r, "/exemptions?done=added")
}

func (d *Dashboard) handleRemoveExemption(w http.ResponseWriter, r *http.Request) {
	e := live.Exemption{Kind: live.ExemptionKind(r.PostFormValue("kind")), Value: r.PostFormValue("value")}
	if err := d.live.RemoveExemption(r.Context(), d.viewer(r).Actor, e); err != nil {
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
	r := templates.AuditRow{
		ID: a.ID, Time: stamp(a.Time), Actor: a.Actor, Action: a.Action,
		Target: a.Target, Old: auditValue(a.Old), New: auditValue(a.New), Note: a.Note,
	}
	if !a.Expires.IsZero() {
		r.Expires = stamp(a.Expires)
	}
	return r
}

// auditSince are the audit page's choices of how far back to look.
var auditSince = []templates.Choice{{Value: "", Label: "any time"}, {Value: "1h", Label: "last hour"},
	{Value: "24h", Label: "last 24 hours"}, {Value: "168h", Label: "last 7 days"}, {Value: "720h", Label: "last 30 days"}}

// auditChoicesScan is how many of the newest entries the audit page reads
// for the actions and actors its filters suggest (about 1 ms from bbolt).
const auditChoicesScan = 200

// handleAudit serves GET /audit?action=&actor=&since=&before=: the newest
// 100 entries the filters keep (live.QueryAudit: an action or its family,
// an actor exactly, how far back), with a link to the older ones.
func (d *Dashboard) handleAudit(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	data := templates.Audit{Action: strings.TrimSpace(in.Get("action")), Actor: strings.TrimSpace(in.Get("actor")), Since: in.Get("since"), SinceChoices: auditSince}
	q := live.AuditQuery{Limit: 100, Action: data.Action, Actor: data.Actor}
	status := http.StatusOK
	if data.Since != "" {
		if dur, err := time.ParseDuration(data.Since); err == nil && dur > 0 {
			q.Since = d.now().Add(-dur)
		} else {
			data.Error, status = fmt.Sprintf("%q is not a duration back from now such as 24h", data.Since), http.StatusUnprocessableEntity
		}
	}
	if b := in.Get("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil {
			data.Error, status = fmt.Sprintf("%q is not an audit entry number", b), http.StatusUnprocessableEntity
		}
		q.Before = n
	}
	// The filters' suggestions: the families and actions, and the actors,
	// of the newest entries.
	recent, err := d.live.Audit(r.Context(), auditChoicesScan, 0)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	actions, actors := map[string]bool{}, map[string]bool{}
	for _, a := range recent {
		actions[a.Action] = true
		if fam, _, ok := strings.Cut(a.Action, "."); ok {
			actions[fam] = true
		}
		actors[a.Actor] = true
	}
	data.Actions, data.Actors = slices.Sorted(maps.Keys(actions)), slices.Sorted(maps.Keys(actors))
	if status == http.StatusOK {
		var page live.AuditPage
		var err error
		data.Filtered = data.Action != "" || data.Actor != "" || data.Since != ""
		if data.Filtered {
			page, err = d.live.QueryAudit(r.Context(), q)
		} else {
			// No filter: the newest entries as they are, one more to know
			// whether older ones are left.
			page.Entries, err = d.live.Audit(r.Context(), q.Limit+1, q.Before)
			if len(page.Entries) > q.Limit {
				page.Entries = page.Entries[:q.Limit]
				page.Next = page.Entries[q.Limit-1].ID
			}
		}
		if err != nil {
			d.fail(w, r, err)
			return
		}
		for _, a := range page.Entries {
			data.Rows = append(data.Rows, auditRow(a))
		}
		if page.Next != 0 {
			v := url.Values{}
			for _, k := range []string{"action", "actor", "since"} {
				if x := in.Get(k); x != "" {
					v.Set(k, x)
				}
			}
			v.Set("before", strconv.FormatUint(page.Next, 10))
			data.Older = "/audit?" + v.Encode()
		}
	}
	render(w, r, status, templates.AuditPage(d.page(r, "Audit log", "/audit"), data))
}
