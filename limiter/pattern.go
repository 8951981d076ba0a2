package limiter

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxPatternSegments is the most segments a glob pattern may name, a
// trailing ** not counted. Paths may be longer: a pattern ending in ** still
// matches them.
const MaxPatternSegments = 16

// regexpPrefix marks a pattern that is a Go regular expression.
const regexpPrefix = "re:"

// Pattern is a compiled path pattern (docs/limiting.md, "Routes and path
// patterns"): a segment glob or, prefixed "re:", an unanchored regular
// expression. A Pattern is immutable and safe for concurrent use.
//
// A path is split on "/" with empty segments dropped, so "//chunk//1/" and
// "/chunk/1" are the same path; anything from the first "?" on is a query
// string and is not part of the path. Matching is case-sensitive, except for
// the regular expressions of ParseThrottlePattern.
//
// In a glob, the segments are separated by "/" (a leading "/" is optional;
// empty segments are dropped), a segment "*" matches exactly one path
// segment, a last segment "**" matches any number of remaining segments, zero
// included, and every other segment matches itself only. A "*" inside a
// longer segment ("ab*", "***") is rejected rather than taken as a literal or
// as a partial wildcard, because an operator who writes it almost certainly
// means something neither reading gives; "re:" covers partial segments. A "?"
// is rejected too, since the query string is never matched. The glob "/"
// matches the root path only.
//
// A "re:" pattern is matched, unanchored, against the path as given (the
// query string cut off), not against the cleaned-up segments.
type Pattern struct {
	src  string
	segs []string       // glob segments; "" stands for "*" (a literal is never empty)
	rest bool           // the glob ends in "**"
	re   *regexp.Regexp // non-nil for a "re:" pattern
}

// PatternError is the error of a pattern that does not parse. Its message
// quotes the pattern and says what is wrong with it.
type PatternError struct {
	Pattern string
	Problem string
	Err     error // the regexp package's error, for a "re:" pattern
}

// Error returns "<quoted pattern>: <problem>".
func (e *PatternError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%q: %s: %v", e.Pattern, e.Problem, e.Err)
	}
	return fmt.Sprintf("%q: %s", e.Pattern, e.Problem)
}

// Unwrap returns the underlying regexp error, if any.
func (e *PatternError) Unwrap() error { return e.Err }

// ParsePattern compiles a path pattern for the route table and the proxy's
// exempt paths. Its "re:" patterns are case-sensitive. A returned error is a
// *PatternError.
func ParsePattern(s string) (*Pattern, error) {
	return parsePattern(s, false)
}

// ParseThrottlePattern compiles a path pattern for the outbound throttle.
// It is ParsePattern except that a "re:" pattern compiles case-insensitive,
// as hb_path:regex_matches does; globs stay case-sensitive.
func ParseThrottlePattern(s string) (*Pattern, error) {
	return parsePattern(s, true)
}

func parsePattern(s string, foldRegexp bool) (*Pattern, error) {
	if expr, ok := strings.CutPrefix(s, regexpPrefix); ok {
		if expr == "" {
			return nil, &PatternError{Pattern: s, Problem: "empty regular expression"}
		}
		if foldRegexp {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, &PatternError{Pattern: s, Problem: "bad regular expression", Err: err}
		}
		return &Pattern{src: s, re: re}, nil
	}
	if s == "" {
		return nil, &PatternError{Pattern: s, Problem: `empty pattern (write "/" for the root path, "/**" for every path)`}
	}
	p := &Pattern{src: s}
	for rest := s; rest != ""; {
		var seg string
		seg, rest = nextSegment(rest)
		switch {
		case seg == "":
			continue
		case p.rest:
			return nil, &PatternError{Pattern: s, Problem: "** must be the last segment"}
		case seg == "**":
			p.rest = true
		case seg == "*":
			p.segs = append(p.segs, "")
		case strings.Contains(seg, "*"):
			return nil, &PatternError{Pattern: s, Problem: fmt.Sprintf(
				"segment %q: * and ** must be whole segments (use re: to match part of a segment)", seg)}
		case strings.Contains(seg, "?"):
			return nil, &PatternError{Pattern: s, Problem: fmt.Sprintf(
				"segment %q: a path pattern cannot contain ? (the query string is never matched)", seg)}
		default:
			p.segs = append(p.segs, seg)
		}
		if len(p.segs) > MaxPatternSegments {
			return nil, &PatternError{Pattern: s, Problem: fmt.Sprintf("more than %d segments", MaxPatternSegments)}
		}
	}
	return p, nil
}

// String returns the pattern's source text, as given to ParsePattern.
func (p *Pattern) String() string { return p.src }

// IsRegexp reports whether p is a "re:" pattern.
func (p *Pattern) IsRegexp() bool { return p.re != nil }

// Match reports whether path (a URL path; a query string is ignored) matches
// p. For a glob it does not allocate.
func (p *Pattern) Match(path string) bool {
	if p.re != nil {
		return p.re.MatchString(stripQuery(path))
	}
	path = stripQuery(path)
	i := 0
	for path != "" {
		var seg string
		seg, path = nextSegment(path)
		if seg == "" {
			continue
		}
		if i == len(p.segs) {
			return p.rest // one more segment than the glob names
		}
		if want := p.segs[i]; want != "" && want != seg {
			return false
		}
		i++
	}
	return i == len(p.segs)
}

// matchSegments is Match for a path already split by splitPath with a
// limit of at least len(p.segs).
func (p *Pattern) matchSegments(ps *pathSegments) bool {
	if ps.n < len(p.segs) || (!p.rest && ps.n != len(p.segs)) {
		return false
	}
	for i, want := range p.segs {
		if want != "" && want != ps.seg[i] {
			return false
		}
	}
	return true
}

// pathSegments is a path split once for matching against many globs. It
// lives on the caller's stack.
type pathSegments struct {
	// n is the number of non-empty segments, counted up to limit+1 only:
	// past the longest glob, all that matters is that there are more.
	n   int
	seg [MaxPatternSegments]string // the first min(n, limit) segments
}

// splitPath fills ps from path (its query string cut off) without
// allocating, looking at no more than limit+1 segments; limit is at most
// MaxPatternSegments.
func splitPath(ps *pathSegments, path string, limit int) {
	path = stripQuery(path)
	n := 0
	for path != "" {
		var seg string
		seg, path = nextSegment(path)
		if seg == "" {
			continue
		}
		if n == limit {
			n++ // one more than any glob names: enough to know
			break
		}
		ps.seg[n] = seg
		n++
	}
	ps.n = n
}

// nextSegment returns the text of s up to the first "/" and what follows
// that "/".
func nextSegment(s string) (seg, rest string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// stripQuery cuts path at its first "?".
func stripQuery(path string) string {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		return path[:i]
	}
	return path
}

// ThrottleMatcher compiles a pattern of the outbound throttle
// (ParseThrottlePattern) as package throttle's Config.Compile takes it.
func ThrottleMatcher(pattern string) (interface{ Match(path string) bool }, error) {
	p, err := ParseThrottlePattern(pattern)
	if err != nil {
		return nil, err
	}
	return p, nil
}
