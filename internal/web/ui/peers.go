package ui

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// peerFlashes are the messages of a peer's page after an action.
var peerFlashes = map[string]string{
	"reduced":   "One token given back.",
	"noop":      "Nothing to give back (no token consumed in that group).",
	"disabled":  "Manual reduction is disabled for that group.",
	"forgotten": "Its state is forgotten.",
}

// peerRows builds the peers page's rows: each entry's state in its
// algorithm's terms and its rates over the last minutes.
type peerRows struct {
	lim      *limiter.Limiter
	set      insight.TalkerSet
	settings map[limiter.GroupID]limiter.GroupSettings
}

func (d *Dashboard) peerRows(now time.Time) *peerRows {
	return &peerRows{lim: d.lim, set: d.talkerSet(now), settings: map[limiter.GroupID]limiter.GroupSettings{}}
}

func (p *peerRows) groupSettings(g limiter.GroupID) *limiter.GroupSettings {
	s, ok := p.settings[g]
	if !ok {
		s, _ = p.lim.Settings(g)
		p.settings[g] = s
	}
	return &s
}

// rates returns the (peer, group)'s rates, "—" for a pair the record of
// rates holds nothing of.
func (p *peerRows) rates(k peer.Key, g limiter.GroupID) (string, string) {
	t := p.set.Get(k, g)
	if t.Requests == 0 {
		return "—", "—"
	}
	return rate(t.RequestRate()), rate(t.RejectRate())
}

func (p *peerRows) row(v *limiter.EntryView) templates.PeerRow {
	r := templates.PeerRow{
		Peer: v.Peer.String(), Group: v.Group, Requests: v.Requests,
		RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
		Inflight: v.Inflight, LastSeen: stamp(v.LastSeen),
		Usage: usageMap(usages(v, p.groupSettings(v.GroupID))),
	}
	r.RequestRate, r.RejectRate = p.rates(v.Peer, v.GroupID)
	return r
}

func (d *Dashboard) groupNames() []string {
	var out []string
	for _, g := range d.live.Groups() {
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

// Orders of the peers page beyond the index's: by the rates over the
// last minutes, from the record of top talkers.
const (
	sortRequestRate   = "request_rate"
	sortRejectionRate = "rejection_rate"
)

// peerSorts are the peers page's orders: the rates first, then the index's.
func peerSorts() []string {
	return append([]string{sortRequestRate, sortRejectionRate}, insight.SortOrders()...)
}

func (d *Dashboard) handlePeers(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	now := d.now()
	data := templates.Peers{
		Q: in.Get("q"), Group: in.Get("group"), Sort: in.Get("sort"), Groups: d.groupNames(), Sorts: peerSorts(),
		SortURL: map[string]string{}, RateWindow: windowText(d.talkerSet(now).Seconds()), Cluster: d.opts.Cluster != nil,
	}
	if data.Sort == "" {
		data.Sort = "rejections"
	}
	for _, o := range data.Sorts {
		q := maps.Clone(in)
		q.Set("sort", o)
		q.Del("cursor")
		data.SortURL[o] = peersLink(q, 0)
	}
	byRate := data.Sort == sortRequestRate || data.Sort == sortRejectionRate
	parse := in
	if byRate {
		parse = maps.Clone(in)
		parse.Del("sort")
	}
	q, err := insight.ParsePeerQuery(parse)
	if err == nil && q.Group != "" {
		if _, ok := d.lim.GroupID(q.Group); !ok {
			err = &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("there is no group %q", q.Group)}
		}
	}
	if err != nil {
		status, field := d.opts.Status(err)
		if status != http.StatusUnprocessableEntity {
			d.fail(w, r, err)
			return
		}
		data.Error, data.Field = d.message(r, err), field
		render(w, r, http.StatusUnprocessableEntity, templates.PeersPage(d.page(r, "Peers", "/peers"), data))
		return
	}
	rows := d.peerRows(now)
	var page []templates.PeerRow
	var total int
	if byRate {
		page, total = d.peersByRate(now, rows, q, data.Sort)
	} else {
		pg := d.peers.Query(q)
		total = pg.Total
		if pg.Indexed {
			data.IndexAsOf, data.DirectKeys = stamp(pg.AsOf), insight.DirectKeys
		}
		for i := range pg.Rows {
			page = append(page, rows.row(&pg.Rows[i]))
		}
	}
	data.Rows, data.Total, data.From = page, total, q.Offset+1
	data.Columns = usageColumns(page)
	if q.Offset > 0 {
		data.Prev = peersLink(in, max(0, q.Offset-q.Limit))
	}
	if q.Offset+len(page) < total {
		data.Next = peersLink(in, q.Offset+len(page))
	}
	render(w, r, http.StatusOK, templates.PeersPage(d.page(r, "Peers", "/peers"), data))
}

// peersByRate is the page of q ordered by the rates over the last minutes
// (requests or rejections): the top talkers, each with its entry's state
// when the limiter still holds it.
func (d *Dashboard) peersByRate(now time.Time, rows *peerRows, q insight.PeerQuery, order string) ([]templates.PeerRow, int) {
	by := insight.ByRequests
	if order == sortRejectionRate {
		by = insight.ByRejections
	}
	var gid limiter.GroupID
	if q.Group != "" {
		gid, _ = d.lim.GroupID(q.Group)
	}
	var match []insight.Talker
	for _, t := range rows.set.Top(by, insight.IndexTop, gid) {
		if q.Prefix.IsValid() {
			if p, ok := t.Peer.Prefix(); !ok || !p.Overlaps(q.Prefix) {
				continue
			}
		}
		match = append(match, t)
	}
	var out []templates.PeerRow
	for _, t := range match[min(q.Offset, len(match)):min(q.Offset+q.Limit, len(match))] {
		if v, ok := d.lim.Entry(now, t.Peer, t.Group); ok {
			out = append(out, rows.row(&v))
			continue
		}
		r := templates.PeerRow{Peer: t.Peer.String(), Group: d.lim.GroupName(t.Group), Untracked: true}
		r.RequestRate, r.RejectRate = rate(t.RequestRate()), rate(t.RejectRate())
		out = append(out, r)
	}
	return out, len(match)
}

// peerKey reads a peer as the pages name it: an address (keyed by the
// configured prefix) or a key as listed ("2001:db8::/64", "opaque:…").
func (d *Dashboard) peerKey(s string) (peer.Key, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return peer.Key{}, &limiter.FieldError{Field: "key", Problem: "missing"}
	}
	if p, err := d.lim.ParsePeer(s); err == nil {
		return p.Key, nil
	}
	k, err := peer.ParseKey(s)
	if err != nil {
		return k, &limiter.FieldError{Field: "key", Problem: fmt.Sprintf("%q is not a peer: give an IP address (203.0.113.7), an IPv6 prefix as the pages list it (2001:db8::/64) or a key such as opaque:…", s)}
	}
	return k, nil
}

