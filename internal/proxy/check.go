package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// leases hold the in-flight slots of /api/v1/check admissions until the
// caller releases them or the lease ends. Every lease lasts the same
// CheckLease, so expiries come in the order leases were made: a FIFO of
// (id, expiry) lets expire visit only what expired (released leases leave
// a stale item, skipped when its turn comes). Their number is bounded by
// peers.max_tracked: a slot held is an entry the limiter may not evict, so
// a flood of distinct peers through the check API would otherwise grow the
// table past its cap; at the bound, the oldest lease ends early (decision
// 190). Safe for concurrent use.
type leases struct {
	mu   sync.Mutex
	m    map[string]*lease
	q    []leaseItem
	head int
	// peak is len(m)'s high-water mark since m was last made anew: a Go
	// map keeps its buckets when it empties, so a map that held a flood
	// is made anew once it holds a quarter of it.
	peak int
	cut  *atomic.Uint64 // leases ended early at the bound
}

type lease struct {
	d       limiter.Decision
	expires time.Time
}

type leaseItem struct {
	id      string
	expires time.Time
}

func newLeases(cut *atomic.Uint64) *leases { return &leases{m: map[string]*lease{}, cut: cut} }

// add holds d until expires, and returns the lease's id. With bound > 0
// it ends the oldest leases (releasing their slots) until fewer than bound
// are held and adds d's in the same hold of the lock, so that concurrent
// adds never take the table past bound.
func (l *leases) add(d limiter.Decision, expires time.Time, bound int) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	l.mu.Lock()
	ended := l.cutLocked(bound)
	l.m[id] = &lease{d: d, expires: expires}
	l.q = append(l.q, leaseItem{id: id, expires: expires})
	l.peak = max(l.peak, len(l.m))
	l.mu.Unlock()
	l.end(ended)
	return id
}

// room ends the oldest leases, releasing their slots, until fewer than
// bound are held (none when bound ≤ 0). The check API makes room before it
// decides, so that the entry a released slot unpinned may be evicted for
// the new peer's.
func (l *leases) room(bound int) {
	l.mu.Lock()
	ended := l.cutLocked(bound)
	l.mu.Unlock()
	l.end(ended)
}

// cutLocked takes the oldest leases out until fewer than bound are held
// (none when bound ≤ 0) and returns them, for end once l.mu is let go.
func (l *leases) cutLocked(bound int) []*lease {
	if bound <= 0 {
		return nil
	}
	var ended []*lease
	for len(l.m) >= bound && l.head < len(l.q) {
		old := l.q[l.head].id
		l.q[l.head] = leaseItem{}
		l.head++
		if x, ok := l.m[old]; ok {
			ended = append(ended, x)
			delete(l.m, old)
		}
	}
	return ended
}

// end releases the slots of leases ended early at the bound, and counts
// them.
func (l *leases) end(ended []*lease) {
	if len(ended) == 0 {
		return
	}
	l.cut.Add(uint64(len(ended)))
	for _, x := range ended {
		x.d.Release()
	}
}

// shrink makes the map and the queue anew when they hold a quarter of what
// they once did, so that the memory of a flood goes with it. l.mu is held.
func (l *leases) shrink() {
	if l.head > 1024 && l.head*2 > len(l.q) {
		l.q = append(l.q[:0:0], l.q[l.head:]...)
		l.head = 0
	}
	if l.peak > 1024 && len(l.m) <= l.peak/4 {
		m := make(map[string]*lease, len(l.m))
		for id, x := range l.m {
			m[id] = x
		}
		l.m, l.peak = m, len(m)
	}
}

func (l *leases) release(id string) bool { return l.releaseWith(id, nil) }

// releaseWith ends lease id, first telling answer (when not nil) of the
// decision and when the lease was to end; it reports whether the lease
// was held.
func (l *leases) releaseWith(id string, answer func(d *limiter.Decision, expires time.Time)) bool {
	l.mu.Lock()
	x, ok := l.m[id]
	delete(l.m, id)
	l.shrink()
	l.mu.Unlock()
	if ok {
		if answer != nil {
			answer(&x.d, x.expires)
		}
		x.d.Release()
	}
	return ok
}

// maxLatencyMS bounds a released lease's latency_ms: a day.
const maxLatencyMS = 86_400_000

