package main

import (
	"archive/zip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installVersion is the version the test's module proxy serves.
const installVersion = "v0.9.0"

// TestGoInstallLatest runs `go install github.com/limiterd/limiterd/cmd/limiterd@latest`
// as an operator would, against a module proxy on disk that serves this
// checkout as the latest version (and the dependencies from the module
// cache): nothing in go.mod may stop it (a replace directive, a tool the
// module needs at build time, a file missing from git). The installed
// binary must then say its version. It may take a cold build (about a
// minute on two idle cores), so it runs under CI or with
// LIMITERD_INSTALL_TEST=1.
func TestGoInstallLatest(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("LIMITERD_INSTALL_TEST") != "1" {
		t.Skip("a cold build: set LIMITERD_INSTALL_TEST=1 (CI runs it)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := moduleFiles(strings.Fields(string(out)))
	modCache := strings.TrimSpace(string(must(exec.Command("go", "env", "GOMODCACHE").Output())))

	work := t.TempDir()
	dir := filepath.Join(work, "proxy", "github.com", "limiterd", "limiterd", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := must(os.ReadFile(filepath.Join(root, "go.mod")))
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("list", []byte(installVersion+"\n"))
	write(installVersion+".info", fmt.Appendf(nil, `{"Version":%q,"Time":%q}`, installVersion, time.Now().UTC().Format(time.RFC3339)))
	write(installVersion+".mod", gomod)
	zf, err := os.Create(filepath.Join(dir, installVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	prefix := "github.com/limiterd/limiterd@" + installVersion + "/"
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatalf("%s: %v (in git, not on disk?)", f, err)
		}
		w, err := zw.Create(prefix + f)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zf.Close()

	gobin := filepath.Join(work, "bin")
	cmd := exec.Command("go", "install", "github.com/limiterd/limiterd/cmd/limiterd@latest")
	cmd.Dir = work // outside any module
	cmd.Env = append(os.Environ(),
		"GOBIN="+gobin,
		"GOMODCACHE="+filepath.Join(work, "modcache"),
		"GOPROXY=file://"+filepath.Join(work, "proxy")+",file://"+filepath.Join(modCache, "cache", "download"),
		// -trimpath and cgo off, as the Debian package builds: the module
		// cache's directory stays out of the build cache's keys, so the
		// packages TestDebianPackage built are not compiled again (a cold
		// build took 4½ minutes on two busy cores). What is fetched and
		// resolved is the same.
		"GOSUMDB=off", "GOFLAGS=-modcacherw -trimpath", "CGO_ENABLED=0", "GOTOOLCHAIN=local",
	)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install …@latest: %v\n%s", err, out)
	}
	t.Logf("go install …@latest took %s", time.Since(start).Round(time.Second))
	v, err := exec.Command(filepath.Join(gobin, "limiterd"), "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "limiterd "+installVersion+"\n") {
		t.Errorf("the installed limiterd says %q (%v)", v, err)
	}
}

// moduleFiles drops from the checkout's files those a module zip leaves
// out: everything under a directory holding its own go.mod (a nested
// module, such as bench/), as the go command does when it zips a module.
func moduleFiles(files []string) []string {
	var nested []string
	for _, f := range files {
		if strings.HasSuffix(f, "/go.mod") {
			nested = append(nested, strings.TrimSuffix(f, "go.mod"))
		}
	}
	kept := files[:0]
next:
	for _, f := range files {
		for _, dir := range nested {
			if strings.HasPrefix(f, dir) {
				continue next
			}
		}
		kept = append(kept, f)
	}
	return kept
}
