package limiterd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
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

// changelogRelease is a release's heading in CHANGELOG.md.
var changelogRelease = regexp.MustCompile(`^## \[(Unreleased|\d+\.\d+\.\d+)\]( - (\d{4}-\d{2}-\d{2}))?$`)

// TestChangelog: CHANGELOG.md is in the Keep a Changelog shape —
// Unreleased first, then each release with its date, newest first — and
// each release's upgrade notes hold every change config.Upgrades lists for
// it, word for word as check-config prints them.
func TestChangelog(t *testing.T) {
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var order []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			m := changelogRelease.FindStringSubmatch(line)
			if m == nil || (m[1] == "Unreleased") != (m[3] == "") {
				t.Errorf("CHANGELOG.md: heading %q is neither [Unreleased] nor [X.Y.Z] - YYYY-MM-DD", line)
				continue
			}
			cur = m[1]
			order = append(order, cur)
			continue
		}
		if cur != "" {
			sections[cur] += line + "\n"
		}
	}
	if len(order) < 2 || order[0] != "Unreleased" {
		t.Fatalf("CHANGELOG.md's releases: %q, want [Unreleased] first and a release", order)
	}
	for i := 2; i < len(order); i++ {
		if semverLess(order[i-1], order[i]) {
			t.Errorf("CHANGELOG.md: %s before %s: newest first", order[i-1], order[i])
		}
	}
	for _, u := range config.Upgrades() {
		notes := sections[u.Release]
		for _, want := range []string{u.Change, "Fix: " + u.Fix} {
			if !strings.Contains(strings.Join(strings.Fields(notes), " "), want) {
				t.Errorf("CHANGELOG.md's %s does not say (%s): %s", u.Release, strings.Join(u.Keys, ", "), want)
			}
		}
	}
}

// semverLess reports whether X.Y.Z a is below b.
func semverLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range 3 {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return false
}

// TestReadmePrerequisites: the packages the README's apt-get line lists
// for the tests are the ones .ci/run installs (besides git and
// ca-certificates, which fetching the code needs).
func TestReadmePrerequisites(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile("(?m)^apt-get install (.+)$").FindSubmatch(readme)
	installed := regexp.MustCompile(`(?m)^\s*for pkg in (.+); do$`).FindSubmatch(ci)
	if listed == nil || installed == nil {
		t.Fatalf("no apt-get line in README.md (%v) or no package loop in .ci/run (%v)", listed != nil, installed != nil)
	}
	want := strings.Fields(string(listed[1]))
	var got []string
	for _, p := range strings.Fields(string(installed[1])) {
		if p != "git" && p != "ca-certificates" {
			got = append(got, p)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf(".ci/run installs %q, the README lists %q", got, want)
	}
}

// TestDocsNameWhatExists: a repository path a document names in backquotes
// (`internal/proxy/proxy.go`, `deploy/limiterd.socket`) exists, and a test,
// benchmark or fuzz target it names (TestSocketActivation, or the start of
// one in a -run pattern) is one the code has. Decision records are left
// out: they say what was true when they were taken.
func TestDocsNameWhatExists(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.md", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	var docs []string
	var funcs []string
	fn := regexp.MustCompile(`func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	for _, f := range strings.Fields(string(out)) {
		switch {
		case strings.HasSuffix(f, ".md") && !strings.HasPrefix(f, "docs/decisions/"):
			docs = append(docs, f)
		case strings.HasSuffix(f, ".go"):
			b, err := os.ReadFile(f)
			if err != nil {
				continue // deleted in the work tree
			}
			for _, m := range fn.FindAllSubmatch(b, -1) {
				funcs = append(funcs, string(m[1]))
			}
		}
	}
	path := regexp.MustCompile("`((?:cmd|internal|limiter|deploy|bench|throttleclient|docs)/[\\w./-]*\\w)`")
	test := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range path.FindAllStringSubmatch(line, -1) {
				if _, err := os.Stat(m[1]); err != nil {
					t.Errorf("%s:%d names %s, which does not exist", doc, i+1, m[1])
				}
			}
			for _, m := range test.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if strings.HasSuffix(name, "Xxx") {
					continue // a placeholder
				}
				if !slices.ContainsFunc(funcs, func(f string) bool { return strings.HasPrefix(f, name) }) {
					t.Errorf("%s:%d names %s, which no test, benchmark or fuzz target is", doc, i+1, name)
				}
			}
		}
	}
}
