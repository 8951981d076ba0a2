package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

// auditQuery reads GET /api/v1/audit's parameters: limit (1–1000),
// before (an entry id), action (an action or its family: "exemption"),
// actor (exact), since (RFC 3339, or a duration back from now: "24h").
func (a *API) auditQuery(r *http.Request) (live.AuditQuery, error) {
	q := live.AuditQuery{Limit: 100}
	v := r.URL.Query()
	if x := v.Get("limit"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > 1000 {
			return q, &limiter.FieldError{Field: "limit", Problem: "an integer from 1 to 1000"}
		}
		q.Limit = n
	}
	if x := v.Get("before"); x != "" {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return q, &limiter.FieldError{Field: "before", Problem: "an audit entry id"}
		}
		q.Before = n
	}
	q.Action, q.Actor = v.Get("action"), v.Get("actor")
	if x := v.Get("since"); x != "" {
		if t, err := time.Parse(time.RFC3339, x); err == nil {
			q.Since = t
		} else if d, err := time.ParseDuration(x); err == nil && d > 0 {
			q.Since = a.now().Add(-d)
		} else {
			return q, &limiter.FieldError{Field: "since", Problem: `an RFC 3339 time ("2026-11-23T00:00:00Z") or a positive duration back from now ("24h"), got ` + strconv.Quote(x)}
		}
	}
	return q, nil
}

// handleAudit answers GET /api/v1/audit: the entries, newest first, and
// "next" (the before of the next page) when more may match.
func (a *API) handleAudit(w http.ResponseWriter, r *http.Request) {
	q, err := a.auditQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.live.QueryAudit(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	entries := page.Entries
	if entries == nil {
		entries = []live.AuditEntry{}
	}
	resp := map[string]any{"entries": entries}
	if page.Next != 0 {
		resp["next"] = page.Next
	}
	writeJSON(w, http.StatusOK, resp)
}
