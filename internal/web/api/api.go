// Package api is the admin listener's JSON API (docs/api.md): the groups and
// their live limits, the peers, the exemptions and the deny list, the
// global switch, the audit log, snapshots and backups, the daemon's
// state, and the outbound throttle's calls. The admin listener (package
// web) mounts its routes behind its bearer tokens, and gives it what is
// the listener's own: who made a request, and how an error is answered.
package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// Options configure an API. Actor, Token and Fail are the admin
// listener's and must be set.
type Options struct {
	// Peers answers GET /api/v1/peers through the peer index, which the
	// listener keeps rebuilt.
	Peers *insight.PeerIndex
	// Snapshot writes a snapshot now (POST /api/v1/snapshot); nil when the
	// daemon has no persistence.
	Snapshot func(ctx context.Context) error
	// Backup writes a consistent copy of the database (GET
	// /api/v1/backup); nil leaves the route answering 501.
	Backup Backup
	// Build is the binary's version, shown by GET /api/v1/limiter.
	Build Build
	// Daemon reports the config in use and its reloads (GET
	// /api/v1/limiter); nil reports nothing.
	Daemon func() DaemonInfo
	// Throttle is the outbound throttle served at /api/v1/throttle; nil
	// leaves those routes out.
	Throttle *throttle.Throttle
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// Actor returns the audit actor of a request (its token's).
	Actor func(r *http.Request) string
	// Token returns the name of the token a request was made with ("" for
	// the main admin token) and its scope.
	Token func(r *http.Request) (name, scope string)
	// Fail answers err with the status the admin listener maps it to.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
	// Fleet returns the fleet as this instance sees it (GET
	// /api/v1/overview); full asks for every instance's groups and
	// offenders. nil leaves the route answering 501.
	Fleet func(ctx context.Context, full bool) fleet.View
}

// API serves the admin listener's JSON API. It is safe for concurrent
// use and runs nothing in the background; Close ends the throttle's
// waits.
type API struct {
	lim   *limiter.Limiter
	live  *live.Live
	peers *insight.PeerIndex
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	// throttle serves the outbound throttle; nil without Options.Throttle.
	throttle *Throttle
}

// New returns the API reading lim and editing through lv.
func New(lim *limiter.Limiter, lv *live.Live, opts Options) *API {
	a := &API{lim: lim, live: lv, peers: opts.Peers, opts: opts, log: opts.Logger, now: opts.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if opts.Throttle != nil {
		a.throttle = NewThrottle(opts.Throttle, a.now, nil)
	}
	return a
}

// Close ends what New started: outbound callers still waiting are told
// limiterd is going away (Throttle.Close).
func (a *API) Close() {
	if a.throttle != nil {
		a.throttle.Close()
	}
}

// Routes adds the API's routes to r, which the admin listener guards with
// its tokens.
func (a *API) Routes(r chi.Router) {
	r.Get("/api/v1/groups", a.handleGroups)
	r.Get("/api/v1/groups/{group}", a.handleGroup)
	r.Patch("/api/v1/groups/{group}", a.handlePatchGroup)
	r.Delete("/api/v1/groups/{group}/overrides", a.handleDeleteOverrides)
	r.Get("/api/v1/peers", a.handlePeers)
	r.Get("/api/v1/peers/*", a.handlePeer)
	r.Delete("/api/v1/peers/*", a.handleForgetPeer)
	r.Post("/api/v1/peers/*", a.handlePeerAction)
	r.Get("/api/v1/exemptions", a.handleExemptions)
	r.Post("/api/v1/exemptions", a.handleAddExemption)
	r.Delete("/api/v1/exemptions", a.handleRemoveExemption)
	r.Post("/api/v1/limiter/off", a.handleSwitch(false))
	r.Post("/api/v1/limiter/on", a.handleSwitch(true))
	r.Get("/api/v1/audit", a.handleAudit)
	r.Post("/api/v1/snapshot", a.handleSnapshot)
	r.Get("/api/v1/limiter", a.handleLimiter)
	r.Get("/api/v1/overview", a.handleOverview)
	r.Get("/api/v1/backup", a.handleBackup)
	if a.throttle != nil {
		r.Post("/api/v1/throttle", a.throttle.HandleWait)
		r.Get("/api/v1/throttle", a.throttle.HandleCheck)
		r.Post("/api/v1/throttle/observe", a.throttle.HandleObserve)
	}
}

// ErrBadRequest marks a request the API cannot read at all (the admin
// listener answers it 400).
var ErrBadRequest = errors.New("bad request")

// ErrBusy marks work the API refuses for now because as much of it as
// limiterd does at once is under way (a backup): 503 with Retry-After.
var ErrBusy = errors.New("busy")

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { a.opts.Fail(w, r, err) }

// actor is the audit actor of r.
func (a *API) actor(r *http.Request) string { return a.opts.Actor(r) }

func writeJSON(w http.ResponseWriter, status int, v any) { jsonbody.Write(w, status, v) }

func writeError(w http.ResponseWriter, status int, msg, field string) {
	jsonbody.WriteError(w, status, msg, field)
}

func (a *API) handleGroups(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"groups": a.live.Groups()})
}

