// Package static holds the dashboard's stylesheets and scripts, embedded
// in the binary: htmx 2.0.11 and uPlot 1.6.32 copied from npm (with their
// licences, htmx.LICENSE and uPlot.LICENSE), and the dashboard's own
// app.css and app.js. Nothing here is generated at run time.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
)

// FS holds every asset, served by the dashboard at /static/.
//
//go:embed *.js *.css *.LICENSE
var FS embed.FS

// Version is a short hash of every embedded file: the dashboard appends it
// to asset URLs so that a long cache lifetime never serves a stale file
// after an upgrade.
var Version = func() string {
	h := sha256.New()
	names, _ := fs.Glob(FS, "*")
	sort.Strings(names)
	for _, n := range names {
		b, _ := FS.ReadFile(n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}()