func (d *Dashboard) handlePeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.URL.Query().Get("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := templates.PeerDetail{Key: k.String(), Result: peerFlashes[r.URL.Query().Get("result")]}
	if p, ok := k.Prefix(); ok {
		data.Prefix = peer.FormatPrefix(p)
	}
	now := d.now()
	rows := d.peerRows(now)
	data.RateWindow, data.RateSeconds = windowText(rows.set.Seconds()), rows.set.Seconds()
	views := d.lim.Peer(now, k)
	for i := range views {
		v := &views[i]
		st := templates.PeerState{
			Group: v.Group, Algorithm: v.Algorithm.String(), Inflight: v.Inflight, Tokens: v.Tokens, Window: v.Window, WindowActive: v.WindowActive,
			Requests: v.Requests, RejectedConcurrency: v.RejectedConcurrency, RejectedRateLimit: v.RejectedRateLimit,
			LastSeen: stamp(v.LastSeen), Usage: usages(v, rows.groupSettings(v.GroupID)),
		}
		st.RequestRate, st.RejectRate = rows.rates(v.Peer, v.GroupID)
		if t := rows.set.Get(v.Peer, v.GroupID); t.Requests > 0 {
			st.RequestPerSec, st.RejectPerSec = t.RequestRate(), t.RejectRate()
		}
		data.Rows = append(data.Rows, st)
	}
	if st := d.opts.Offenses; st != nil {
		data.OffensesKept = true
		offs, err := st.Offenses(r.Context(), now, k)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		offs, _ = d.withPending(offs, &k)
		for _, o := range offs {
			data.Offenses = append(data.Offenses, offenseRow(o))
		}
	}
	for _, g := range d.groupNames() {
		if g != limiter.GroupLocalPeers {
			data.Groups = append(data.Groups, g)
		}
	}
	if d.opts.Cluster != nil {
		fv := d.opts.Fleet(r.Context(), true)
		data.Cluster, data.FleetWindow = fv.Cluster, nowText(fv.Window)
		for _, p := range fv.Find(k.String()) {
			data.Fleet = append(data.Fleet, talkerRow(p, fv.Cluster))
		}
		data.Shared, data.SharedUntracked, data.NotShown = d.sharedStates(r.Context(), k)
	}
	wasKept := d.peerHist.Watch(now, k, views)
	data.History = peerHistoryView(k, d.peerHist.Series(k, now.Add(-time.Hour)), !wasKept)
	data.Audit, data.AuditScanned, err = d.peerAudit(r, k)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	render(w, r, http.StatusOK, templates.PeerPage(d.page(r, "Peer "+k.String(), "/peers"), data))
}

