package webtest

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Parse parses resp's body as HTML, closing it.
func Parse(t *testing.T, resp *http.Response) *html.Node {
	t.Helper()
	defer resp.Body.Close()
	doc, err := html.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Attr returns n's attribute key, "" when it has none.
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// HasAttr reports whether n has the attribute key.
func HasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Find returns every element under n that match accepts, in document
// order.
func Find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// ByTag matches the elements named tag.
func ByTag(tag string) func(*html.Node) bool { return func(n *html.Node) bool { return n.Data == tag } }

// Text is the text under n, trimmed.
func Text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// CheckPage asserts the structure every dashboard page must have: every
// visible input and every select has a <label for> naming its id, ids are
// unique, every POST form carries the CSRF token (but the login form),
// and nothing inline would trip the Content-Security-Policy.
func CheckPage(t *testing.T, path string, doc *html.Node, csrf string) {
	t.Helper()
	ids := map[string]int{}
	for _, n := range Find(doc, func(n *html.Node) bool { return HasAttr(n, "id") }) {
		ids[Attr(n, "id")]++
	}
	for id, k := range ids {
		if k > 1 {
			t.Errorf("%s: id %q used %d times", path, id, k)
		}
	}
	labels := map[string]bool{}
	for _, l := range Find(doc, ByTag("label")) {
		labels[Attr(l, "for")] = true
	}
	for _, n := range Find(doc, func(n *html.Node) bool {
		return (n.Data == "input" && Attr(n, "type") != "hidden") || n.Data == "select" || n.Data == "textarea"
	}) {
		id := Attr(n, "id")
		if id == "" || !labels[id] {
			t.Errorf("%s: <%s name=%q id=%q> has no <label for>", path, n.Data, Attr(n, "name"), id)
		}
	}
	for _, f := range Find(doc, ByTag("form")) {
		switch strings.ToLower(Attr(f, "method")) {
		case "get":
			// The searches, which change nothing.
			if a := Attr(f, "action"); a != "/peers" && a != "/audit" {
				t.Errorf("%s: form %q is method=get", path, Attr(f, "action"))
			}
			continue
		case "post":
		default:
			t.Errorf("%s: form %q has method %q", path, Attr(f, "action"), Attr(f, "method"))
		}
		if Attr(f, "action") == "/login" {
			continue
		}
		tok := Find(f, func(n *html.Node) bool {
			return n.Data == "input" && Attr(n, "type") == "hidden" && Attr(n, "name") == "csrf"
		})
		if len(tok) != 1 || Attr(tok[0], "value") != csrf || csrf == "" {
			t.Errorf("%s: form %q lacks the session's CSRF field", path, Attr(f, "action"))
		}
	}
	for _, s := range Find(doc, ByTag("script")) {
		if Attr(s, "src") == "" || Text(s) != "" {
			t.Errorf("%s: inline script", path)
		}
	}
	if n := Find(doc, ByTag("style")); len(n) > 0 {
		t.Errorf("%s: inline <style>", path)
	}
	for _, n := range Find(doc, func(n *html.Node) bool { return HasAttr(n, "style") || strings.HasPrefix(firstOn(n), "on") }) {
		t.Errorf("%s: <%s> has an inline style or event handler", path, n.Data)
	}
}

func firstOn(n *html.Node) string {
	for _, a := range n.Attr {
		if strings.HasPrefix(a.Key, "on") || strings.HasPrefix(a.Key, "hx-on") {
			return "on"
		}
	}
	return ""
}

// ByID returns the one element of doc whose id is id, nil when there is
// not exactly one.
func ByID(doc *html.Node, id string) *html.Node {
	n := Find(doc, func(n *html.Node) bool { return Attr(n, "id") == id })
	if len(n) != 1 {
		return nil
	}
	return n[0]
}

// CSRFOf finds the CSRF token of the first form of a page.
func CSRFOf(t *testing.T, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatal("no CSRF field on the page")
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
