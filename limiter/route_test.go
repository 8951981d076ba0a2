package limiter_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

func arweaveTable(tb testing.TB) *limiter.RouteTable {
	tb.Helper()
	t, err := limiter.NewRouteTable(limiter.ArweaveRoutes())
	if err != nil {
		tb.Fatalf("NewRouteTable(ArweaveRoutes()): %v", err)
	}
	return t
}

// label names a Match result: the rule's group, with its methods when it
// has any, or "general" for -1.
func label(t *limiter.RouteTable, i int) string {
	if i == -1 {
		return "general"
	}
	r := t.Rule(i)
	if len(r.Methods) > 0 {
		return r.Group + "/" + strings.Join(r.Methods, ",")
	}
	return r.Group
}

// arweaveRows is the reference route table (docs/arweave-reference.md,
// "Routes") as (method, path, label) rows: every pattern of the shipped
// table and every oddity the reference names. They are also the seed
// inputs of FuzzRouteTableMatch.
var arweaveRows = []struct{ method, path, want string }{
	{"GET", "/chunk", "chunk"},
	{"GET", "/chunk/", "chunk"},
	{"GET", "/chunk/123", "chunk"},
	{"POST", "/chunk", "chunk"},
	{"GET", "/chunk/1?x=y", "chunk"},
	{"GET", "//chunk//x/", "chunk"},
	{"GET", "/chunk/a/b/c/d", "chunk"},
	{"GET", "/Chunk/1", "general"},
	{"GET", "/chunks/1", "general"},
	{"GET", "/chunk2", "chunk"},
	{"GET", "/chunk2/123/456", "chunk"},
	{"GET", "/chunk3/1", "general"},
	{"GET", "/data_sync_record", "data_sync_record"},
	{"GET", "/data_sync_record/0/100", "data_sync_record"},
	{"GET", "/recent_hash_list_diff", "recent_hash_list_diff"},
	{"POST", "/recent_hash_list_diff/x", "recent_hash_list_diff"},
	{"GET", "/hash_list", "block_index"},
	{"GET", "/hash_list/", "block_index"},
	{"GET", "/hash_list/extra", "general"},
	{"GET", "/hash_list2", "block_index"},
	{"GET", "/block_index", "block_index"},
	{"GET", "/block_index2", "block_index"},
	{"GET", "/block_index2/0/100", "general"},
	{"GET", "/block/height/100/hash_list", "block_index"},
	{"GET", "/block/hash/abc/hash_list", "block_index"},
	{"GET", "/block/x/hash_list", "general"},
	{"GET", "/block/a/b/c/hash_list", "general"},
	{"GET", "/block/height/100", "general"},
	{"GET", "/wallet_list", "wallet_list"},
	{"GET", "/wallet_list/abc", "general"},
	{"GET", "/block/hash/abc/wallet_list", "wallet_list"},
	{"GET", "/block/height/1/wallet_list", "wallet_list"},
	{"GET", "/block/x/wallet_list", "general"},
	{"GET", "/vdf", "get_vdf"},
	{"GET", "/vdf2", "get_vdf"},
	{"GET", "/vdf3", "general"},
	{"GET", "/vdf4", "general"},
	{"GET", "/vdf/session", "get_vdf_session"},
	{"GET", "/vdf2/session", "get_vdf_session"},
	{"GET", "/vdf3/session", "get_vdf_session"},
	{"GET", "/vdf4/session", "get_vdf_session"},
	{"GET", "/vdf/session/extra", "general"},
	{"GET", "/vdf5/session", "general"},
	{"GET", "/vdf/previous_session", "get_previous_vdf_session"},
	{"GET", "/vdf2/previous_session", "get_previous_vdf_session"},
	{"GET", "/vdf3/previous_session", "general"},
	{"GET", "/vdf4/previous_session", "get_previous_vdf_session"},
	{"GET", "/metrics", "metrics"},
	{"GET", "/metrics/", "metrics"},
	{"GET", "/metrics/x/y", "metrics"},
	{"GET", "/footprints/1/2", "general"},
	{"GET", "/footprints", "general"},
	{"GET", "/", "general"},
	{"GET", "", "general"},
	{"GET", "/info", "general"},
	{"GET", "/tx/abc", "general"},
	{"GET", "/tx", "general"},
	{"POST", "/tx", "general/POST"},
	{"POST", "/tx/", "general/POST"},
	{"POST", "/tx?x=1", "general/POST"},
	{"POST", "/tx2", "general/POST"},
	{"POST", "/unsigned_tx", "general/POST"},
	{"POST", "/tx/abc", "general"},
	{"post", "/tx", "general"},
	{"PUT", "/tx2", "general"},
}

