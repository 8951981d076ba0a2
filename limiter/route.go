package limiter

import (
	"errors"
	"fmt"
	"slices"
)

// RouteRule is one [[routes.rule]] as configured: requests whose path
// matches one of Paths, and whose method is one of Methods, belong to Group.
type RouteRule struct {
	// Group is the name of the rule's group. Whether it exists is checked
	// by the caller, not by NewRouteTable.
	Group string
	// Paths are patterns (see Pattern), parsed with ParsePattern; any one
	// matching is enough. At least one is required.
	Paths []string
	// Methods restricts the rule to these HTTP methods; empty means any
	// method. Methods are case-sensitive tokens and are compared exactly,
	// so they must be written upper-case ("POST"); a lower-case letter is
	// rejected rather than silently never matching.
	Methods []string
	// ReduceOnStatus lists the upstream statuses (100 to 599) on which a
	// request of this rule gives its leaky-bucket token back
	// (docs/limiting.md, "The hybrid decision").
	ReduceOnStatus []int
}

// RouteTable is the ordered route table: the first rule that matches a
// request decides its group. It is immutable once built and safe for
// concurrent use.
type RouteTable struct {
	rules []RouteRule // deep copies of the configured rules

	// The patterns of all rules, in rule order (seq), indexed by what a
	// path's first segment must be for them to match: byFirst holds, for
	// each literal first segment of a glob, the entries of those globs;
	// other holds every entry that does not depend on the first segment (a
	// glob beginning with * or with no segment, a regexp). Match walks a
	// path's list and other together, in seq order; each entry is kept
	// once, so the table's memory is linear in its patterns.
	byFirst map[string][]routeEntry
	other   []routeEntry
	// regexps counts the regular-expression patterns: every path that no
	// glob matches is tried against each (Regexps).
	regexps int
	limit   int // the most segments any glob names; Match splits this far
	globs   bool
}

// routeEntry is one pattern of one rule.
type routeEntry struct {
	seq     int // its place in the order patterns are tried in
	rule    int
	methods []string // the rule's methods; empty: any
	pat     *Pattern
}

// NewRouteTable validates and compiles rules, in order. It copies what it
// keeps, so the caller may reuse rules. An error is a *FieldError naming the
// key, such as `routes.rule[2].paths[0]: "a/**/b": ** must be the last
// segment` (wrapping the *PatternError of a bad path). An empty table is valid: every request is general.
func NewRouteTable(rules []RouteRule) (*RouteTable, error) {
	t := &RouteTable{rules: make([]RouteRule, len(rules))}
	var entries []routeEntry
	for i, r := range rules {
		key := fmt.Sprintf("routes.rule[%d]", i)
		if r.Group == "" {
			return nil, &FieldError{Field: key + ".group", Problem: "empty"}
		}
		if len(r.Paths) == 0 {
			return nil, &FieldError{Field: key + ".paths", Problem: "at least one pattern"}
		}
		for j, m := range r.Methods {
			if err := checkMethod(m); err != nil {
				return nil, &FieldError{Field: fmt.Sprintf("%s.methods[%d]", key, j), Problem: err.Error()}
			}
		}
		for j, st := range r.ReduceOnStatus {
			if st < 100 || st > 599 {
				return nil, &FieldError{Field: fmt.Sprintf("%s.reduce_on_status[%d]", key, j),
					Problem: fmt.Sprintf("%d is not an HTTP status (100 to 599)", st)}
			}
		}
		t.rules[i] = cloneRule(r)
		var res []routeEntry // a rule's globs are tried before its regexps
		for j, s := range r.Paths {
			p, err := ParsePattern(s)
			if err != nil {
				return nil, &FieldError{Field: fmt.Sprintf("%s.paths[%d]", key, j), Problem: err.Error(), Err: err}
			}
			e := routeEntry{rule: i, methods: t.rules[i].Methods, pat: p}
			if p.IsRegexp() {
				res = append(res, e)
				t.regexps++
				continue
			}
			entries = append(entries, e)
			t.globs = true
			t.limit = max(t.limit, len(p.segs), 1) // Match reads the first segment
		}
		entries = append(entries, res...)
	}

	t.byFirst = make(map[string][]routeEntry)
	for i, e := range entries {
		e.seq = i
		if first, ok := e.firstLiteral(); ok {
			t.byFirst[first] = append(t.byFirst[first], e)
			continue
		}
		t.other = append(t.other, e)
	}
	return t, nil
}

// Patterns returns how many patterns the table holds, and how many of them
// are regular expressions: a path that no glob matches is tried against
// each of those, in turn (docs/config.md, "Large route tables").
func (t *RouteTable) Patterns() (all, regexps int) {
	n := len(t.other)
	for _, l := range t.byFirst {
		n += len(l)
	}
	return n, t.regexps
}

// firstLiteral returns the segment a path must begin with for e to match,
// if there is one.
func (e *routeEntry) firstLiteral() (string, bool) {
	if e.pat.re != nil || len(e.pat.segs) == 0 || e.pat.segs[0] == "" {
		return "", false
	}
	return e.pat.segs[0], true
}

