package proxy

import (
	"bytes"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// b2s returns b as a string without copying; the string is valid only as
// long as b is unchanged (here: until the handler returns).
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// target is a request target as the node gets it, and the path it is
// classified by.
type target struct {
	// uri is the origin-form target forwarded (path and query, the bytes
	// the client sent; an absolute-form target is reduced to it).
	uri []byte
	// path is the raw path of uri, without the query.
	path []byte
	// authority is the host of an absolute-form target (which RFC 9112
	// §3.2.2 says replaces Host), nil for origin-form.
	authority []byte
}

// parseTarget splits a request target. Only origin-form ("/path?query")
// and absolute-form with an http or https scheme are proxied: the
// asterisk of "OPTIONS *" and an authority-form target are refused, and
// whatever an absolute-form target names, the request goes to the node.
func parseTarget(raw []byte) (t target, ok bool) {
	if len(raw) > 0 && raw[0] == '/' {
		t.uri = raw
		t.path = raw
		if i := bytes.IndexByte(raw, '?'); i >= 0 {
			t.path = raw[:i]
		}
		return t, true
	}
	var rest []byte
	switch {
	case hasPrefixFold(raw, "http://"):
		rest = raw[len("http://"):]
	case hasPrefixFold(raw, "https://"):
		rest = raw[len("https://"):]
	default:
		return target{}, false
	}
	end := bytes.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	t.authority = rest[:end]
	if len(t.authority) == 0 || bytes.IndexByte(t.authority, '@') >= 0 {
		return target{}, false // no host, or credentials in the target
	}
	t.uri = rest[end:]
	if len(t.uri) == 0 || t.uri[0] == '?' {
		t.uri = append([]byte{'/'}, t.uri...)
	}
	t.path = t.uri
	if i := bytes.IndexByte(t.uri, '?'); i >= 0 {
		t.path = t.uri[:i]
	}
	return t, true
}

// decodePath percent-decodes a raw path as net/http decodes URL.Path (the
// check and auth_request endpoints decode alike), into buf when it has to
// change anything. Dot segments and empty segments are kept: the
// classifier drops empty segments and, as Arweave's router does, takes
// "." and ".." as segments like any other. ok is false for a malformed
// escape ("%zz", a "%" at the end) and for a NUL, encoded or not.
func decodePath(raw, buf []byte) (path []byte, ok bool) {
	i := bytes.IndexByte(raw, '%')
	if i < 0 {
		return raw, bytes.IndexByte(raw, 0) < 0
	}
	out := append(buf[:0], raw[:i]...)
	for ; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return nil, false
			}
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
		}
		if c == 0 {
			return nil, false
		}
		out = append(out, c)
	}
	return out, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// hasPrefixFold reports whether b begins with the lower-case ASCII s, in
// any case.
func hasPrefixFold(b []byte, s string) bool {
	return len(b) >= len(s) && eqFold(b[:len(s)], s)
}

// eqFold reports whether b equals the lower-case ASCII s, in any case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// dropped are the request fields never passed on to the node, as fasthttp
// spells them: the hop-by-hop fields (RFC 9110 §7.6.1, and those net/http's
// ReverseProxy removes), then those limiterd writes itself (the forwarding
// fields) or handles itself (Expect). Host and the framing fields are
// written anew too.
var dropped = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Expect", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// hopByHopCount is how many of dropped are hop-by-hop.
const hopByHopCount = 9

// droppedIndex returns the index of name in dropped, in any case, or -1.
func droppedIndex(name []byte) int {
	switch len(name) {
	case 2, 6, 7, 9, 10, 15, 16, 17, 18, 19:
	default:
		return -1
	}
	var lower [24]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower[:len(name)]) {
	case "connection":
		return 0
	case "proxy-connection":
		return 1
	case "keep-alive":
		return 2
	case "proxy-authenticate":
		return 3
	case "proxy-authorization":
		return 4
	case "te":
		return 5
	case "trailer":
		return 6
	case "transfer-encoding":
		return 7
	case "upgrade":
		return 8
	case "expect":
		return 9
	case "forwarded":
		return 10
	case "x-forwarded-for":
		return 11
	case "x-forwarded-host":
		return 12
	case "x-forwarded-proto":
		return 13
	}
	return -1
}

// hopByHop reports whether name is a hop-by-hop field.
func hopByHop(name []byte) bool {
	i := droppedIndex(name)
	return i >= 0 && i < hopByHopCount
}

// tokens holds the field names a Connection header nominates, and
// collects them from its values.
type tokens struct {
	fixed [4][]byte
	n     int
	more  [][]byte
}

func (t *tokens) add(value []byte) {
	for len(value) > 0 {
		var tok []byte
		if i := bytes.IndexByte(value, ','); i >= 0 {
			tok, value = value[:i], value[i+1:]
		} else {
			tok, value = value, nil
		}
		tok = bytes.Trim(tok, " \t")
		if len(tok) == 0 || eqFold(tok, "close") || eqFold(tok, "keep-alive") {
			continue
		}
		if t.n < len(t.fixed) {
			t.fixed[t.n] = tok
		} else {
			t.more = append(t.more, tok)
		}
		t.n++
	}
}

