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

// hopByHop reports whether name is a hop-by-hop header field (RFC 9110
// §7.6.1, and those net/http's ReverseProxy removes), which a proxy never
// passes on.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return eqFold(name, "te")
	case 7:
		return eqFold(name, "trailer") || eqFold(name, "upgrade")
	case 10:
		return eqFold(name, "connection") || eqFold(name, "keep-alive")
	case 16:
		return eqFold(name, "proxy-connection")
	case 17:
		return eqFold(name, "transfer-encoding")
	case 18:
		return eqFold(name, "proxy-authenticate")
	case 19:
		return eqFold(name, "proxy-authorization")
	}
	return false
}

// notForwarded reports whether a request header field is one limiterd
// writes itself towards the node (framing, Host, the forwarding fields)
// or handles itself (Expect).
func notForwarded(name []byte) bool {
	switch len(name) {
	case 4:
		return eqFold(name, "host")
	case 6:
		return eqFold(name, "expect")
	case 9:
		return eqFold(name, "forwarded")
	case 14:
		return eqFold(name, "content-length")
	case 15:
		return eqFold(name, "x-forwarded-for")
	case 16:
		return eqFold(name, "x-forwarded-host")
	case 17:
		return eqFold(name, "x-forwarded-proto")
	}
	return false
}

// tokens holds the field names a Connection header nominates, and
// collects them from its values.
type tokens struct {
	fixed [8][]byte
	list  [][]byte
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
		if t.list == nil {
			t.list = t.fixed[:0]
		}
		t.list = append(t.list, tok)
	}
}

// has reports whether name was nominated.
func (t *tokens) has(name []byte) bool {
	for _, tok := range t.list {
		if bytes.EqualFold(tok, name) {
			return true
		}
	}
	return false
}

// rawFields calls f with each field of a raw header block (name and value
// with the surrounding white space trimmed) until f returns false; ok is
// false when the block holds an obs-fold continuation line, which limiterd
// refuses (RFC 9112 §5.2 lets a server refuse it with 400), or a CR or LF
// outside a CRLF.
func rawFields(raw []byte, f func(name, value []byte) bool) (ok bool) {
	if !crlfOnly(raw) {
		return false
	}
	for len(raw) > 0 {
		var line []byte
		if i := bytes.Index(raw, []byte("\r\n")); i >= 0 {
			line, raw = raw[:i], raw[i+2:]
		} else {
			line, raw = raw, nil
		}
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return false
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		if !f(line[:colon], bytes.Trim(line[colon+1:], " \t")) {
			return true
		}
	}
	return true
}

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
	conn             tokens
	ok               bool
}

// scanRequestHeaders reads a request's raw header block: its framing
// fields and the names its Connection fields nominate.
func scanRequestHeaders(raw []byte) framing {
	fr := framing{chunkedOnly: true}
	fr.ok = rawFields(raw, func(name, value []byte) bool {
		switch {
		case eqFold(name, "content-length"):
			fr.contentLength++
		case eqFold(name, "transfer-encoding"):
			fr.transferEncoding++
			if !eqFold(value, "chunked") {
				fr.chunkedOnly = false
			}
		case eqFold(name, "connection"):
			fr.conn.add(value)
		}
		return true
	})
	return fr
}

// ambiguous reports whether a request's framing is one a proxy must refuse
// (RFC 9112 §6.3): both Content-Length and Transfer-Encoding, or a
// transfer coding other than chunked alone. fasthttp itself refuses
// duplicate or malformed Content-Length and Transfer-Encoding fields.
func (fr *framing) ambiguous() bool {
	return fr.transferEncoding > 0 && (fr.contentLength > 0 || !fr.chunkedOnly)
}

// copyRequestHeaders adds to out every field of a request's raw header
// block that goes on to the node: neither hop-by-hop, nor nominated by
// Connection, nor one limiterd writes itself.
func copyRequestHeaders(out *fasthttp.RequestHeader, raw []byte, conn *tokens) {
	rawFields(raw, func(name, value []byte) bool {
		if !hopByHop(name) && !notForwarded(name) && !conn.has(name) {
			out.AddBytesKV(name, value)
		}
		return true
	})
}

// copyResponseHeaders adds to out every field of the node's answer that
// goes on to the client: neither hop-by-hop, nor nominated by Connection,
// nor framing (fasthttp frames the answer itself), nor Date (the server
// writes its own).
func copyResponseHeaders(out *fasthttp.ResponseHeader, in *fasthttp.ResponseHeader) {
	var conn tokens
	for k, v := range in.All() {
		if eqFold(k, "connection") {
			conn.add(v)
		}
	}
	for k, v := range in.All() {
		if hopByHop(k) || eqFold(k, "content-length") || conn.has(k) {
			continue
		}
		out.AddBytesKV(k, v)
	}
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