// sharedReadTimeout bounds the reading of a peer's shared state for its
// page.
const sharedReadTimeout = 2 * time.Second

// sharedStates reads peer k's state in every group as the instances share
// it in Redis (cluster mode), the groups Redis holds none of it in, and
// names the groups whose state is not read ("" when every group's is).
func (d *Dashboard) sharedStates(ctx context.Context, k peer.Key) (shared []templates.SharedState, untracked []string, notShown string) {
	ss, ok := d.opts.Cluster.(SharedStates)
	if !ok {
		return nil, nil, "any group"
	}
	ctx, cancel := context.WithTimeout(ctx, sharedReadTimeout)
	defer cancel()
	var missing []string
	for _, name := range d.groupNames() {
		gid, ok := d.lim.GroupID(name)
		if name == limiter.GroupLocalPeers || !ok {
			continue
		}
		s, ok := d.lim.Settings(gid)
		if !ok {
			continue
		}
		st := templates.SharedState{Group: name, Algorithm: s.Algorithm.String()}
		v, tracked, err := ss.SharedEntry(ctx, k, name, &s)
		switch {
		case err != nil && corrupt(err):
			st.Status, st.Note = "corrupt", err.Error()
		case err != nil:
			st.Status, st.Note = "not shown", err.Error()
			missing = append(missing, name+" ("+s.Algorithm.String()+")")
		case !tracked:
			untracked = append(untracked, name)
			continue
		default:
			st.Inflight, st.Usage = v.Inflight, usages(&v, &s)
			st.Status = "not limited"
			if sharedLimited(&v, &s) {
				st.Status = "limited"
			}
		}
		shared = append(shared, st)
	}
	return shared, untracked, strings.Join(missing, ", ")
}

// sharedLimited reports whether the group's rule rejects the next request
// of a peer in state v: for the hybrid by algo.Step, for the other
// algorithms by their quota (nothing remaining) or the peer's concurrency.
func sharedLimited(v *limiter.EntryView, s *limiter.GroupSettings) bool {
	if v.Algorithm != algo.Hybrid {
		c := s.PeerConcurrencyLimit()
		return v.Algo.Remaining <= 0 || c > 0 && v.Inflight >= c
	}
	l := s.Limits()
	r := algo.Result{State: algo.State{A: v.Tokens}, Held: algo.Held{Inflight: v.Inflight, Count: v.WindowActive}}
	algo.Step(v.Algorithm, &r, &l, 0, 0)
	return r.Via == algo.ViaNone
}

// corrupt reports whether err says a shared key holds a value no decision
// can have written (the cluster backend's key errors say so).
func corrupt(err error) bool {
	var c interface{ Corrupt() bool }
	return errors.As(err, &c) && c.Corrupt()
}

// peerHistoryBucket is what a row of the peer history's table sums.
const peerHistoryBucket = 5 * time.Minute

// peerHistoryURL is the JSON history endpoint of the peer k.
func peerHistoryURL(k peer.Key) string {
	return "/peer/history?key=" + url.QueryEscape(k.String())
}

// peerHistoryView is the peer page's history section: the chart's
// endpoint and, for no JavaScript, s summed by peerHistoryBucket.
func peerHistoryView(k peer.Key, s insight.PeerSeries, isNew bool) templates.PeerHistory {
	h := templates.PeerHistory{
		URL: peerHistoryURL(k), New: isNew, Step: s.Step,
		Watch: minutesText(insight.PeerHistoryWatch), Keep: minutesText(insight.PeerHistoryKeep),
		BucketMinutes: int(peerHistoryBucket / time.Minute),
	}
	if s.Since > 0 {
		h.Since = stamp(time.Unix(s.Since, 0))
	}
	width := int64(peerHistoryBucket / time.Second)
	for i := len(s.T) - 1; i >= 0; i-- {
		from := s.T[i] - s.T[i]%width
		if n := len(h.Rows); n == 0 || h.Rows[n-1].From != clockText(from) {
			h.Rows = append(h.Rows, templates.PeerHistoryRow{From: clockText(from), To: clockText(from + width)})
		}
		row := &h.Rows[len(h.Rows)-1]
		row.Requests += s.Requests[i]
		row.RejectedConcurrency += s.RejectedConcurrency[i]
		row.RejectedRateLimit += s.RejectedRateLimit[i]
		row.PeakInflight = max(row.PeakInflight, s.Inflight[i])
	}
	return h
}

