package web

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// pprofPrefix is where the Go runtime's profiles are served on the admin
// listener when admin.pprof is on (SetProfiling), to a token of scope
// admin only: a profile names the code's functions and the process's
// command line, and a CPU profile or trace costs CPU while it runs.
const pprofPrefix = "/debug/pprof/"

// SetProfiling turns the Go runtime's profiles on the admin listener
// (/debug/pprof/, admin.pprof) on or off; off, they answer 404. It takes
// effect at once and is safe to call while the listener serves.
func (s *Server) SetProfiling(on bool) { s.profiling.Store(on) }

// handlePprof serves /debug/pprof/…: the index, the named profiles
// (heap, goroutine, allocs, block, mutex, threadcreate), a CPU profile
// (profile?seconds=N), an execution trace (trace?seconds=N), symbol and
// cmdline — net/http/pprof's handlers, mounted on the admin router rather
// than on http.DefaultServeMux.
func (s *Server) handlePprof(w http.ResponseWriter, r *http.Request) {
	if !s.profiling.Load() {
		writeError(w, http.StatusNotFound, "profiling is off: set admin.pprof = true (and reload) to serve /debug/pprof/", "")
		return
	}
	name := strings.TrimPrefix(r.URL.Path, pprofPrefix)
	if h, ok := pprofHandlers[name]; ok {
		h(w, r)
		return
	}
	pprof.Handler(name).ServeHTTP(w, r)
}

// pprofHandlers are the pages that are not a named profile.
var pprofHandlers = map[string]http.HandlerFunc{
	"": pprof.Index, "cmdline": pprof.Cmdline, "profile": pprof.Profile, "symbol": pprof.Symbol, "trace": pprof.Trace,
}