// each calls f with each name nominated.
func (t *tokens) each(f func([]byte)) {
	for _, tok := range t.fixed[:min(t.n, len(t.fixed))] {
		f(tok)
	}
	for _, tok := range t.more {
		f(tok)
	}
}

var crlf = []byte("\r\n")

// crlfOnly reports whether every CR and LF of b is part of a CRLF. fasthttp
// takes a bare LF for a line's end, and limiterd would then forward the
// rest of the line inside a field's value, where the node might read it as
// a field of its own: such a request is refused.
func crlfOnly(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\r':
			if i+1 == len(b) || b[i+1] != '\n' {
				return false
			}
			i++
		case '\n':
			return false
		}
	}
	return true
}

// framing is what a request's header block says about its body.
type framing struct {
	contentLength    int // Content-Length fields
	transferEncoding int // Transfer-Encoding fields
	chunkedOnly      bool
	conn             tokens // the names Connection nominates
	drop             uint16 // bit i: the request has the field dropped[i]
	ok               bool
}

// scanRequestHeaders reads a request's raw header block into fr: whether
// it is well formed (every CR and LF in a CRLF, no obs-fold continuation
// line, which RFC 9112 §5.2 lets a server refuse with 400, a name before
// every colon), its framing fields, the fields to drop that it has and
// the names its Connection fields nominate.
func scanRequestHeaders(fr *framing, raw []byte) {
	fr.chunkedOnly = true
	if fr.ok = crlfOnly(raw); !fr.ok {
		return
	}
	for len(raw) > 0 {
		var line []byte
		if i := bytes.Index(raw, crlf); i >= 0 {
			line, raw = raw[:i], raw[i+2:]
		} else {
			line, raw = raw, nil
		}
		if len(line) == 0 {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if line[0] == ' ' || line[0] == '\t' || colon <= 0 {
			fr.ok = false
			return
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		i := droppedIndex(name)
		if i >= 0 {
			fr.drop |= 1 << i
		}
		switch {
		case i == 0: // Connection
			fr.conn.add(value)
		case i == 7: // Transfer-Encoding
			fr.transferEncoding++
			if !eqFold(value, "chunked") {
				fr.chunkedOnly = false
			}
		case len(name) == len("content-length") && eqFold(name, "content-length"):
			fr.contentLength++
		}
	}
}

// ambiguous reports whether a request's framing is one a proxy must refuse
// (RFC 9112 §6.3): both Content-Length and Transfer-Encoding, or a
// transfer coding other than chunked alone. fasthttp itself refuses
// duplicate or malformed Content-Length and Transfer-Encoding fields.
func (fr *framing) ambiguous() bool {
	return fr.transferEncoding > 0 && (fr.contentLength > 0 || !fr.chunkedOnly)
}

// prepareRequest makes a client's head fit for the node, in place: the
// fields of dropped it has and those Connection nominates are removed, and
// it is HTTP/1.1 (the connection to the node is limiterd's, kept alive
// whatever the client's is). Its fields keep their order, cookies their
// bytes.
func prepareRequest(h *fasthttp.RequestHeader, fr *framing) {
	h.SetNoDefaultContentType(true)
	h.ResetConnectionClose()
	if !h.IsHTTP11() {
		h.SetProtocol("HTTP/1.1")
	}
	if fr.drop != 0 {
		for i := range dropped {
			if fr.drop&(1<<i) != 0 {
				h.Del(dropped[i])
			}
		}
	}
	if fr.conn.n > 0 {
		fr.conn.each(h.DelBytes)
	}
}

// cleanResponseHeaders makes the head of the node's answer, read into the
// client's answer, fit for the client: without its hop-by-hop fields and
// those Connection nominates, with the server's own settings (no default
// Content-Type, the connection's fate the server's). Framing is the
// server's; fasthttp dropped the node's Date when it read the head. It
// reports whether the node sent a rate-limit field (hasRateLimitName).
func cleanResponseHeaders(h *fasthttp.ResponseHeader) (rateLimitFields bool) {
	var conn tokens
	hop := false
	for _, k := range h.PeekKeys() {
		if len(k) >= 9 && (k[0]|0x20) == 'r' && hasRateLimitName(k) {
			rateLimitFields = true
		}
		if hopByHop(k) {
			hop = true
			if eqFold(k, "connection") {
				for _, v := range h.PeekAll("Connection") {
					conn.add(v)
				}
			}
		}
	}
	h.SetNoDefaultContentType(true)
	h.ResetConnectionClose()
	if hop {
		for _, name := range dropped[:hopByHopCount] {
			h.Del(name)
		}
	}
	if conn.n > 0 {
		conn.each(h.DelBytes)
	}
	return rateLimitFields
}

// peerHeaders gives limiter.PeerOf the forwarding fields of a request
// without copying them.
type peerHeaders struct {
	h    *fasthttp.RequestHeader
	vals [4]string
}

// Values returns the values of the field key.
func (p *peerHeaders) Values(key string) []string {
	out := p.vals[:0]
	for _, v := range p.h.PeekAll(key) {
		out = append(out, b2s(v))
	}
	return out
}