// expire releases the leases ended at now.
func (l *leases) expire(now time.Time) {
	l.mu.Lock()
	var due []*lease
	for l.head < len(l.q) && !now.Before(l.q[l.head].expires) {
		id := l.q[l.head].id
		l.q[l.head] = leaseItem{}
		l.head++
		if x, ok := l.m[id]; ok {
			due = append(due, x)
			delete(l.m, id)
		}
	}
	l.shrink()
	l.mu.Unlock()
	for _, x := range due {
		x.d.Release()
	}
}

// releaseAll releases every lease (at shutdown).
func (l *leases) releaseAll() {
	l.mu.Lock()
	all := make([]*lease, 0, len(l.m))
	for _, x := range l.m {
		all = append(all, x)
	}
	l.m, l.q, l.head, l.peak = map[string]*lease{}, nil, 0, 0
	l.mu.Unlock()
	for _, x := range all {
		x.d.Release()
	}
}

// checkRequest is the body of POST /api/v1/check.
type checkRequest struct {
	Peer   string `json:"peer"`
	Method string `json:"method"`
	Path   string `json:"path"`
}

// checkResponse is the decision of POST /api/v1/check.
type checkResponse struct {
	Allowed     bool   `json:"allowed"`
	Status      int    `json:"status"` // what a proxy should answer: 200, 429, 403 or 503
	Group       string `json:"group"`
	Via         string `json:"via,omitempty"`
	Reason      string `json:"reason,omitempty"`
	WouldReject bool   `json:"would_reject,omitempty"`
	RetryAfter  int64  `json:"retry_after,omitempty"`
	// ID releases the in-flight slot (POST /api/v1/release) before the
	// lease ends.
	ID              string `json:"id,omitempty"`
	LeaseSeconds    int64  `json:"lease_seconds,omitempty"`
	RateLimit       string `json:"ratelimit,omitempty"`
	RateLimitPolicy string `json:"ratelimit_policy,omitempty"`
	// Headers are every rate-limit field server.ratelimit_headers asks
	// for (docs/replies.md, "Rate-limit fields"), by name, for a proxy to copy
	// onto its answer as they are: the IETF pair and the four ratelimit-*
	// fields of Arweave 2.9.7.
	Headers map[string]string `json:"headers,omitempty"`
}

// handleCheck decides for a request a proxy other than limiterd's own is
// about to serve. It registers like a real request; an admission holds an
// in-flight slot until released or until the lease ends. The answer's
// status mirrors the decision (200, 429 with Retry-After, 403), so that
// nginx's auth_request can use it as it is.
// HandleCheck serves POST /api/v1/check: see handleCheck.
func (h *Handler) HandleCheck(w http.ResponseWriter, r *http.Request) { h.handleCheck(w, r) }

