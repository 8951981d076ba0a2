package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

func (s *Server) handleGroups(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"groups": s.live.Groups()})
}

func (s *Server) handleGroup(w http.ResponseWriter, r *http.Request) {
	g, err := s.live.Group(chi.URLParam(r, "group"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) handlePatchGroup(w http.ResponseWriter, r *http.Request) {
	body, err := jsonbody.Read(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.live.PatchGroup(r.Context(), requestActor(r), chi.URLParam(r, "group"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) handleDeleteOverrides(w http.ResponseWriter, r *http.Request) {
	g, err := s.live.DeleteOverrides(r.Context(), requestActor(r), chi.URLParam(r, "group"))
	if err != nil {
		s.fail(w, r, err)
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

func (s *Server) handlePeers(w http.ResponseWriter, r *http.Request) {
	q, err := insight.ParsePeerQuery(r.URL.Query())
	if err == nil && q.Group != "" {
		if _, ok := s.lim.GroupID(q.Group); !ok {
			err = &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", q.Group)}
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Through the peer index, as the dashboard: above its threshold the
	// orders and the wide searches come from its last rebuild, and the
	// answer says so ("as_of", "may_miss_newer_peers"); a search reads at
	// most its cap of entries ("capped").
	pg := s.peers.Query(q)
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
func (s *Server) peerParam(r *http.Request) (peer.Key, string, error) {
	rest := chi.URLParam(r, "*")
	action := ""
	if p, ok := strings.CutSuffix(rest, "/reduce"); ok {
		rest, action = p, "reduce"
	}
	if rest == "" {
		return peer.Key{}, "", &limiter.FieldError{Field: "peer", Problem: "missing"}
	}
	if p, err := s.lim.ParsePeer(rest); err == nil {
		return p.Key, action, nil
	}
	k, err := peer.ParseKey(rest)
	if err != nil {
		return k, "", &limiter.FieldError{Field: "peer", Problem: err.Error()}
	}
	return k, action, nil
}

func (s *Server) handlePeer(w http.ResponseWriter, r *http.Request) {
	k, action, err := s.peerParam(r)
	if err == nil && action != "" {
		err = fmt.Errorf("%w: GET on an action", errBadRequest)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	views := s.lim.Peer(s.now(), k)
	if len(views) == 0 {
		s.fail(w, r, fmt.Errorf("peer %s: %w (not tracked)", k, live.ErrNotFound))
		return
	}
	out := make([]peerEntry, len(views))
	for i, v := range views {
		out[i] = toPeerEntry(v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "groups": out})
}

func (s *Server) handleForgetPeer(w http.ResponseWriter, r *http.Request) {
	k, action, err := s.peerParam(r)
	if err == nil && action != "" {
		err = fmt.Errorf("%w: DELETE on an action", errBadRequest)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n := s.lim.Forget(k)
	if err := s.live.Record(r.Context(), requestActor(r), "peer.forget", k.String(), n, nil); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "forgotten": n})
}

func (s *Server) handlePeerAction(w http.ResponseWriter, r *http.Request) {
	k, action, err := s.peerParam(r)
	if err == nil && action != "reduce" {
		err = fmt.Errorf("%w: unknown peer action", live.ErrNotFound)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.URL.Query().Get("group")
	if name == "" {
		name = limiter.GroupGeneral
	}
	g, ok := s.lim.GroupID(name)
	if !ok || g == limiter.LocalPeers {
		s.fail(w, r, &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", name)})
		return
	}
	res := s.lim.Reduce(s.now(), k, g)
	if err := s.live.Record(r.Context(), requestActor(r), "peer.reduce", k.String()+" "+name, nil, res.String()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"peer": k.String(), "group": name, "result": res.String()})
}

func (s *Server) handleExemptions(w http.ResponseWriter, r *http.Request) {
	added, file := s.live.Exemptions()
	if added == nil {
		added = []live.Exemption{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"exemptions": added, "file": file})
}

func (s *Server) handleAddExemption(w http.ResponseWriter, r *http.Request) {
	e, err := s.exemptionBody(r)
	if err == nil {
		e, err = s.live.AddExemption(r.Context(), requestActor(r), e)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, e)
}

func (s *Server) handleRemoveExemption(w http.ResponseWriter, r *http.Request) {
	e, err := s.exemptionBody(r)
	if err == nil {
		err = s.live.RemoveExemption(r.Context(), requestActor(r), e)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": e.Value})
}

func (s *Server) handleSwitch(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.live.SetEnabled(r.Context(), requestActor(r), on); err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"enabled": s.lim.Enabled()})
	}
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	if s.opts.Snapshot == nil {
		writeError(w, http.StatusNotImplemented, "this daemon keeps no snapshots yet (persistence is not configured)", "")
		return
	}
	start := time.Now()
	if err := s.opts.Snapshot(r.Context()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"written": true, "duration_ms": time.Since(start).Milliseconds()})
}