// checkMethod accepts an upper-case HTTP method token (RFC 9110 tchar).
func checkMethod(m string) error {
	if m == "" {
		return errors.New("empty")
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case 'a' <= c && c <= 'z':
			return fmt.Errorf("%q: methods are case-sensitive and written upper-case", m)
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c < 0x80 && c > ' ' && !isSeparator(c) && c != 0x7f:
		default:
			return fmt.Errorf("%q is not an HTTP method token", m)
		}
	}
	return nil
}

// isSeparator reports whether c is a visible ASCII character a token may
// not contain.
func isSeparator(c byte) bool {
	switch c {
	case '"', '(', ')', ',', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\', ']', '{', '}':
		return true
	}
	return false
}

// cloneRule returns a deep copy of r.
func cloneRule(r RouteRule) RouteRule {
	return RouteRule{
		Group:          r.Group,
		Paths:          slices.Clone(r.Paths),
		Methods:        slices.Clone(r.Methods),
		ReduceOnStatus: slices.Clone(r.ReduceOnStatus),
	}
}

// Match returns the index of the first rule matching method and path, or -1
// when none does (the caller maps -1 to the general group). path is a URL
// path; a query string is ignored. It splits the path once, whatever the
// number of patterns, and does not allocate for a table of globs.
func (t *RouteTable) Match(method, path string) int {
	var ps pathSegments
	var first []routeEntry
	if t.globs {
		splitPath(&ps, path, t.limit)
		if ps.n > 0 {
			first = t.byFirst[ps.seg[0]]
		}
	}
	// The entries of the path's first segment and the others, merged in
	// the order they are tried in.
	other := t.other
	for len(first) > 0 || len(other) > 0 {
		var e *routeEntry
		if len(other) == 0 || len(first) > 0 && first[0].seq < other[0].seq {
			e, first = &first[0], first[1:]
		} else {
			e, other = &other[0], other[1:]
		}
		if len(e.methods) > 0 && !slices.Contains(e.methods, method) {
			continue
		}
		if e.pat.re != nil {
			if e.pat.re.MatchString(stripQuery(path)) {
				return e.rule
			}
		} else if e.pat.matchSegments(&ps) {
			return e.rule
		}
	}
	return -1
}

// Len returns the number of rules.
func (t *RouteTable) Len() int { return len(t.rules) }

// Rule returns a copy of rule i. It panics if i is not in [0, Len).
func (t *RouteTable) Rule(i int) RouteRule { return cloneRule(t.rules[i]) }

// Group returns the group of rule i, or GroupGeneral for -1, without
// allocating. It panics for any other i outside [0, Len).
func (t *RouteTable) Group(i int) string {
	if i == -1 {
		return GroupGeneral
	}
	return t.rules[i].Group
}

// ReducesOn reports whether a request of rule i gives its token back when
// the upstream answers status; it is false for -1. It does not allocate and
// panics for any other i outside [0, Len).
func (t *RouteTable) ReducesOn(i, status int) bool {
	if i == -1 {
		return false
	}
	return slices.Contains(t.rules[i].ReduceOnStatus, status)
}

// ArweaveRoutes returns the shipped route table (docs/arweave-reference.md,
// "Routes"): the Arweave node's mapping of paths to groups, method ignored,
// followed by a rule that refunds a general token on a successful POST of a
// transaction (those paths match no earlier rule, so putting it last changes
// no mapping). Each call returns a new slice the caller may modify.
//
// The mapping keeps Arweave's oddities: /vdf3/previous_session and
// /footprints/... are general, /vdf/session/extra and /hash_list/extra are
// general (those rules are exact), and /chunk is chunk (** matches zero
// segments).
func ArweaveRoutes() []RouteRule {
	return []RouteRule{
		{Group: "chunk", Paths: []string{"/chunk/**", "/chunk2/**"}},
		{Group: "data_sync_record", Paths: []string{"/data_sync_record/**"}},
		{Group: "recent_hash_list_diff", Paths: []string{"/recent_hash_list_diff/**"}},
		{Group: "block_index", Paths: []string{
			"/hash_list", "/hash_list2", "/block_index", "/block_index2", "/block/*/*/hash_list"}},
		{Group: "wallet_list", Paths: []string{"/wallet_list", "/block/*/*/wallet_list"}},
		{Group: "get_vdf", Paths: []string{"/vdf", "/vdf2"}},
		{Group: "get_vdf_session", Paths: []string{
			"/vdf/session", "/vdf2/session", "/vdf3/session", "/vdf4/session"}},
		{Group: "get_previous_vdf_session", Paths: []string{
			"/vdf/previous_session", "/vdf2/previous_session", "/vdf4/previous_session"}},
		{Group: "metrics", Paths: []string{"/metrics/**"}},
		{Group: GroupGeneral, Paths: []string{"/tx", "/tx2", "/unsigned_tx"},
			Methods: []string{"POST"}, ReduceOnStatus: []int{200}},
	}
}
