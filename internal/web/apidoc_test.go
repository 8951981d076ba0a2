package web_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/limiterd/limiterd/internal/webtest"
)

// apiDoc is the admin API's reference.
const apiDoc = "../../docs/api.md"

// documentedAhead are endpoints docs/api.md describes before the admin
// listener serves them, each with the reason; once served, they leave
// this list (the test says so).
var documentedAhead = map[string]string{}

var (
	docHeading = regexp.MustCompile("(?m)^### `([A-Z]+) (/[^`]*)`$")
	docParam   = regexp.MustCompile(`\{[a-z_]+\}`)
)

// routeMatches reports whether a chi route pattern serves path: {x} is
// one segment, a trailing * anything.
func routeMatches(pattern, path string) bool {
	re := "^" + regexp.QuoteMeta(pattern) + "$"
	re = regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(re, `[^/]+`)
	re = strings.Replace(re, `\*$`, `.+$`, 1)
	return regexp.MustCompile(re).MatchString(path)
}

// TestAPIDocMatchesRoutes: every route of the admin API, health and
// metrics has its heading in docs/api.md, every heading there is a route,
// and every section has a curl line calling it.
func TestAPIDocMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	type heading struct{ method, path, section string }
	var headings []heading
	locs := docHeading.FindAllStringSubmatchIndex(doc, -1)
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if next := strings.Index(doc[l[1]:end], "\n## "); next >= 0 {
			end = l[1] + next
		}
		headings = append(headings, heading{doc[l[2]:l[3]], doc[l[4]:l[5]], doc[l[1]:end]})
	}
	if len(headings) < 20 {
		t.Fatalf("%d endpoint headings in %s", len(headings), apiDoc)
	}

	o := webtest.NewOps(t)
	type route struct{ method, pattern string }
	var routes []route
	err = chi.Walk(o.H.(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(pattern, "/api/") || strings.HasPrefix(pattern, "/debug/pprof/") || slices.Contains([]string{"/healthz", "/readyz", "/metrics"}, pattern) {
			routes = append(routes, route{method, pattern})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, r := range routes {
		if !slices.ContainsFunc(headings, func(h heading) bool {
			return h.method == r.method && routeMatches(r.pattern, docParam.ReplaceAllString(h.path, "x"))
		}) {
			t.Errorf("%s %s is served but not documented in %s", r.method, r.pattern, apiDoc)
		}
	}
	for _, h := range headings {
		key := h.method + " " + h.path
		served := slices.ContainsFunc(routes, func(r route) bool {
			return r.method == h.method && routeMatches(r.pattern, docParam.ReplaceAllString(h.path, "x"))
		})
		_, ahead := documentedAhead[key]
		switch {
		case served && ahead:
			t.Errorf("%s is served now: take it out of documentedAhead", key)
		case !served && !ahead:
			t.Errorf("%s is documented in %s but not served", key, apiDoc)
		}
		// A curl line that calls it.
		var curl string
		if i := strings.Index(h.section, "\ncurl "); i >= 0 {
			curl = h.section[i+1:]
			curl = strings.ReplaceAll(curl, "\\\n", " ")
			curl, _, _ = strings.Cut(curl, "\n")
		}
		prefix := docParam.Split(h.path, 2)[0]
		switch {
		case curl == "":
			t.Errorf("%s: no curl line", key)
		case !strings.Contains(curl, prefix):
			t.Errorf("%s: the curl line calls another path: %s", key, curl)
		case h.method != "GET" && !strings.Contains(curl, "-X "+h.method):
			t.Errorf("%s: the curl line does not send %s: %s", key, h.method, curl)
		}
	}
}
