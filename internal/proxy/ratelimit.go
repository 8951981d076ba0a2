package proxy

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// SetRateLimitHeaders changes which rate-limit fields limited answers
// carry (server.ratelimit_headers, docs/replies.md), from the next answer on: a
// reload applies it without a restart.
func (h *Handler) SetRateLimitHeaders(set ratelimit.Set) { h.headers.Store(uint32(set)) }

// RateLimitHeaders returns the set of rate-limit fields limited answers
// carry.
func (h *Handler) RateLimitHeaders() ratelimit.Set { return ratelimit.Set(h.headers.Load()) }

// rateLimitFields hands emit the rate-limit fields of decision d as
// server.ratelimit_headers chooses (package ratelimit formats them), none
// when limits did not apply; scratch is reused and returned. It does not
// allocate when emit does not.
func (h *Handler) rateLimitFields(d *limiter.Decision, scratch []byte, emit func(name string, v []byte)) []byte {
	set := h.RateLimitHeaders()
	if !d.Limited || set == ratelimit.SetNone {
		return scratch
	}
	group := h.lim.GroupName(d.Group)
	var items [2]ratelimit.IETFItem
	var ietf []ratelimit.IETFItem
	if set.IETF() {
		q := d.Quota()
		ietf = q.IETFItems(group, items[:0])
	}
	var arweave *ratelimit.Fields
	var f ratelimit.Fields
	if set.Arweave() {
		var ok bool
		if f, ok = d.Arweave(); ok {
			arweave = &f
		}
	}
	return ratelimit.Write(set, group, ietf, arweave, scratch, emit)
}

// The fields' names on the public listener. The IETF pair keeps the
// spelling limiterd always wrote; the Arweave four go out lower-case, as
// the node's Cowboy writes every name (decision 90). Each is also known by its
// normalized spelling, the one fasthttp files the node's own fields under,
// so that ours replace the node's rather than sit beside them.
var publicNames = [...]struct {
	name       string
	wire, norm []byte
}{
	{ratelimit.NameIETFPolicy, []byte("Ratelimit-Policy"), []byte("Ratelimit-Policy")},
	{ratelimit.NameIETFRateLimit, []byte("Ratelimit"), []byte("Ratelimit")},
	{ratelimit.NameLimit, []byte(ratelimit.NameLimit), []byte("Ratelimit-Limit")},
	{ratelimit.NameRemaining, []byte(ratelimit.NameRemaining), []byte("Ratelimit-Remaining")},
	{ratelimit.NameReset, []byte(ratelimit.NameReset), []byte("Ratelimit-Reset")},
	{ratelimit.NameResetAmount, []byte(ratelimit.NameResetAmount), []byte("Ratelimit-Reset-Amount")},
}

// setRateLimitFields writes the rate-limit fields of the exchange's
// decision on its answer (setPublicFields).
func (x *exchange) setRateLimitFields() {
	if x.d.Limited {
		x.keep.fields = x.h.setPublicFields(&x.out.Header, &x.d, x.keep.fields, x.nodeFields)
	}
}

// setPublicFields writes the rate-limit fields of d on a public answer,
// replacing (when replace says the node sent some) any the node sent under
// the same names; it formats them in scratch, returned for reuse. Each
// field costs fasthttp's checks of a header set (its key, its value, the
// special names): about 70 ns here, the six of "both" about 0.4 µs.
func (h *Handler) setPublicFields(hd *fasthttp.ResponseHeader, d *limiter.Decision, scratch []byte, replace bool) []byte {
	return h.rateLimitFields(d, scratch[:0], func(name string, v []byte) {
		for i := range publicNames {
			n := &publicNames[i]
			if n.name != name {
				continue
			}
			if replace && string(n.wire) != string(n.norm) {
				hd.DelBytes(n.norm)
			}
			hd.SetCanonical(n.wire, v)
			return
		}
	})
}

// hasRateLimitName reports whether a field name begins with "ratelimit",
// in any case.
func hasRateLimitName(k []byte) bool {
	const p = "ratelimit"
	if len(k) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if k[i]|0x20 != p[i] {
			return false
		}
	}
	return true
}

// setRateLimitHeaders writes the rate-limit fields of d on an answer of
// the admin listener's data-plane calls (check, check/auth).
func (h *Handler) setRateLimitHeaders(hd http.Header, d *limiter.Decision) {
	h.rateLimitFields(d, nil, func(name string, v []byte) {
		hd[headerKey(name)] = []string{string(v)}
	})
}

// headerKey is the canonical key of a rate-limit field, as net/http files
// and writes it (header names are case-insensitive; the admin listener's
// callers are proxies and scripts, not Arweave clients).
func headerKey(name string) string {
	for i := range publicNames {
		if publicNames[i].name == name {
			return string(publicNames[i].norm)
		}
	}
	return name
}