func (h *Handler) handleCheck(w http.ResponseWriter, r *http.Request) {
	var req checkRequest
	err := jsonbody.Decode(r, &req)
	if err == nil && req.Peer == "" {
		err = &limiter.FieldError{Field: "peer", Problem: "required"}
	}
	if err == nil && req.Path == "" {
		err = &limiter.FieldError{Field: "path", Problem: "required"}
	}
	if err == nil && !strings.HasPrefix(req.Path, "/") {
		err = &limiter.FieldError{Field: "path", Problem: "must begin with /, got " + strconv.Quote(req.Path)}
	}
	if err == nil && req.Method != "" && !isToken(req.Method) {
		err = &limiter.FieldError{Field: "method", Problem: "not an HTTP method: " + strconv.Quote(req.Method)}
	}
	// The query string is not part of the path (docs/limiting.md, "Paths").
	if i := strings.IndexByte(req.Path, '?'); i >= 0 {
		req.Path = req.Path[:i]
	}
	var peer peer.Peer
	if err == nil {
		if peer, err = h.lim.ParsePeer(req.Peer); err != nil {
			err = &limiter.FieldError{Field: "peer", Problem: err.Error()}
		}
	}
	if err != nil {
		jsonbody.Fail(w, err)
		return
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	now := h.now()
	bound := h.lim.Config().MaxTracked
	h.leases.room(bound)
	d := h.lim.Check(now, limiter.Request{Method: req.Method, Path: req.Path, Peer: peer})
	if d.OnExemptPath() {
		if !d.Allowed {
			jsonbody.Write(w, http.StatusForbidden, checkResponse{Status: http.StatusForbidden, Reason: limiter.ReasonDenied.String()})
			return
		}
		h.Counts.ExemptPath.Add(1)
		jsonbody.Write(w, http.StatusOK, checkResponse{Allowed: true, Status: http.StatusOK, Via: "exempt_path"})
		return
	}
	h.Lat.Observe(d.Group, h.now().Sub(now))
	resp := checkResponse{
		Allowed: d.Allowed, Group: h.lim.GroupName(d.Group), WouldReject: d.WouldReject,
		Status: http.StatusOK,
	}
	if d.Allowed {
		resp.Via = d.Via.String()
	}
	if d.Reason != limiter.ReasonNone {
		resp.Reason = d.Reason.String()
	}
	if d.Limited {
		hd := http.Header{}
		h.setRateLimitHeaders(hd, &d)
		resp.RateLimit, resp.RateLimitPolicy = hd.Get("Ratelimit"), hd.Get("Ratelimit-Policy")
		if len(hd) > 0 {
			resp.Headers = make(map[string]string, len(hd))
		}
		for k, v := range hd {
			w.Header()[k] = v
			resp.Headers[k] = v[0]
		}
	}
	switch {
	case d.Reason == limiter.ReasonDenied && !d.Allowed:
		resp.Status = http.StatusForbidden
	case d.Reason == limiter.ReasonUnavailable:
		resp.Status = http.StatusServiceUnavailable
	case d.Reason == limiter.ReasonAdaptive && !d.Allowed:
		// Shed by the adaptive limit (docs/replies.md, "Shedding").
		resp.Status = http.StatusServiceUnavailable
		resp.RetryAfter = d.RetryAfter
		w.Header().Set("Retry-After", fmt.Sprint(d.RetryAfter))
	case !d.Allowed:
		resp.Status = http.StatusTooManyRequests
		resp.RetryAfter = d.RetryAfter
		w.Header().Set("Retry-After", fmt.Sprint(d.RetryAfter))
	}
	if d.Holds() {
		resp.ID = h.leases.add(d, now.Add(h.opts.CheckLease), bound)
		resp.LeaseSeconds = int64(h.opts.CheckLease / time.Second)
	}
	jsonbody.Write(w, resp.Status, resp)
}

// HandleRelease serves POST /api/v1/release: it gives back the in-flight
// slot of a check admission before its lease ends.
//
// With the node's answer (status, and latency_ms from the request's
// sending to the answer's head; the lease's age without it), the answer is
// also reported to the group's adaptive concurrency (docs/limiting.md,
// "Adaptive concurrency"), a 5xx or a status of 0 (no answer) as a
// failure.
func (h *Handler) HandleRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID        string `json:"id"`
		Status    *int   `json:"status"`
		LatencyMS *int64 `json:"latency_ms"`
	}
	err := jsonbody.Decode(r, &req)
	if err == nil && req.ID == "" {
		err = &limiter.FieldError{Field: "id", Problem: "required"}
	}
	if err == nil && req.Status != nil && (*req.Status != 0 && *req.Status < 100 || *req.Status > 599) {
		err = &limiter.FieldError{Field: "status", Problem: fmt.Sprintf("must be 0 (no answer) or an HTTP status from 100 to 599, got %d", *req.Status)}
	}
	if err == nil && req.LatencyMS != nil && (*req.LatencyMS < 0 || *req.LatencyMS > maxLatencyMS) {
		err = &limiter.FieldError{Field: "latency_ms", Problem: fmt.Sprintf("must be an integer from 0 to %d, got %d", maxLatencyMS, *req.LatencyMS)}
	}
	if err != nil {
		jsonbody.Fail(w, err)
		return
	}
	var answer func(d *limiter.Decision, expires time.Time)
	if req.Status != nil {
		status := *req.Status
		answer = func(d *limiter.Decision, expires time.Time) {
			now := h.now()
			lat := now.Sub(expires.Add(-h.opts.CheckLease))
			if req.LatencyMS != nil {
				lat = time.Duration(*req.LatencyMS) * time.Millisecond
			}
			d.Sample(now, lat, status == 0 || status >= 500)
		}
	}
	if !h.leases.releaseWith(req.ID, answer) {
		jsonbody.WriteError(w, http.StatusNotFound, fmt.Sprintf("lease %q: not found (released already, or expired)", req.ID), "")
		return
	}
	jsonbody.Write(w, http.StatusOK, map[string]bool{"released": true})
}
