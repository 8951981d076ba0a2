package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/limiter"
)

// The request headers nginx sets on the auth_request subrequest
// (docs/nginx.md), and the response header that tells a rate-limited 403
// from a denied one.
const (
	hdrOriginalMethod = "X-Original-Method"
	hdrOriginalURI    = "X-Original-URI"
	hdrRealIP         = "X-Real-IP"
	hdrLimiterdStatus = "X-Limiterd-Status"
)

// handleAuthRequest decides for nginx's auth_request (GET
// /api/v1/check/auth). The request nginx is about to serve is described by
// headers: X-Original-Method, X-Original-URI (path and query, as nginx's
// $request_uri) and X-Real-IP (the client as nginx saw it). It is
// classified and decided exactly as handleCheck does, but the in-flight
// slot is released at once: nobody would release it, so in this mode
// concurrency per peer is nginx's limit_conn's job.
//
// auth_request understands only 2xx (serve), 401 and 403 (refuse with that
// status); anything else becomes a 500. So an admission is 204, and both
// refusals are 403, told apart by X-Limiterd-Status (429: rate-limited,
// with Retry-After; 403: a denied peer) for nginx to map back. Limited
// answers carry the RateLimit and RateLimit-Policy fields. A missing or
// malformed header is a 400 naming it.
// HandleAuthRequest serves GET /api/v1/check/auth: see handleAuthRequest.
func (h *Handler) HandleAuthRequest(w http.ResponseWriter, r *http.Request) {
	h.handleAuthRequest(w, r)
}

func (h *Handler) handleAuthRequest(w http.ResponseWriter, r *http.Request) {
	method := r.Header.Get(hdrOriginalMethod)
	if method == "" {
		badHeader(w, hdrOriginalMethod, "required")
		return
	}
	if !isToken(method) {
		badHeader(w, hdrOriginalMethod, "not an HTTP method: "+strconv.Quote(method))
		return
	}
	path, problem := originalPath(r.Header.Get(hdrOriginalURI))
	if problem != "" {
		badHeader(w, hdrOriginalURI, problem)
		return
	}
	ip := r.Header.Get(hdrRealIP)
	if ip == "" {
		badHeader(w, hdrRealIP, "required")
		return
	}
	peer, err := h.lim.ParsePeer(ip)
	if err != nil {
		badHeader(w, hdrRealIP, err.Error())
		return
	}

	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	now := h.now()
	d := h.lim.Check(now, limiter.Request{Method: method, Path: path, Peer: peer})
	d.Release()
	if d.OnExemptPath() {
		if !d.Allowed {
			hd.Set(hdrLimiterdStatus, "403")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		h.Counts.ExemptPath.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Lat.Observe(d.Group, h.now().Sub(now))

	h.setRateLimitHeaders(hd, &d)
	switch {
	case d.Reason == limiter.ReasonUnavailable || d.Reason == limiter.ReasonAdaptive && !d.Allowed:
		// auth_request passes only 2xx, 401 and 403 on: a 403 that
		// X-Limiterd-Status says is a 503, for nginx to map back (a shed
		// request with its Retry-After).
		hd.Set(hdrLimiterdStatus, "503")
		if d.Reason == limiter.ReasonAdaptive {
			hd.Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
		}
		w.WriteHeader(http.StatusForbidden)
	case d.Reason == limiter.ReasonDenied && !d.Allowed:
		hd.Set(hdrLimiterdStatus, "403")
		w.WriteHeader(http.StatusForbidden)
	case !d.Allowed:
		hd.Set(hdrLimiterdStatus, "429")
		hd.Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
		w.WriteHeader(http.StatusForbidden)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// badHeader answers 400 naming the request header at fault.
func badHeader(w http.ResponseWriter, name, problem string) {
	jsonbody.WriteError(w, http.StatusBadRequest, name+": "+problem, name)
}

// originalPath returns the path of a request URI as nginx's $request_uri
// gives it ("/chunk/1?x=y"): the query stripped, percent-decoded as
// net/http decodes http.Request.URL.Path, so that the same request is
// classified alike here and on limiterd's own proxy. problem is non-empty
// when uri is not an origin-form request target.
func originalPath(uri string) (path, problem string) {
	if uri == "" {
		return "", "required"
	}
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	if !strings.HasPrefix(uri, "/") {
		return "", "not a request path (want /path?query): " + strconv.Quote(uri)
	}
	p, err := url.PathUnescape(uri)
	if err != nil {
		return "", err.Error()
	}
	return p, ""
}

// isToken reports whether s is an RFC 9110 token, the syntax of a method.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}
