package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/internal/web/api"
)

// The admin listener's expensive work (docs/api.md, "Expensive calls"):
// audit queries, peer searches, the what-if of a group's settings, and the
// pages and lists whose size grows with what limiterd tracks. However many
// clients ask for it, at most a few run at once, each for a bounded time,
// so that they cannot take the cores the data plane answers with
// (decision 212). Backups are bounded by the store (two at once) and are
// not counted here: a slow download would hold a place for its whole
// length.

// Defaults of Options.HeavyConcurrency, HeavyWait and HeavyTimeout.
const (
	DefaultHeavyWait    = 5 * time.Second
	DefaultHeavyTimeout = 10 * time.Second
)

// DefaultHeavyConcurrency is a quarter of the cores, at least one: the
// rest is the data plane's.
func DefaultHeavyConcurrency() int { return max(1, runtime.GOMAXPROCS(0)/4) }

// errHeavyBusy: no place came free within HeavyWait.
var errHeavyBusy = fmt.Errorf("%w: as many expensive admin calls as limiterd runs at once are under way; try again shortly", api.ErrBusy)

// heavyPaths are the expensive calls, by method and path (a trailing "*":
// any one segment there).
var heavyPaths = []struct{ method, path string }{
	{http.MethodGet, "/api/v1/audit"},
	{http.MethodGet, "/api/v1/peers"},
	{http.MethodGet, "/api/v1/exemptions"},
	{http.MethodGet, "/audit"},
	{http.MethodGet, "/peers"},
	{http.MethodGet, "/offenders"},
	{http.MethodGet, "/exemptions"},
	{http.MethodGet, "/groups/*/whatif"},
	{http.MethodPost, "/groups/*/whatif"},
}

// isHeavy reports whether r is one of heavyPaths.
func isHeavy(r *http.Request) bool {
	for _, h := range heavyPaths {
		if r.Method == h.method && pathMatches(h.path, r.URL.Path) {
			return true
		}
	}
	return false
}

// pathMatches matches p against pattern, a "*" standing for one segment.
func pathMatches(pattern, p string) bool {
	pp, ps := strings.Split(pattern, "/"), strings.Split(p, "/")
	if len(pp) != len(ps) {
		return false
	}
	for i := range pp {
		if pp[i] != "*" && pp[i] != ps[i] {
			return false
		}
	}
	return true
}

// heavyGate holds the places of the expensive calls.
type heavyGate struct {
	places        chan struct{}
	wait, timeout time.Duration
	// ran and refused count the calls run and those answered 503:
	// limiterd_admin_expensive_calls_total{outcome}.
	ran, refused atomic.Uint64
}

func newHeavyGate(n int, wait, timeout time.Duration) *heavyGate {
	if n <= 0 {
		n = DefaultHeavyConcurrency()
	}
	if wait <= 0 {
		wait = DefaultHeavyWait
	}
	if timeout <= 0 {
		timeout = DefaultHeavyTimeout
	}
	return &heavyGate{places: make(chan struct{}, n), wait: wait, timeout: timeout}
}

// enter takes a place, waiting up to g.wait; the release gives it back.
func (g *heavyGate) enter(ctx context.Context) (release func(), err error) {
	select {
	case g.places <- struct{}{}:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.places <- struct{}{}:
		case <-t.C:
			return nil, errHeavyBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return func() { <-g.places }, nil
}

// boundHeavy runs an expensive call (isHeavy) in one of the gate's places
// and under its time bound: 503 with Retry-After when no place comes free
// in time; the request's context ends at the bound, which the audit
// query, the peer search and the pages heed between their steps.
func (s *Server) boundHeavy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isHeavy(r) {
			next.ServeHTTP(w, r)
			return
		}
		release, err := s.heavy.enter(r.Context())
		if err != nil {
			if errors.Is(err, errHeavyBusy) {
				s.heavy.refused.Add(1)
			}
			if !strings.HasPrefix(r.URL.Path, "/api/") {
				w.Header().Set("Retry-After", "5")
				s.ui.Error(w, r, http.StatusServiceUnavailable, "limiterd is busy with other such requests; reload the page in a few seconds.")
				return
			}
			s.fail(w, r, err)
			return
		}
		s.heavy.ran.Add(1)
		defer release()
		ctx, cancel := context.WithTimeout(r.Context(), s.heavy.timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
