package main

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/web/api"
)

// Version, Revision and BuildTime override what the Go build information
// says (docs/operations.md, "Commands"), for a build that wants its own stamp:
//
//	go build -ldflags "-X main.Version=v1.2.0 -X main.Revision=$(git rev-parse HEAD) -X main.BuildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)" ./cmd/limiterd
//
// Left empty, they come from debug.ReadBuildInfo: the module version (a
// release tag or a pseudo-version under `go install …@latest`, "(devel)"
// in a checkout), the VCS revision and commit time that `go build` stamps
// in a git checkout.
var (
	Version   string
	Revision  string
	BuildTime string
)

// pseudoVersion matches the tail of a Go pseudo-version,
// vX.Y.Z-[pre.]yyyymmddhhmmss-abcdefabcdef: its commit time and revision
// prefix, which is all a `go install …@<commit>` build knows of its commit.
var pseudoVersion = regexp.MustCompile(`(\d{14})-([0-9a-f]{12})(\+.*)?$`)

// buildInfo returns what this binary knows of its build, from the -X
// stamps over the Go build information.
func buildInfo() api.Build {
	bi, ok := debug.ReadBuildInfo()
	return buildFrom(api.Build{Version: Version, Revision: Revision, BuildTime: BuildTime, GoVersion: runtime.Version()}, bi, ok)
}

// buildFrom fills what the stamps b leave empty from the build
// information bi (ok false: none).
func buildFrom(b api.Build, bi *debug.BuildInfo, ok bool) api.Build {
	if ok {
		if b.Version == "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Revision == "" {
					b.Revision = s.Value
				}
			case "vcs.time":
				b.CommitTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if m := pseudoVersion.FindStringSubmatch(b.Version); m != nil {
		if b.Revision == "" {
			b.Revision = m[2]
		}
		if b.CommitTime == "" {
			if t, err := time.Parse("20060102150405", m[1]); err == nil {
				b.CommitTime = t.UTC().Format(time.RFC3339)
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

// printVersion writes `limiterd version`: the version on the first line
// (for scripts), then the revision, the times and the toolchain, each
// saying how to get it when the build did not record it.
func printVersion(w io.Writer, b api.Build) {
	fmt.Fprintln(w, "limiterd", b.Version)
	rev := b.Revision
	switch {
	case rev == "":
		rev = "not recorded (build in a git checkout, or set -ldflags -X main.Revision=…)"
	case b.Modified:
		rev += " (with uncommitted changes)"
	}
	fmt.Fprintf(w, "  revision     %s\n", rev)
	if b.CommitTime != "" {
		fmt.Fprintf(w, "  committed    %s\n", b.CommitTime)
	}
	built := b.BuildTime
	if built == "" {
		built = "not recorded (Go builds are reproducible; set -ldflags -X main.BuildTime=…)"
	}
	fmt.Fprintf(w, "  built        %s\n", built)
	fmt.Fprintf(w, "  go           %s %s/%s\n", b.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// versionLine is the build in one line, for the start-up log.
func versionLine(b api.Build) string {
	parts := []string{b.Version}
	if b.Revision != "" {
		r := b.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		if b.Modified {
			r += "+dirty"
		}
		parts = append(parts, r)
	}
	return strings.Join(parts, " ")
}
