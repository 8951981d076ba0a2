package limiter_test

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
)

func mustPattern(tb testing.TB, s string) *limiter.Pattern {
	tb.Helper()
	p, err := limiter.ParsePattern(s)
	if err != nil {
		tb.Fatalf("ParsePattern(%q): %v", s, err)
	}
	return p
}

// patternRows are (pattern, path, want) rows for ParsePattern; they also
// are seed inputs of FuzzPatternMatch.
var patternRows = []struct {
	pattern, path string
	want          bool
}{
	// Literals: whole path, case-sensitive, empty segments and query ignored.
	{"/hash_list", "/hash_list", true},
	{"hash_list", "/hash_list", true},
	{"/hash_list", "hash_list", true},
	{"/hash_list", "//hash_list//", true},
	{"/hash_list", "/hash_list?x=1", true},
	{"/hash_list", "/hash_list/?x=1/y", true},
	{"/hash_list", "/Hash_list", false},
	{"/hash_list", "/hash_list/extra", false},
	{"/hash_list", "/", false},
	{"/hash_list", "", false},
	{"//a//b//", "/a/b", true},
	{"/a/b", "/a", false},
	{"/a/b", "/a/b/c", false},
	{"/a/b", "/b/a", false},
	// "/" is the root path only.
	{"/", "/", true},
	{"/", "", true},
	{"/", "//", true},
	{"/", "/?q=1", true},
	{"/", "/a", false},
	// * is exactly one segment.
	{"/block/*/*/hash_list", "/block/height/100/hash_list", true},
	{"/block/*/*/hash_list", "/block/hash/abc/hash_list", true},
	{"/block/*/*/hash_list", "/block/x/hash_list", false},
	{"/block/*/*/hash_list", "/block/a/b/c/hash_list", false},
	{"/block/*/*/hash_list", "/block//x//hash_list", false},
	{"/*", "/a", true},
	{"/*", "/", false},
	{"/*", "/a/b", false},
	{"/*/b", "/a/b", true},
	{"/*/b", "/a/c", false},
	// ** is zero or more remaining segments.
	{"/chunk/**", "/chunk", true},
	{"/chunk/**", "/chunk/", true},
	{"/chunk/**", "/chunk/1", true},
	{"/chunk/**", "/chunk/1/2/3", true},
	{"/chunk/**", "//chunk//x/", true},
	{"/chunk/**", "/chunk/1?x=y", true},
	{"/chunk/**", "/chunk2/1", false},
	{"/chunk/**", "/Chunk/1", false},
	{"/chunk/**", "/x/chunk/1", false},
	{"/chunk/**", "/", false},
	{"/**", "/", true},
	{"/**", "/a/b/c", true},
	{"**", "", true},
	{"/a/*/**", "/a", false},
	{"/a/*/**", "/a/b", true},
	{"/a/*/**", "/a/b/c/d", true},
	// The longest glob; longer paths.
	{strings.Repeat("/a", limiter.MaxPatternSegments), strings.Repeat("/a", limiter.MaxPatternSegments), true},
	{strings.Repeat("/a", limiter.MaxPatternSegments), strings.Repeat("/a", limiter.MaxPatternSegments+1), false},
	{strings.Repeat("/a", limiter.MaxPatternSegments), strings.Repeat("/a", limiter.MaxPatternSegments-1), false},
	{strings.Repeat("/*", limiter.MaxPatternSegments) + "/**", strings.Repeat("/a", 3*limiter.MaxPatternSegments), true},
	{"/a/**", strings.Repeat("/a", 3*limiter.MaxPatternSegments), true},
	{"/a/*", strings.Repeat("/a", 3*limiter.MaxPatternSegments), false},
	// re: is unanchored, case-sensitive, against the path minus its query.
	{"re:a/.*/c", "/x/a/b/c", true},
	{"re:a/.*/c", "a/b/c", true},
	{"re:a/.*/c", "/x/a/b/c/d", true},
	{"re:a/.*/c", "/A/b/C", false},
	{"re:a/.*/c", "a/bcd/d", false},
	{"re:a/.*/c", "/a/b?c", false},
	{"re:^/tx$", "/tx", true},
	{"re:^/tx$", "/tx/1", false},
	{"re:^/tx$", "/tx?id=1", true},
	{"re:chunk", "/Chunk", false},
}