func clockText(unix int64) string { return time.Unix(unix, 0).UTC().Format("15:04") }

// minutesText says d in words: "15 minutes", "an hour", "2 hours".
func minutesText(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "an hour"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	case d == time.Minute:
		return "a minute"
	}
	return strconv.Itoa(int(d/time.Minute)) + " minutes"
}

// handlePeerHistory serves GET /peer/history?key=&minutes=: the last
// minutes (1 to 60, default 60) of the peer's history as JSON
// (insight.PeerSeries). Fetching it counts as viewing the peer's page: the peer
// is recorded for insight.PeerHistoryWatch more.
func (d *Dashboard) handlePeerHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k, err := d.peerKey(q.Get("key"))
	if err != nil {
		jsonbody.WriteError(w, http.StatusUnprocessableEntity, d.message(r, err), "key")
		return
	}
	minutes, ok := minutesParam(w, q)
	if !ok {
		return
	}
	now := d.now()
	d.peerHist.Watch(now, k, d.lim.Peer(now, k))
	jsonbody.Write(w, http.StatusOK, d.peerHist.Series(k, now.Add(-time.Duration(minutes)*time.Minute)))
}

// Sizes of a peer page's audit list.
const (
	// peerAuditScan is how many of the newest audit entries a peer's page
	// reads (the log is not indexed by peer).
	peerAuditScan = 1000
	// peerAuditShow is how many of those about the peer it shows.
	peerAuditShow = 50
)

// peerAudit returns the audit entries about k among the newest
// peerAuditScan, newest first, at most peerAuditShow.
func (d *Dashboard) peerAudit(r *http.Request, k peer.Key) ([]templates.AuditRow, int, error) {
	entries, err := d.live.Audit(r.Context(), peerAuditScan, 0)
	if err != nil {
		return nil, 0, err
	}
	key := k.String()
	p, hasPrefix := k.Prefix()
	var rows []templates.AuditRow
	for _, a := range entries {
		if !auditConcerns(a, key, p, hasPrefix) {
			continue
		}
		rows = append(rows, auditRow(a))
		if len(rows) == peerAuditShow {
			break
		}
	}
	return rows, len(entries), nil
}

// auditConcerns reports whether a is about the peer key (whose addresses
// are p when hasPrefix): a reduction or a forgetting of it, or an
// exemption or denial of an address or CIDR that overlaps p.
func auditConcerns(a live.AuditEntry, key string, p netip.Prefix, hasPrefix bool) bool {
	switch a.Action {
	case "peer.reduce":
		return strings.HasPrefix(a.Target, key+" ")
	case "exemption.add", "exemption.remove":
		if !hasPrefix || (a.Target != string(live.ExemptPeer) && a.Target != string(live.DenyPeer)) {
			return false
		}
		v := a.New
		if a.Action == "exemption.remove" {
			v = a.Old
		}
		s, ok := v.(string)
		if !ok {
			return false
		}
		q, err := peer.ParsePrefix(s)
		return err == nil && q.Overlaps(p)
	}
	return a.Target == key
}

func (d *Dashboard) handleReducePeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.PostFormValue("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name := r.PostFormValue("group")
	g, ok := d.lim.GroupID(name)
	if !ok || g == limiter.LocalPeers {
		d.fail(w, r, &limiter.FieldError{Field: "group", Problem: fmt.Sprintf("no group %q", name)})
		return
	}
	res := d.lim.Reduce(d.now(), k, g)
	if err := d.live.Record(r.Context(), d.viewer(r).Actor, "peer.reduce", k.String()+" "+name, nil, res.String()); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, templates.PeerURL(k.String())+"&result="+res.String())
}

func (d *Dashboard) handleForgetPeer(w http.ResponseWriter, r *http.Request) {
	k, err := d.peerKey(r.PostFormValue("key"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	n := d.lim.Forget(k)
	if err := d.live.Record(r.Context(), d.viewer(r).Actor, "peer.forget", k.String(), n, nil); err != nil {
		d.fail(w, r, err)
		return
	}
	redirect(w, r, templates.PeerURL(k.String())+"&result=forgotten")
}
