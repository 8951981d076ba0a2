package limiterd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outside are names of documents that live outside this repository: a
// document here must not send its reader to them.
var outside = regexp.MustCompile(`SPEC\.md|STYLE\.md|TOOLCHAIN\.md|shared folder|\.\./shared|/work/`)

// mdLink is a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStayInTheRepository: no Markdown file of the repository refers
// to a file outside it, and every relative link resolves to a file in it.
func TestDocsStayInTheRepository(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	docs := strings.Fields(string(out))
	if len(docs) < 5 {
		t.Fatalf("%d Markdown files: git ls-files did not list them", len(docs))
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d refers to %q, outside the repository", doc, i+1, m)
			}
			for _, l := range mdLink.FindAllStringSubmatch(line, -1) {
				target := l[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				path := filepath.Join(filepath.Dir(doc), target)
				if rel, err := filepath.Rel(".", path); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d links outside the repository: %s", doc, i+1, l[1])
				} else if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d links to a missing file: %s", doc, i+1, l[1])
				}
			}
		}
	}
}
