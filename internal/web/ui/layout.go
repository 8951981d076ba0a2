package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
)

// Condition is a state of the daemon every dashboard page shows as a
// banner while it holds, beside the limiter's own (off, dry run): what
// Options.Conditions reports (cluster mode: its store cannot be reached).
type Condition struct {
	// Kind is "off" (requests let through), "dry" (rejections counted, not
	// enforced) or "down" (a store the limiter needs is unreachable).
	Kind string
	// Title is the condition in two or three words ("cluster: Redis
	// down"), Text what it means for requests.
	Title, Text string
}

// banners are the conditions every page shows: the global switch off,
// groups off or in dry run, and what Options.Conditions reports.
func (d *Dashboard) banners() []templates.Banner {
	var out []templates.Banner
	lim := d.lim
	if !lim.Enabled() {
		out = append(out, templates.Banner{Kind: "off", Title: "limiter OFF", Text: "— every request is let through, unlimited (the switch is on the overview)."})
	}
	var dry, off []string
	for _, name := range lim.Groups() {
		id, _ := lim.GroupID(name)
		s, ok := lim.Settings(id)
		if !ok || id == limiter.LocalPeers {
			continue
		}
		switch s.Mode {
		case limiter.ModeDryRun:
			dry = append(dry, name)
		case limiter.ModeOff:
			off = append(off, name)
		}
	}
	slices.Sort(dry)
	slices.Sort(off)
	if len(dry) > 0 {
		out = append(out, templates.Banner{Kind: "dry", Title: "dry run:", Text: strings.Join(dry, ", ") + " — rejections are counted, not enforced."})
	}
	if len(off) > 0 {
		out = append(out, templates.Banner{Kind: "off", Title: "off:", Text: strings.Join(off, ", ") + " — not limited."})
	}
	if f := d.opts.Conditions; f != nil {
		for _, c := range f() {
			out = append(out, templates.Banner{Kind: c.Kind, Title: c.Title, Text: c.Text})
		}
	}
	return out
}

// NotFound answers the 404 page, with the menu and the log-out button for
// a logged-in browser (Options.LoggedIn).
func (d *Dashboard) NotFound(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := d.pageFor(r, "Page not found", d.opts.LoggedIn(r))
		render(w, r, http.StatusNotFound, templates.NotFoundPage(p, r.URL.Path))
	})).ServeHTTP(w, r)
}

// MethodNotAllowed answers the 405 page of an address that does not take
// r's method, with the menu for a logged-in browser as NotFound's.
func (d *Dashboard) MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := d.pageFor(r, "Not allowed", d.opts.LoggedIn(r))
		p.Flash, p.FlashBad = "This address does not take a "+r.Method+" request.", true
		render(w, r, http.StatusMethodNotAllowed, templates.ErrorPage(p))
	})).ServeHTTP(w, r)
}
