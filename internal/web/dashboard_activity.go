package web

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/ticker"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// OffenseStore keeps the record of offenders: who the limiter rejected in
// the last 24 hours, beyond the life of its entries. The daemon passes its
// database; nil keeps no record.
type OffenseStore interface {
	AddOffenses(ctx context.Context, now time.Time, batch []live.Offense) error
	Offenses(ctx context.Context, now time.Time, peer peer.Key) ([]live.Offense, error)
	RecentOffenses(ctx context.Context, now time.Time, n int) ([]live.Offense, int, error)
}

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

// offensesEvery is how often the collected rejections are saved.
const offensesEvery = time.Minute

// run drains the limiter's record of decisions and saves the rejections
// to the record of offenders once a minute (and once more when ctx ends),
// until ctx ends.
func (d *dashboard) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.activity.Run(ctx) }()
	ticker.Every(ctx, offensesEvery, func() { d.saveOffenses(ctx) })
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.saveOffenses(sctx)
}

// saveOffenses writes the rejections collected since the last save.
func (d *dashboard) saveOffenses(ctx context.Context) {
	offs, dropped := d.activity.TakeOffenses()
	st := d.s.opts.Offenses
	if st == nil || len(offs) == 0 {
		return
	}
	batch := make([]live.Offense, 0, len(offs))
	for _, o := range offs {
		batch = append(batch, live.Offense{Peer: o.Peer, Group: o.Group, Rejections: o.Rejections, First: o.First, Last: o.Last})
	}
	if dropped > 0 {
		d.s.log.Warn("record of offenders: too many rejected (peer, group)s in a minute, some not recorded", "kept", len(batch), "dropped", dropped)
	}
	if err := st.AddOffenses(ctx, d.s.now(), batch); err != nil {
		d.s.log.Error("record of offenders: save", "err", err)
	}
}

// SaveOffenses saves the rejections collected so far to the record of
// offenders now (Run does it every minute).
func (s *Server) SaveOffenses(ctx context.Context) { s.dash.saveOffenses(ctx) }

// DrainActivity takes the limiter's record of decisions now (Run does it
// every 100 ms).
func (s *Server) DrainActivity() { s.dash.activity.Drain() }

// offendersShown is how many the offenders page lists.
const offendersShown = 200

func offenseRow(o live.Offense) templates.OffenseRow {
	return templates.OffenseRow{Peer: o.Peer.String(), Group: o.Group, Rejections: o.Rejections, First: stamp(o.First), Last: stamp(o.Last)}
}

// withPending adds to the saved offenses those collected since the last
// save (of only, when not nil), so that the pages are current: the
// latest first. It returns how many (peer, group)s were new.
func (d *dashboard) withPending(saved []live.Offense, only *peer.Key) ([]live.Offense, int) {
	type key struct {
		peer  peer.Key
		group string
	}
	at := map[key]int{}
	for i, o := range saved {
		at[key{o.Peer, o.Group}] = i
	}
	added := 0
	for _, p := range d.activity.PendingOffenses(only) {
		k := key{p.Peer, p.Group}
		i, ok := at[k]
		if !ok {
			at[k] = len(saved)
			saved = append(saved, live.Offense{Peer: p.Peer, Group: p.Group, Rejections: p.Rejections, First: p.First, Last: p.Last})
			added++
			continue
		}
		o := &saved[i]
		o.Rejections += p.Rejections
		if p.First.Before(o.First) {
			o.First = p.First
		}
		if p.Last.After(o.Last) {
			o.Last = p.Last
		}
	}
	slices.SortFunc(saved, func(a, b live.Offense) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return saved, added
}

func (d *dashboard) handleOffenders(w http.ResponseWriter, r *http.Request) {
	data := templates.Offenders{}
	if st := d.s.opts.Offenses; st != nil {
		data.Kept = true
		offs, total, err := st.RecentOffenses(r.Context(), d.s.now(), offendersShown)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		offs, added := d.withPending(offs, nil)
		data.Total = total + added
		for _, o := range offs[:min(len(offs), offendersShown)] {
			data.Rows = append(data.Rows, offenseRow(o))
		}
	}
	render(w, r, http.StatusOK, templates.OffendersPage(d.page(r, "Offenders, last 24 hours", "/offenders"), data))
}

// banners are the conditions every page shows: the global switch off,
// groups off or in dry run, and what Options.Conditions reports.
func (d *dashboard) banners() []templates.Banner {
	var out []templates.Banner
	lim := d.s.lim
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
	if f := d.s.opts.Conditions; f != nil {
		for _, c := range f() {
			out = append(out, templates.Banner{Kind: c.Kind, Title: c.Title, Text: c.Text})
		}
	}
	return out
}

// wantsHTML reports whether r is a browser's: its Accept names text/html.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// notFound answers an unknown address: an HTML page in the layout for a
// browser (outside /api/), the JSON error for everyone else.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) && !strings.HasPrefix(r.URL.Path, "/api/") {
		s.dash.renderNotFound(w, r)
		return
	}
	writeError(w, http.StatusNotFound, "no such endpoint", "")
}

// methodNotAllowed is notFound's twin for a known address.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) && !strings.HasPrefix(r.URL.Path, "/api/") {
		securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := s.dash.pageFor(r, "Not allowed", s.dash.cookieViewer(r))
			p.Flash, p.FlashBad = "This address does not take a "+r.Method+" request.", true
			render(w, r, http.StatusMethodNotAllowed, templates.ErrorPage(p))
		})).ServeHTTP(w, r)
		return
	}
	writeError(w, http.StatusMethodNotAllowed, "method not allowed", "")
}

// renderNotFound renders the 404 page, with the menu and the log-out
// button for a logged-in browser.
func (d *dashboard) renderNotFound(w http.ResponseWriter, r *http.Request) {
	securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := d.pageFor(r, "Page not found", d.cookieViewer(r))
		render(w, r, http.StatusNotFound, templates.NotFoundPage(p, r.URL.Path))
	})).ServeHTTP(w, r)
}

// cookieViewer returns the session of r's cookie, if it is valid.
func (d *dashboard) cookieViewer(r *http.Request) viewer {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if ss, ok := d.sess.get(c.Value); ok {
			return viewer{id: c.Value, session: ss}
		}
	}
	return viewer{}
}

// talkerSet returns the top talkers' counts as of now.
func (d *dashboard) talkerSet(now time.Time) insight.TalkerSet {
	return d.activity.Talkers().Snapshot(now)
}
