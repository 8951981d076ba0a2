package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"golang.org/x/net/html"
)

// TestOffendersSurviveRestart: the rejections of an attack are saved to
// the record of offenders when the daemon stops (as well as once a
// minute), and a restarted daemon shows them.
func TestOffendersSurviveRestart(t *testing.T) {
	up, _ := countingUpstream(t, nil)
	dataDir := filepath.Join(t.TempDir(), "data")
	config := func(string) string { return testConfig(up.URL, dataDir, "") }
	d := startDaemonWith(t, config)
	rejected := 0
	for range 30 {
		if d.get("/info").StatusCode == http.StatusTooManyRequests {
			rejected++
		}
	}
	if rejected != 10 {
		t.Fatalf("%d rejected, want 10", rejected)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d\n%s", code, d.stderr)
	}

	d = startDaemonWith(t, config)
	req, _ := http.NewRequest("GET", d.AdminURL()+"/offenders", nil)
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := html.Parse(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("offenders: %d %v", resp.StatusCode, err)
	}
	var rows [][]string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" && n.Parent.Data == "tbody" {
			var cells []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "td" {
					cells = append(cells, textOf(c))
				}
			}
			rows = append(rows, cells)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(rows) != 1 || rows[0][0] != "127.0.0.1" || rows[0][1] != "general" || rows[0][2] != "10" {
		t.Fatalf("after a restart the record holds %v", rows)
	}
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	s := ""
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		s += textOf(c)
	}
	return s
}