func (a *API) handleGroup(w http.ResponseWriter, r *http.Request) {
	g, err := a.live.Group(chi.URLParam(r, "group"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (a *API) handlePatchGroup(w http.ResponseWriter, r *http.Request) {
	body, err := jsonbody.Read(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	g, err := a.live.PatchGroup(r.Context(), a.actor(r), chi.URLParam(r, "group"), body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (a *API) handleDeleteOverrides(w http.ResponseWriter, r *http.Request) {
	g, err := a.live.DeleteOverrides(r.Context(), a.actor(r), chi.URLParam(r, "group"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// peerEntry is one (peer, group) in API answers.
type peerEntry struct {
	Peer                string    `json:"peer"`
	Group               string    `json:"group"`
	Inflight            int64     `json:"inflight"`
	Tokens              int64     `json:"tokens"`
	Window              int64     `json:"window"`
	WindowActive        int64     `json:"window_active"`
	Requests            uint64    `json:"requests"`
	RejectedConcurrency uint64    `json:"rejected_concurrency"`
	RejectedRateLimit   uint64    `json:"rejected_rate_limit"`
	LastSeen            time.Time `json:"last_seen"`
	// Algorithm is the group's; State the entry in its terms, for every
	// algorithm but the hybrid (whose are tokens and window).
	Algorithm string     `json:"algorithm"`
	State     *algo.View `json:"state,omitempty"`
}

func toPeerEntry(v limiter.EntryView) peerEntry {
	e := peerEntry{
		Peer: v.Peer.String(), Group: v.Group, Inflight: v.Inflight, Tokens: v.Tokens,
		Window: v.Window, WindowActive: v.WindowActive, Requests: v.Requests,
		RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
		LastSeen: v.LastSeen.UTC(), Algorithm: v.Algorithm.String(),
	}
	if v.Algorithm != algo.Hybrid {
		e.State = &v.Algo
	}
	return e
}

func (a *API) handlePeers(w http.ResponseWriter, r *http.Request) {
	q, err := insight.ParsePeerQuery(r.URL.Query())
	if err == nil && q.Group != "" {
		if _, ok := a.lim.GroupID(q.Group); !ok {
			err = &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", q.Group)}
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// Through the peer index, as the dashboard: above its threshold the
	// orders and the wide searches come from its last rebuild, and the
	// answer says so ("as_of", "may_miss_newer_peers"); a search reads at
	// most its cap of entries ("capped").
	pg := a.peers.Query(q)
	out := make([]peerEntry, len(pg.Rows))
	for i, v := range pg.Rows {
		out[i] = toPeerEntry(v)
	}
	resp := map[string]any{"peers": out, "total": pg.Total}
	if pg.Capped {
		resp["capped"] = true
		resp["as_of"] = pg.AsOf.UTC().Format(time.RFC3339)
	}
	if pg.Indexed {
		resp["as_of"] = pg.AsOf.UTC().Format(time.RFC3339)
		resp["may_miss_newer_peers"] = true
		resp["note"] = fmt.Sprintf("chosen from the peer index rebuilt at as_of: peers first seen since may be missing; a search of one address or at most %d keys (an IPv4 /24) is live and complete", insight.DirectKeys)
	}
	if q.Offset+len(pg.Rows) < pg.Total {
		resp["next_cursor"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(q.Offset + len(pg.Rows))))
	}
	writeJSON(w, http.StatusOK, resp)
}

// peerParam reads the peer of /api/v1/peers/{peer}[/reduce]: an address
// ("1.2.3.4", "2001:db8::1", keyed by the configured prefix) or a key as
// the API lists them ("2001:db8::/64", "opaque:…").
func (a *API) peerParam(r *http.Request) (peer.Key, string, error) {
	rest := chi.URLParam(r, "*")
	action := ""
	if p, ok := strings.CutSuffix(rest, "/reduce"); ok {
		rest, action = p, "reduce"
	}
	if rest == "" {
		return peer.Key{}, "", &limiter.FieldError{Field: "peer", Problem: "missing"}
	}
	if p, err := a.lim.ParsePeer(rest); err == nil {
		return p.Key, action, nil
	}
	k, err := peer.ParseKey(rest)
	if err != nil {
		return k, "", &limiter.FieldError{Field: "peer", Problem: err.Error()}
	}
	return k, action, nil
}

func (a *API) handlePeer(w http.ResponseWriter, r *http.Request) {
	k, action, err := a.peerParam(r)
	if err == nil && action != "" {
		err = fmt.Errorf("%w: GET on an action", ErrBadRequest)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	views := a.lim.Peer(a.now(), k)
	if len(views) == 0 {
		a.fail(w, r, fmt.Errorf("peer %s: %w (not tracked)", k, live.ErrNotFound))
		return
	}
	out := make([]peerEntry, len(views))
	for i, v := range views {
		out[i] = toPeerEntry(v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "groups": out})
}

func (a *API) handleForgetPeer(w http.ResponseWriter, r *http.Request) {
	k, action, err := a.peerParam(r)
	if err == nil && action != "" {
		err = fmt.Errorf("%w: DELETE on an action", ErrBadRequest)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n := a.lim.Forget(k)
	if err := a.live.Record(r.Context(), a.actor(r), "peer.forget", k.String(), n, nil); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "forgotten": n})
}

func (a *API) handlePeerAction(w http.ResponseWriter, r *http.Request) {
	k, action, err := a.peerParam(r)
	if err == nil && action != "reduce" {
		err = fmt.Errorf("%w: unknown peer action", live.ErrNotFound)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	name := r.URL.Query().Get("group")
	if name == "" {
		name = limiter.GroupGeneral
	}
	g, ok := a.lim.GroupID(name)
	if !ok || g == limiter.LocalPeers {
		a.fail(w, r, &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", name)})
		return
	}
	res := a.lim.Reduce(a.now(), k, g)
	if err := a.live.Record(r.Context(), a.actor(r), "peer.reduce", k.String()+" "+name, nil, res.String()); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "group": name, "result": res.String()})
}

// handleExemptions answers GET /api/v1/exemptions: the live exemptions
// in the order they were added, a page at a time (limit, 1–10000, 1000 by
// default; cursor, the "next" of the page before), and the file's.
func (a *API) handleExemptions(w http.ResponseWriter, r *http.Request) {
	limit, from := 1000, 0
	q := r.URL.Query()
	if x := q.Get("limit"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > 10000 {
			a.fail(w, r, &limiter.FieldError{Field: "limit", Problem: "an integer from 1 to 10000"})
			return
		}
		limit = n
	}
	if x := q.Get("cursor"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			a.fail(w, r, &limiter.FieldError{Field: "cursor", Problem: `the "next" of the page before`})
			return
		}
		from = n
	}
	added, file := a.live.Exemptions()
	resp := map[string]any{"file": file, "total": len(added)}
	page := added[min(from, len(added)):min(from+limit, len(added))]
	if page == nil {
		page = []live.Exemption{}
	}
	resp["exemptions"] = page
	if from+limit < len(added) {
		resp["next"] = strconv.Itoa(from + limit)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *API) handleAddExemption(w http.ResponseWriter, r *http.Request) {
	e, err := a.exemptionBody(r)
	if err == nil {
		e, err = a.live.AddExemption(r.Context(), a.actor(r), e)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, e)
}

func (a *API) handleRemoveExemption(w http.ResponseWriter, r *http.Request) {
	e, err := a.exemptionBody(r)
	if err == nil {
		err = a.live.RemoveExemption(r.Context(), a.actor(r), e)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": e.Value})
}

func (a *API) handleSwitch(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := a.live.SetEnabled(r.Context(), a.actor(r), on); err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"enabled": a.lim.Enabled()})
	}
}

func (a *API) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	if a.opts.Snapshot == nil {
		writeError(w, http.StatusNotImplemented, "this daemon keeps no snapshots yet (persistence is not configured)", "")
		return
	}
	start := time.Now()
	if err := a.opts.Snapshot(r.Context()); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"written": true, "duration_ms": time.Since(start).Milliseconds()})
}