func TestPatternMatch(t *testing.T) {
	for _, r := range patternRows {
		p := mustPattern(t, r.pattern)
		if got := p.Match(r.path); got != r.want {
			t.Errorf("%q.Match(%q) = %v, want %v", r.pattern, r.path, got, r.want)
		}
		if p.String() != r.pattern {
			t.Errorf("String() = %q, want %q", p.String(), r.pattern)
		}
		if p.IsRegexp() != strings.HasPrefix(r.pattern, "re:") {
			t.Errorf("%q.IsRegexp() = %v", r.pattern, p.IsRegexp())
		}
	}
}

func TestThrottlePatternMatch(t *testing.T) {
	for _, r := range []struct {
		pattern, path string
		want          bool
	}{
		// hb_path:regex_matches: unanchored and case-insensitive.
		{"re:a/.*/c", "a/b/c", true},
		{"re:a/.*/c", "a/bcd/d", false},
		{"re:A/.*/C", "a/b/c", true},
		{"re:a/.*/c", "/X/A/B/C", true},
		{"re:/health", "/HEALTH", true},
		{"re:/health", "/metrics", false},
		// Globs stay case-sensitive.
		{"/chunk/**", "/chunk/1", true},
		{"/chunk/**", "/CHUNK/1", false},
	} {
		p, err := limiter.ParseThrottlePattern(r.pattern)
		if err != nil {
			t.Fatalf("ParseThrottlePattern(%q): %v", r.pattern, err)
		}
		if got := p.Match(r.path); got != r.want {
			t.Errorf("throttle %q.Match(%q) = %v, want %v", r.pattern, r.path, got, r.want)
		}
		if p.String() != r.pattern {
			t.Errorf("String() = %q, want %q", p.String(), r.pattern)
		}
	}
	// The same text through ParsePattern stays case-sensitive.
	if mustPattern(t, "re:A/.*/C").Match("a/b/c") {
		t.Error(`ParsePattern("re:A/.*/C") matches "a/b/c"`)
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, r := range []struct{ pattern, want string }{
		{"", `"": empty pattern`},
		{"re:", `"re:": empty regular expression`},
		{"re:a(", `"re:a(": bad regular expression: error parsing regexp: missing closing )`},
		{"a/**/b", `"a/**/b": ** must be the last segment`},
		{"/**/**", `"/**/**": ** must be the last segment`},
		{"/**/x/", `"/**/x/": ** must be the last segment`},
		{"/ab*", `"/ab*": segment "ab*": * and ** must be whole segments`},
		{"/chunk/***", `"/chunk/***": segment "***": * and ** must be whole segments`},
		{"/*x/y", `"/*x/y": segment "*x": * and ** must be whole segments`},
		{"/tx?id=1", `"/tx?id=1": segment "tx?id=1": a path pattern cannot contain ?`},
		{strings.Repeat("/a", limiter.MaxPatternSegments+1), fmt.Sprintf("more than %d segments", limiter.MaxPatternSegments)},
	} {
		for _, parse := range []func(string) (*limiter.Pattern, error){limiter.ParsePattern, limiter.ParseThrottlePattern} {
			p, err := parse(r.pattern)
			if err == nil {
				t.Errorf("parse(%q) = %q, want an error", r.pattern, p)
				continue
			}
			if !strings.Contains(err.Error(), r.want) {
				t.Errorf("parse(%q): %q, want it to contain %q", r.pattern, err, r.want)
			}
			var pe *limiter.PatternError
			if !errors.As(err, &pe) || pe.Pattern != r.pattern {
				t.Errorf("parse(%q): %#v is not a *PatternError for the pattern", r.pattern, err)
			}
		}
	}
	var syn *syntax.Error
	if _, err := limiter.ParsePattern("re:a("); !errors.As(err, &syn) {
		t.Errorf("a bad regexp's error does not wrap the *syntax.Error: %v", err)
	}
	// The longest glob allowed, with a trailing ** not counted.
	long := strings.Repeat("/a", limiter.MaxPatternSegments) + "/**"
	if !mustPattern(t, long).Match(strings.Repeat("/a", 100)) {
		t.Errorf("%q does not match a longer path", long)
	}
}

func TestPatternMatchDoesNotAllocate(t *testing.T) {
	for _, r := range patternRows {
		if strings.HasPrefix(r.pattern, "re:") {
			continue
		}
		p := mustPattern(t, r.pattern)
		if n := testing.AllocsPerRun(100, func() { p.Match(r.path) }); n != 0 {
			t.Errorf("%q.Match(%q): %v allocations", r.pattern, r.path, n)
		}
	}
}

// segmentsOf splits path as docs/limiting.md ("Paths") does, for the fuzz
// test's oracle.
func segmentsOf(path string) []string {
	path, _, _ = strings.Cut(path, "?")
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return segs
}

func FuzzPatternMatch(f *testing.F) {
	for _, r := range patternRows {
		f.Add(r.pattern, r.path)
	}
	for _, r := range limiter.ArweaveRoutes() {
		for _, p := range r.Paths {
			f.Add(p, "/block/height/100/hash_list?x")
		}
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if p, err := limiter.ParsePattern(pattern); err == nil {
			got := p.Match(path)
			if p.String() != pattern {
				t.Fatalf("String() = %q, want %q", p.String(), pattern)
			}
			// The table's split-once matcher agrees with Pattern.Match.
			tab, err := limiter.NewRouteTable([]limiter.RouteRule{{Group: "g", Paths: []string{pattern}}})
			if err != nil {
				t.Fatalf("NewRouteTable rejects %q, which ParsePattern accepts: %v", pattern, err)
			}
			if want := map[bool]int{true: 0, false: -1}[got]; tab.Match("GET", path) != want {
				t.Fatalf("%q on %q: Pattern.Match %v, RouteTable.Match %d", pattern, path, got, tab.Match("GET", path))
			}
		}
		if p, err := limiter.ParseThrottlePattern(pattern); err == nil {
			p.Match(path)
		}

		// A glob built from the path's own segments matches the path.
		segs := segmentsOf(path)
		wild := false
		for _, s := range segs {
			wild = wild || strings.Contains(s, "*")
		}
		if wild || len(segs) > limiter.MaxPatternSegments {
			return
		}
		exact := "/" + strings.Join(segs, "/")
		globs := []string{exact, exact + "/**", exact + "//**/"}
		if len(segs) > 0 {
			stars := strings.Repeat("/*", len(segs))
			globs = append(globs, stars, "/"+strings.Join(segs[:len(segs)-1], "/")+"/**")
			globs = append(globs, "/"+strings.Join(segs[:len(segs)-1], "/")+"/*")
		}
		q, _, _ := strings.Cut(path, "?")
		for _, g := range globs {
			p := mustPattern(t, g)
			if !p.Match(path) {
				t.Fatalf("%q does not match %q", g, path)
			}
			if p.Match(q+"/x") && !strings.HasSuffix(strings.TrimRight(g, "/"), "**") {
				t.Fatalf("%q matches %q", g, q+"/x")
			}
		}
		if utf8.ValidString(q) && !mustPattern(t, "re:^"+regexp.QuoteMeta(q)+"$").Match(path) {
			t.Fatalf("the quoted path does not match %q", path)
		}
	})
}

func BenchmarkPatternMatch(b *testing.B) {
	p := mustPattern(b, "/block/*/*/hash_list")
	b.ReportAllocs()
	for b.Loop() {
		p.Match("/block/height/100/hash_list")
	}
}
