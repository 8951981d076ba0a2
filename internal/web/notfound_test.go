package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/webtest"
	"golang.org/x/net/html"
)

// TestDashboardNotFound: an unknown address gets the HTML page in the
// layout when a browser asks, the JSON error otherwise and under /api/.
func TestDashboardNotFound(t *testing.T) {
	d := webtest.NewDash(t)
	cookie, csrf := d.Login()
	browser := "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
	for _, c := range []struct{ cookie string }{{cookie}, {""}} {
		resp := d.Do("GET", "/no/such/page", nil, "Cookie", c.cookie, "Accept", browser)
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("browser 404: %d %v", resp.StatusCode, resp.Header)
		}
		doc := webtest.Parse(t, resp)
		if webtest.ByID(doc, "not-found") == nil {
			t.Fatal("no 404 page")
		}
		if c.cookie != "" {
			webtest.CheckPage(t, "404", doc, csrf)
			if len(webtest.Find(doc, func(n *html.Node) bool { return webtest.Attr(n, "action") == "/logout" })) != 1 {
				t.Fatal("a logged-in 404 has no log-out button")
			}
		}
	}
	for _, c := range []struct{ path, accept string }{{"/no/such/page", "application/json"}, {"/api/v1/nope", browser}, {"/no/such/page", ""}} {
		resp := d.Do("GET", c.path, nil, "Accept", c.accept)
		var v map[string]any
		if resp.StatusCode != http.StatusNotFound || json.NewDecoder(resp.Body).Decode(&v) != nil || v["error"] == nil {
			t.Fatalf("%s (%s): %d %v", c.path, c.accept, resp.StatusCode, v)
		}
	}
	// A dashboard address with an unknown group, and a wrong method.
	if resp := d.Do("GET", "/groups/nope", nil, "Cookie", cookie); resp.StatusCode != http.StatusNotFound || webtest.ByID(webtest.Parse(t, resp), "not-found") == nil {
		t.Fatal("unknown group")
	}
	if resp := d.Do("DELETE", "/groups", nil, "Cookie", cookie, "Accept", browser); resp.StatusCode != http.StatusMethodNotAllowed || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("405: %d", resp.StatusCode)
	}
}
