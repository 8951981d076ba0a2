package web

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/templates"
)

// peerSorts are the peers page's orders, as QueryPeers names them.
var peerSorts = []string{"rejections", "requests", "tokens", "last_seen", "inflight"}

// peerFlashes are the messages of a peer's page after an action.
var peerFlashes = map[string]string{
	"reduced":   "One token given back.",
	"noop":      "Nothing to give back (no token consumed in that group).",
	"disabled":  "Manual reduction is disabled for that group.",
	"forgotten": "Its state is forgotten.",
}

func peerRow(v limiter.EntryView) templates.PeerRow {
	return templates.PeerRow{
		Peer: v.Peer.String(), Group: v.Group, Requests: v.Requests,
		RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
		Inflight: v.Inflight, Tokens: v.Tokens, LastSeen: v.LastSeen.UTC().Format(time.RFC3339),
	}
}

func (d *dashboard) groupNames() []string {
	var out []string
	for _, g := range d.s.live.Groups() {
		out = append(out, g.Name)
	}
	return out
}

// peersLink is the peers page with q's filters and order at offset.
func peersLink(q url.Values, offset int) string {
	v := url.Values{}
	for _, k := range []string{"q", "group", "sort", "limit"} {
		if s := q.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	if offset > 0 {
		v.Set("cursor", base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset))))
	}
	if len(v) == 0 {
		return "/peers"
	}
	return "/peers?" + v.Encode()
}

func (d *dashboard) handlePeers(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	data := templates.Peers{Q: in.Get("q"), Group: in.Get("group"), Sort: in.Get("sort"), Groups: d.groupNames(), Sorts: peerSorts}
	if data.Sort == "" {
		data.Sort = "rejections"
	}
	q, err := ParsePeerQuery(in)
	if err == nil && q.Group != "" {
		if _, ok := d.s.lim.GroupID(q.Group); !ok {
			err = &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", q.Group)}
		}
	}
	if err != nil {
		var fe *limiter.FieldError
		if !errors.As(err, &fe) {
			d.fail(w, r, err)
			return
		}
		data.Error, data.Field = err.Error(), fe.Field
		render(w, r, http.StatusUnprocessableEntity, templates.PeersPage(d.page(r, "Peers", "/peers"), data))
		return
	}
	pg := d.s.peers.Query(q)
	page, total := pg.Rows, pg.Total
	data.Total, data.From = total, q.Offset+1
	for _, v := range page {
		data.Rows = append(data.Rows, peerRow(v))
	}
	if q.Offset > 0 {
		data.Prev = peersLink(in, max(0, q.Offset-q.Limit))
	}
	if q.Offset+len(page) < total {
		data.Next = peersLink(in, q.Offset+len(page))
	}
	render(w, r, http.StatusOK, templates.PeersPage(d.page(r, "Peers", "/peers"), data))
}

// peerKey reads a peer as the pages name it: an address (keyed by the
// configured prefix) or a key as listed ("2001:db8::/64", "opaque:…").
func (d *dashboard) peerKey(s string) (limiter.PeerKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return limiter.PeerKey{}, &limiter.FieldError{Field: "key", Problem: "missing"}
	}
	if p, err := d.s.lim.ParsePeer(s); err == nil {
		return p.Key, nil
	}
	k, err := limiter.ParsePeerKey(s)
	if err != nil {
		return k, &limiter.FieldError{Field: "key", Problem: err.Error()}
	}
	return k, nil
}

func (d *dashboard) handlePeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.URL.Query().Get("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := templates.PeerDetail{Key: k.String(), Result: peerFlashes[r.URL.Query().Get("result")]}
	if p, ok := k.Prefix(); ok {
		data.Prefix = prefixString(p)
	}
	for _, v := range d.s.lim.Peer(d.s.now(), k) {
		data.Rows = append(data.Rows, templates.PeerState{
			Group: v.Group, Inflight: v.Inflight, Tokens: v.Tokens, Window: v.Window, WindowActive: v.WindowActive,
			Requests: v.Requests, RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
			LastSeen: v.LastSeen.UTC().Format(time.RFC3339),
		})
	}
	for _, g := range d.groupNames() {
		if g != limiter.GroupLocalPeers {
			data.Groups = append(data.Groups, g)
		}
	}
	render(w, r, http.StatusOK, templates.PeerPage(d.page(r, "Peer "+k.String(), "/peers"), data))
}

func (d *dashboard) handleReducePeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.PostFormValue("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name := r.PostFormValue("group")
	g, ok := d.s.lim.GroupID(name)
	if !ok || g == limiter.LocalPeers {
		d.fail(w, r, &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", name)})
		return
	}
	res := d.s.lim.Reduce(d.s.now(), k, g)
	if err := d.s.live.Record(r.Context(), viewerOf(r).actor(), "peer.reduce", k.String()+" "+name, nil, res.String()); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, templates.PeerURL(k.String())+"&result="+res.String())
}

func (d *dashboard) handleForgetPeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.PostFormValue("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	n := d.s.lim.Forget(k)
	if err := d.s.live.Record(r.Context(), viewerOf(r).actor(), "peer.forget", k.String(), n, nil); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, templates.PeerURL(k.String())+"&result=forgotten")
}
