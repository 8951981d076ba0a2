package limiter_test

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

// parseRuleText reads the fuzzer's route rules: one rule a line, fields
// separated by spaces; the first is the group, a field "@M" a method, a
// field "!N" a status byte (N's first byte + 50, to reach both sides of
// 100…599), every other field a path pattern.
func parseRuleText(s string) []limiter.RouteRule {
	var rules []limiter.RouteRule
	for line := range strings.SplitSeq(s, "\n") {
		fields := strings.Split(line, " ")
		r := limiter.RouteRule{Group: fields[0]}
		for _, f := range fields[1:] {
			switch {
			case strings.HasPrefix(f, "@"):
				r.Methods = append(r.Methods, f[1:])
			case strings.HasPrefix(f, "!") && len(f) > 1:
				r.ReduceOnStatus = append(r.ReduceOnStatus, int(f[1])*3+50)
			default:
				r.Paths = append(r.Paths, f)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// refMatch is the route table as docs/limiting.md ("Routes and path
// patterns") words it, written plainly: the first rule whose methods allow
// method and one of whose patterns matches path. A glob is matched segment by
// segment on the path cut at "?" and split on "/" with empty segments dropped
// ("*" one segment, a last "**" any rest); a "re:" pattern is Go's regexp,
// unanchored, on the path cut at "?".
func refMatch(rules []limiter.RouteRule, method, path string) int {
	path, _, _ = strings.Cut(path, "?")
	segs := segmentsOf(path)
	for i, r := range rules {
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
			continue
		}
		for _, p := range r.Paths {
			if expr, ok := strings.CutPrefix(p, "re:"); ok {
				if regexp.MustCompile(expr).MatchString(path) {
					return i
				}
				continue
			}
			if refGlob(segmentsOf(p), segs) {
				return i
			}
		}
	}
	return -1
}

func refGlob(glob, segs []string) bool {
	for i, g := range glob {
		if g == "**" && i == len(glob)-1 {
			return true
		}
		if i >= len(segs) || (g != "*" && g != segs[i]) {
			return false
		}
	}
	return len(glob) == len(segs)
}

// FuzzRouteTable: path classification with a fuzzed rule set (globs with
// * and **, "re:" patterns, methods, statuses) and a fuzzed request.
// NewRouteTable never panics; it refuses with a *FieldError naming
// routes.rule[i] and the field. A table it builds keeps the rules as
// given, and its indexed Match agrees with a plain reading of docs/limiting.md for
// every request; duplicate slashes and a query string never change the
// group of a glob-only table.
func FuzzRouteTable(f *testing.F) {
	var arweave []string
	for _, r := range limiter.ArweaveRoutes() {
		line := r.Group
		for _, m := range r.Methods {
			line += " @" + m
		}
		line += " " + strings.Join(r.Paths, " ")
		arweave = append(arweave, line)
	}
	all := strings.Join(arweave, "\n")
	for _, c := range [][3]string{
		{all, "GET", "/block/height/100/hash_list"},
		{all, "GET", "//vdf4//previous_session/?x=1"},
		{all, "POST", "/tx"},
		{"chunk /chunk/** re:^/chunk2/[0-9]+$\ngeneral /**", "GET", "/chunk2/12?a"},
		{"a @POST @PUT !\x10 /tx /tx2\nb re:tx", "PUT", "/tx2"},
		{"a @get /x", "GET", "/x"},
		{"a /a/**/b", "GET", "/a/b"},
		{"a /x* /y", "GET", "/y"},
		{"a re:(", "GET", "/"},
		{"a re:", "GET", "/"},
		{"a", "GET", "/"},
		{" /x", "GET", "/x"},
		{"a !\x00 /x", "GET", "/x"},
		{"a /\na /*\na /*/*\na /**", "GET", "/p/q"},
		{"a /*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/**\nb /*/**", "GET", strings.Repeat("/s", 20)},
		{"a /1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17", "GET", "/"},
		{"a re:(?i)^/INFO$ /info", "GET", "/Info"},
		{"a /caf\xc3\xa9 re:\xff", "GET", "/caf\xc3\xa9"},
		{"a /?x", "GET", "/"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, ruleText, method, path string) {
		rules := parseRuleText(ruleText)
		tab, err := limiter.NewRouteTable(rules)
		if err != nil {
			var fe *limiter.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "routes.rule[") || fe.Problem == "" {
				t.Fatalf("%q: error %v does not name the rule", ruleText, err)
			}
			return
		}
		if tab.Len() != len(rules) {
			t.Fatalf("%d rules, table of %d", len(rules), tab.Len())
		}
		for i, r := range rules {
			if got := tab.Rule(i); !reflect.DeepEqual(got, r) || tab.Group(i) != r.Group {
				t.Fatalf("rule %d is %+v (group %q), given %+v", i, got, tab.Group(i), r)
			}
			for _, st := range r.ReduceOnStatus {
				if !tab.ReducesOn(i, st) {
					t.Fatalf("rule %d does not reduce on its status %d", i, st)
				}
			}
		}
		got := tab.Match(method, path)
		if want := refMatch(rules, method, path); got != want {
			t.Fatalf("rules %q: Match(%q, %q) = %d, the plain reading says %d", ruleText, method, path, got, want)
		}
		if tab.Group(got) == "" || tab.ReducesOn(-1, 200) {
			t.Fatalf("Group(%d) = %q", got, tab.Group(got))
		}
		// Of a glob-only table, only the segments count: not doubled
		// slashes, a trailing one, or a query string.
		if strings.Contains(ruleText, "re:") {
			return
		}
		cut, _, _ := strings.Cut(path, "?")
		odd := "//" + strings.Join(segmentsOf(cut), "//") + "/?q=/x/**"
		if again := tab.Match(method, odd); again != got {
			t.Fatalf("rules %q: Match(%q) = %d but Match(%q) = %d", ruleText, path, got, odd, again)
		}
	})
}