func TestArweaveRoutes(t *testing.T) {
	tab := arweaveTable(t)
	for _, r := range arweaveRows {
		if got := label(tab, tab.Match(r.method, r.path)); got != r.want {
			t.Errorf("Match(%q, %q) = %s, want %s", r.method, r.path, got, r.want)
		}
	}

	// Every pattern of the shipped table is hit by a row that lands on its
	// rule, so the rows above cover the reference table entirely.
	for i := range tab.Len() {
		for _, s := range tab.Rule(i).Paths {
			p := mustPattern(t, s)
			hit := false
			for _, r := range arweaveRows {
				hit = hit || (p.Match(r.path) && tab.Match(r.method, r.path) == i)
			}
			if !hit {
				t.Errorf("rule %d pattern %q: no test row hits it", i, s)
			}
		}
	}

	// The refund rule is the last one: general, POST, refund on 200.
	last := tab.Len() - 1
	if got, want := tab.Rule(last), (limiter.RouteRule{
		Group: "general", Paths: []string{"/tx", "/tx2", "/unsigned_tx"},
		Methods: []string{"POST"}, ReduceOnStatus: []int{200},
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("last rule = %+v, want %+v", got, want)
	}
	if tab.Match("POST", "/tx") != last {
		t.Errorf("POST /tx is not the last rule")
	}
	if !tab.ReducesOn(last, 200) || tab.ReducesOn(last, 201) || tab.ReducesOn(0, 200) || tab.ReducesOn(-1, 200) {
		t.Error("ReducesOn: only the last rule refunds, on 200 only")
	}
	if tab.Group(-1) != limiter.GroupGeneral || tab.Group(0) != "chunk" || tab.Group(last) != limiter.GroupGeneral {
		t.Errorf("Group(-1), Group(0), Group(last) = %q, %q, %q", tab.Group(-1), tab.Group(0), tab.Group(last))
	}
	// Only the refund rule looks at the method.
	for i := range last {
		if len(tab.Rule(i).Methods) != 0 || len(tab.Rule(i).ReduceOnStatus) != 0 {
			t.Errorf("rule %d has methods or refunds: %+v", i, tab.Rule(i))
		}
	}
}

func TestArweaveRoutesIsANewSlice(t *testing.T) {
	a := limiter.ArweaveRoutes()
	a[0].Paths[0] = "/changed"
	a[0].Group = "changed"
	b := limiter.ArweaveRoutes()
	if b[0].Group != "chunk" || b[0].Paths[0] != "/chunk/**" {
		t.Errorf("ArweaveRoutes shares state between calls: %+v", b[0])
	}
}

func TestRouteTableCopies(t *testing.T) {
	rules := limiter.ArweaveRoutes()
	tab, err := limiter.NewRouteTable(rules)
	if err != nil {
		t.Fatal(err)
	}
	rules[0].Group = "changed"
	rules[0].Paths[0] = "/changed"
	rules[9].Methods[0] = "GET"
	r := tab.Rule(0)
	if r.Group != "chunk" || r.Paths[0] != "/chunk/**" || tab.Match("POST", "/tx") != 9 {
		t.Errorf("the table shares its rules with the caller: %+v", r)
	}
	r.Paths[0] = "/mutated"
	tab.Rule(9).ReduceOnStatus[0] = 500
	if tab.Rule(0).Paths[0] != "/chunk/**" || !tab.ReducesOn(9, 200) {
		t.Error("Rule does not return a copy")
	}
	if tab.Len() != len(rules) {
		t.Errorf("Len() = %d, want %d", tab.Len(), len(rules))
	}
}

func TestRouteTableOrderAndMethods(t *testing.T) {
	tab, err := limiter.NewRouteTable([]limiter.RouteRule{
		{Group: "writes", Paths: []string{"/api/**"}, Methods: []string{"POST", "PUT"}},
		{Group: "regex", Paths: []string{"re:/api/v[0-9]+/items"}},
		{Group: "api", Paths: []string{"/api/**", "/other"}},
		{Group: "never", Paths: []string{"/api/v1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/api/v1", 0},
		{"PUT", "/api", 0},
		{"GET", "/api/v1", 2},
		{"GET", "/x/api/v2/items/3", 1},
		{"GET", "/api/v2/items", 1},
		{"GET", "/api/V2/items", 2},
		{"GET", "/other", 2},
		{"GET", "/other/x", -1},
		{"DELETE", "/nothing", -1},
	} {
		if got := tab.Match(r.method, r.path); got != r.want {
			t.Errorf("Match(%q, %q) = %d, want %d", r.method, r.path, got, r.want)
		}
	}

	// Globs not starting with a literal and regexps keep their place among
	// the others, whatever the path's first segment.
	tab, err = limiter.NewRouteTable([]limiter.RouteRule{
		{Group: "a", Paths: []string{"/a/**"}},
		{Group: "any-x", Paths: []string{"/*/x"}},
		{Group: "has-b", Paths: []string{"re:b"}},
		{Group: "b", Paths: []string{"/b", "/c"}},
		{Group: "all", Paths: []string{"/**"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/a/x": 0, "/b/x": 1, "/c/x": 1, "/z/x": 1, "/b": 2, "/c/b": 2, "/c": 3, "/z": 4, "/": 4, "": 4,
	} {
		if got := tab.Match("GET", path); got != want {
			t.Errorf("Match(%q) = %d, want %d", path, got, want)
		}
	}

	// Paths longer than any glob.
	long := strings.Repeat("/a", limiter.MaxPatternSegments)
	tab, err = limiter.NewRouteTable([]limiter.RouteRule{
		{Group: "exact", Paths: []string{long}},
		{Group: "short", Paths: []string{"/a/*"}},
		{Group: "rest", Paths: []string{"/a/**"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{long: 0, long + "/a": 2, long + long: 2, "/a/b": 1, "/a": 2, "/b": -1} {
		if got := tab.Match("GET", path); got != want {
			t.Errorf("Match(%q) = %d, want %d", path, got, want)
		}
	}

	empty, err := limiter.NewRouteTable(nil)
	if err != nil || empty.Len() != 0 || empty.Match("GET", "/chunk/1") != -1 {
		t.Errorf("an empty table: %v, %d rules", err, empty.Len())
	}
	onlyRegexp, err := limiter.NewRouteTable([]limiter.RouteRule{{Group: "g", Paths: []string{"re:chunk"}}})
	if err != nil || onlyRegexp.Match("GET", "/chunk?q") != 0 || onlyRegexp.Match("GET", "/x?chunk") != -1 {
		t.Errorf("a table of regexps: %v", err)
	}
}

func TestNewRouteTableErrors(t *testing.T) {
	ok := limiter.RouteRule{Group: "g", Paths: []string{"/a"}}
	for _, r := range []struct {
		rule    limiter.RouteRule
		at      int
		want    string
		pattern bool // the error wraps a *PatternError
	}{
		{limiter.RouteRule{Paths: []string{"/a"}}, 1, "routes.rule[1].group: empty", false},
		{limiter.RouteRule{Group: "g"}, 0, "routes.rule[0].paths: at least one pattern", false},
		{limiter.RouteRule{Group: "g", Paths: []string{}}, 0, "routes.rule[0].paths: at least one pattern", false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/ok", "a/**/b"}}, 2,
			`routes.rule[2].paths[1]: "a/**/b": ** must be the last segment`, true},
		{limiter.RouteRule{Group: "g", Paths: []string{"a/**/b"}}, 2,
			`routes.rule[2].paths[0]: "a/**/b": ** must be the last segment`, true},
		{limiter.RouteRule{Group: "g", Paths: []string{""}}, 0, `routes.rule[0].paths[0]: "": empty pattern`, true},
		{limiter.RouteRule{Group: "g", Paths: []string{"re:("}}, 0,
			`routes.rule[0].paths[0]: "re:(": bad regular expression`, true},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, Methods: []string{"get"}}, 0,
			`routes.rule[0].methods[0]: "get": methods are case-sensitive and written upper-case`, false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, Methods: []string{"GET", "Post"}}, 1,
			`routes.rule[1].methods[1]: "Post": methods are case-sensitive and written upper-case`, false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, Methods: []string{""}}, 0,
			`routes.rule[0].methods[0]: empty`, false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, Methods: []string{"GET POST"}}, 0,
			`routes.rule[0].methods[0]: "GET POST" is not an HTTP method token`, false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, ReduceOnStatus: []int{700}}, 3,
			"routes.rule[3].reduce_on_status[0]: 700 is not an HTTP status", false},
		{limiter.RouteRule{Group: "g", Paths: []string{"/a"}, ReduceOnStatus: []int{200, 99}}, 0,
			"routes.rule[0].reduce_on_status[1]: 99 is not an HTTP status", false},
	} {
		rules := append(slices.Repeat([]limiter.RouteRule{ok}, r.at), r.rule, ok)
		tab, err := limiter.NewRouteTable(rules)
		if err == nil {
			t.Errorf("NewRouteTable(%+v) = %d rules, want an error", r.rule, tab.Len())
			continue
		}
		if !strings.HasPrefix(err.Error(), r.want) {
			t.Errorf("NewRouteTable(%+v): %q, want %q", r.rule, err, r.want)
		}
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(r.want, fe.Field+": ") {
			t.Errorf("%q is not a *FieldError naming its key", err)
		}
		var pe *limiter.PatternError
		if errors.As(err, &pe) != r.pattern {
			t.Errorf("%q: wraps a *PatternError = %v, want %v", err, !r.pattern, r.pattern)
		}
	}

	// Good methods and statuses pass.
	if _, err := limiter.NewRouteTable([]limiter.RouteRule{{Group: "g", Paths: []string{"/a"},
		Methods: []string{"GET", "M-SEARCH", "PROPFIND", "X_1"}, ReduceOnStatus: []int{100, 200, 599}}}); err != nil {
		t.Errorf("valid rule rejected: %v", err)
	}
}

func TestRouteTableMatchDoesNotAllocate(t *testing.T) {
	tab := arweaveTable(t)
	for _, r := range arweaveRows {
		if n := testing.AllocsPerRun(100, func() { tab.Match(r.method, r.path) }); n != 0 {
			t.Errorf("Match(%q, %q): %v allocations", r.method, r.path, n)
		}
		i := tab.Match(r.method, r.path)
		if n := testing.AllocsPerRun(100, func() { _, _ = tab.Group(i), tab.ReducesOn(i, 200) }); n != 0 {
			t.Errorf("Group/ReducesOn(%d): %v allocations", i, n)
		}
	}
}

func TestRouteTableConcurrentMatch(t *testing.T) {
	tab := arweaveTable(t)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for _, r := range arweaveRows {
				if got := label(tab, tab.Match(r.method, r.path)); got != r.want {
					t.Errorf("Match(%q, %q) = %s, want %s", r.method, r.path, got, r.want)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func FuzzRouteTableMatch(f *testing.F) {
	for _, r := range arweaveRows {
		f.Add(r.method, r.path)
	}
	tab := arweaveTable(f)
	rules := limiter.ArweaveRoutes()
	f.Fuzz(func(t *testing.T, method, path string) {
		got := tab.Match(method, path)
		if got < -1 || got >= tab.Len() {
			t.Fatalf("Match(%q, %q) = %d, out of [-1, %d)", method, path, got, tab.Len())
		}
		// The oracle: the first rule whose method fits and one of whose
		// patterns matches on its own.
		want := -1
	rules:
		for i, r := range rules {
			if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
				continue
			}
			for _, s := range r.Paths {
				if mustPattern(t, s).Match(path) {
					want = i
					break rules
				}
			}
		}
		if got != want {
			t.Fatalf("Match(%q, %q) = %d, want %d", method, path, got, want)
		}
	})
}

func BenchmarkRouteTableMatch(b *testing.B) {
	tab := arweaveTable(b)
	for _, r := range []struct{ name, method, path string }{
		{"chunk", "GET", "/chunk/123456789"},
		{"block_hash_list", "GET", "/block/height/1000/hash_list"},
		{"vdf_previous_session", "GET", "/vdf4/previous_session"},
		{"general_tx", "GET", "/tx/Fpq1yW6e5zLq3vYo2c0DqJ6c3yKxMqXyZ9hN7w8vB5s/offset"},
		{"post_tx", "POST", "/tx"},
		{"general_info", "GET", "/info?x=1"},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tab.Match(r.method, r.path)
			}
		})
	}
}
