package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/limiterd/limiterd/limiter"
)

// The replies of docs/replies.md are byte for byte those of the net/http proxy
// limiterd had before fasthttp (reply_test.go holds them): http.Error's
// text/plain bodies with their newline and X-Content-Type-Options, the 429
// as handleProxy wrote it, the JSON as encoding/json encodes it.

// fail answers code with http.Error's body (the status text and a
// newline), keeping the header fields already set (the rate-limit fields
// of a 502 or 504).
func fail(ctx *fasthttp.RequestCtx, code int) {
	r := &ctx.Response
	r.SetStatusCode(code)
	r.Header.Del("Content-Encoding")
	r.Header.SetContentType("text/plain; charset=utf-8")
	r.Header.Set("X-Content-Type-Options", "nosniff")
	r.SetBodyString(http.StatusText(code) + "\n")
}

// failClose is fail, with the connection closed after the answer (the
// request's framing cannot be trusted).
func failClose(ctx *fasthttp.RequestCtx, code int) {
	fail(ctx, code)
	ctx.SetConnectionClose()
}

// unavailable answers 503 for a backend that could not decide: Retry-After
// 1, without rate-limit fields.
func unavailable(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", "1")
	fail(ctx, http.StatusServiceUnavailable)
}

// reject writes the 429 of docs/replies.md ("Rejections"): Retry-After, and
// "Too Many Requests" or, when the client prefers JSON, the reason as JSON;
// the 503 of a request the adaptive limit shed (shed).
func (h *Handler) reject(ctx *fasthttp.RequestCtx, d *limiter.Decision) {
	if d.Reason == limiter.ReasonAdaptive {
		h.shed(ctx, d)
		return
	}
	r := &ctx.Response
	var b [160]byte
	r.Header.SetCanonical(hdrRetryAfter, strconv.AppendInt(b[:0], d.RetryAfter, 10))
	r.Header.SetCanonical(hdrCacheControl, valueNoStore)
	r.SetStatusCode(http.StatusTooManyRequests)
	if prefersJSON(b2s(ctx.Request.Header.Peek("Accept"))) {
		r.Header.SetContentTypeBytes(valueJSON)
		r.SetBody(h.rejectionJSON(b[:0], d))
		return
	}
	r.Header.SetContentTypeBytes(valueText)
	r.SetBodyRaw(bodyTooMany)
}

// rejectionJSON appends the JSON body of a 429 for d to b.
func (h *Handler) rejectionJSON(b []byte, d *limiter.Decision) []byte {
	b = append(b, `{"error":"too_many_requests","group":`...)
	b = appendJSONString(b, h.lim.GroupName(d.Group))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, d.Reason.String())
	b = append(b, `,"retry_after":`...)
	b = strconv.AppendInt(b, d.RetryAfter, 10)
	return append(b, "}\n"...)
}

// appendJSONString appends s as encoding/json writes a string (HTML
// characters escaped, as json.Encoder does by default).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Header names and values of the replies, canonical already (fasthttp
// then skips normalizing them).
var (
	hdrRetryAfter   = []byte("Retry-After")
	hdrCacheControl = []byte("Cache-Control")
	valueNoStore    = []byte("no-store")
	valueJSON       = []byte("application/json")
	valueText       = []byte("text/plain; charset=utf-8")
	bodyTooMany     = []byte("Too Many Requests")
)

// prefersJSON reports whether an Accept header ranks application/json
// above text/plain (explicitly listed, with a q at least as high as any
// text or wildcard type).
func prefersJSON(accept string) bool {
	if accept == "" {
		return false
	}
	qJSON, qText := acceptQ(accept, func(mt string) bool {
		return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
	})
	return qJSON > 0 && qJSON >= qText
}

// acceptQ reads an Accept header: the highest q of the media types want
// matches (given lower case) and the highest of text/plain, text/* and
// */*; -1 for none listed.
func acceptQ(accept string, want func(mt string) bool) (qWant, qText float64) {
	qWant, qText = -1, -1
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		switch mt = strings.ToLower(strings.TrimSpace(mt)); {
		case want(mt):
			qWant = max(qWant, q)
		case mt == "text/plain" || mt == "text/*" || mt == "*/*":
			qText = max(qText, q)
		}
	}
	return qWant, qText
}
